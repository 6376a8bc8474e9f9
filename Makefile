# sbx — bounded, supervised, replayable sandboxes.
# Every folder's *.c goes into libsbx.a; bin/sbx-*.c are the tools;
# tests/unit/test_*.c are unit tests; folders may add rules in rules.mk.

SHELL   := /bin/bash
PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
O       ?= build
SAN     ?=
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-format-truncation -fPIC -I. $(SAN)
LDFLAGS += $(SAN) -Wl,--build-id
LDLIBS  := -lseccomp -lelf -ljansson -lcrypto -lpthread

DEB_PKGS := build-essential pkg-config libseccomp-dev libelf-dev libjansson-dev \
            libarchive-dev libssl-dev bats bats-assert bats-support clang \
            libclang-rt-14-dev mandoc strace make util-linux python3 python3-cryptography jq parallel \
            default-jdk-headless etcd-server etcd-client libcurl4-openssl-dev
BENCH_PKGS := proot bubblewrap criu hyperfine libpython3.11-testsuite runsc

LIB_DIRS := libcommon codec lease lease/backend lease/file lease/etcd lease/front trace trace/sys trace/tracee trace/box trace/sv trace/meter \
            trace/inspect trace/determ trace/record trace/record/reader trace/record/cmd \
            trace/run trace/call snap
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  := $(patsubst %.c,$(O)/obj/%.o,$(LIB_SRC))
LIB_HDR  := sbx.h $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.h)) $(wildcard trace/sys/*.def)
BIN_SRC  := $(wildcard bin/sbx-*.c)
BINS     := $(patsubst bin/%.c,$(O)/bin/%,$(BIN_SRC))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNITS    := $(patsubst tests/unit/%.c,$(O)/tests/%,$(UNIT_SRC))

.PHONY: all guests deps bench-deps check test unit bats asan fuzz install demo clean lint
all: $(O)/libsbx.a $(O)/libsbx.so $(BINS) $(UNITS) guests

# folders add their prerequisites (test guests, fuzz targets) in rules.mk
guests:

$(O)/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(O)/libsbx.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# the embedding library (sbx.h); tests/embed.bats links a program against it
$(O)/libsbx.so: $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libsbx.so -o $@ $^ $(LDLIBS)

$(O)/bin/%: bin/%.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(O)/libsbx.a $(LDLIBS)

$(O)/tests/%: tests/unit/%.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(O)/libsbx.a $(LDLIBS)

# The kernel-number check, generated: a check_nr per line of the table whose
# name <asm/unistd_64.h> defines, and one per name it defines (a number that
# differs, or a syscall the table lacks, fails make unit).
$(O)/gen/sysent_nr.h: trace/sys/syscalls.def
	@mkdir -p $(@D)
	{ sed -n 's/^SYSCALL(\([a-z0-9_]*\),.*/#ifdef __NR_\1\n\tcheck_nr("\1", __NR_\1);\n#endif/p' $<; \
	  printf '#include <asm/unistd_64.h>\n' | $(CC) -dM -E - | \
	  sed -n 's/^#define __NR_\([a-z0-9_]*\) .*/\tcheck_nr("\1", __NR_\1);/p'; } > $@.tmp && mv $@.tmp $@
$(O)/tests/test_sysent: $(O)/gen/sysent_nr.h
$(O)/tests/test_sysent: CFLAGS += -I$(O)/gen

-include $(wildcard */rules.mk tests/*/rules.mk)

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing$$(echo $$missing | sed 's/^/ /')"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

bench-deps: deps
	@missing=$$(for p in $(BENCH_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

unit: $(UNITS)
	@set -o pipefail; (fail=0; for t in $(UNITS); do $$t || fail=1; done; \
		tests/layers.sh $(O) || fail=1; exit $$fail) | tee $(O)/unit.log

# three files at a time (GNU parallel), each file's tests in order: most tests wait
# on guests, and every bound must hold on a loaded host anyway
BATS_JOBS ?= 3
bats: all
	set -o pipefail; SBX_BUILD=$(CURDIR)/$(O) bats --jobs $(BATS_JOBS) --no-parallelize-within-files \
		--timing --formatter tap tests/*.bats | tee $(O)/bats.tap

# check = deps (a no-op once installed) + test; test builds and runs every test only
check: deps
	$(MAKE) test

# the build runs a job per CPU; bats runs BATS_JOBS files at once, and the unit
# tests (which mostly wait on their guests) beside them, their output after
test:
	$(MAKE) -j$$(nproc) all
	@u=0; b=0; $(MAKE) unit >$(O)/unit.out 2>&1 & up=$$!; $(MAKE) bats || b=1; \
	wait $$up || u=1; cat $(O)/unit.out; \
	p=$$(awk '/ passed, [0-9]+ failed$$/ {p += $$(NF-3)} END {print p+0}' $(O)/unit.log); \
	f=$$(awk '/ passed, [0-9]+ failed$$/ {f += $$(NF-1)} END {print f+0}' $(O)/unit.log); \
	p=$$((p + $$(grep -c '^ok ' $(O)/bats.tap))); f=$$((f + $$(grep -c '^not ok ' $(O)/bats.tap))); \
	if [ $$u$$b != 00 ] && [ $$f = 0 ]; then f=1; fi; \
	echo "check: $$p passed, $$f failed"; [ $$u$$b = 00 ]

asan:
	$(MAKE) O=build-asan CC=clang SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -Wno-unknown-warning-option -Wno-missing-field-initializers" unit

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/sbx \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man3
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(O)/libsbx.a $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(O)/libsbx.so $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 sbx.h $(DESTDIR)$(PREFIX)/include/sbx/
	for d in $(LIB_DIRS); do install -d $(DESTDIR)$(PREFIX)/include/sbx/$$d; \
		for h in $$d/*.h $$d/*.def; do [ -e "$$h" ] || continue; case $$h in *-internal.h) ;; *) install -m 0644 $$h $(DESTDIR)$(PREFIX)/include/sbx/$$d/;; esac; done; done
	install -m 0644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 man/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	for t in $(notdir $(BINS)); do \
		install -m 0644 completions/sbx $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$t; done
	sed -e 's|@PREFIX@|$(PREFIX)|' sbx.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/sbx.pc

lint:
	mandoc -Tlint -Wwarning man/*.1 man/*.3

demo: deps
	$(MAKE) all
	SBX_BUILD=$(CURDIR)/$(O) sh examples/demo.sh

clean:
	rm -rf build build-asan build-fuzz
