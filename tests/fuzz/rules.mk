# libFuzzer targets: every tests/fuzz/fuzz_*.c is linked against the library built
# by clang with ASan+UBSan into build-fuzz/, then run for FUZZ_TIME seconds.
# Seeds (optional) live in tests/fuzz/corpus/NAME/; findings land in build-fuzz/.
FUZZ_O      := build-fuzz
FUZZ_TIME   ?= 20
FUZZ_SRC    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS   := $(patsubst tests/fuzz/%.c,$(FUZZ_O)/%,$(FUZZ_SRC))
FUZZ_SAN    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. $(FUZZ_SAN)

$(FUZZ_O)/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_O)/libsbx.a: $(patsubst %.c,$(FUZZ_O)/obj/%.o,$(LIB_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_O)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_O)/libsbx.a $(LIB_HDR)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_O)/libsbx.a $(LDLIBS)

fuzz: $(FUZZ_BINS)
	@fail=0; for f in $(FUZZ_BINS); do n=$${f##*/}; \
		mkdir -p $(FUZZ_O)/corpus/$$n; \
		seeds=; [ -d tests/fuzz/corpus/$$n ] && seeds=tests/fuzz/corpus/$$n; \
		echo "fuzz: $$n for $(FUZZ_TIME)s"; \
		$$f -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
			-artifact_prefix=$(FUZZ_O)/$$n- $(FUZZ_O)/corpus/$$n $$seeds \
			>$(FUZZ_O)/$$n.log 2>&1 || { fail=1; echo "fuzz: $$n FAILED (see $(FUZZ_O)/$$n.log)"; tail -30 $(FUZZ_O)/$$n.log; }; \
	done; exit $$fail
