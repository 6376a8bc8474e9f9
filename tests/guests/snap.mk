# Snapshot guests: non-PIE so addresses are fixed; some also static.
SNAP_GUEST_SRC := $(wildcard tests/guests/snap_*.c)
SNAP_GUESTS := $(patsubst tests/guests/%.c,$(O)/guests/%,$(SNAP_GUEST_SRC)) \
	$(O)/guests/snap_heap_static $(O)/guests/snap_misc_static
guests: $(SNAP_GUESTS)
$(O)/tests/test_snap: | $(SNAP_GUESTS)

$(O)/guests/snap_%_static: tests/guests/snap_%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -static -o $@ $<

$(O)/guests/snap_%: tests/guests/snap_%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-pie -no-pie -o $@ $<

$(O)/guests/snap_thread: tests/guests/snap_thread.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-pie -no-pie -pthread -o $@ $<

$(O)/guests/snap_chainwriter: tests/guests/snap_chainwriter.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-pie -no-pie -pthread -o $@ $<
