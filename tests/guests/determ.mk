# Determinism guests (SPEC §9): dynamic, and a static build of determ_clock
# (the vDSO must be hidden from both).
DETERM_GUEST_SRC := $(wildcard tests/guests/determ_*.c)
DETERM_GUESTS := $(patsubst tests/guests/%.c,$(O)/guests/%,$(DETERM_GUEST_SRC)) \
	$(O)/guests/determ_clock_static $(O)/guests/determ_hello_static
guests: $(DETERM_GUESTS)
DETERM_GUEST_CFLAGS := -O1 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -pthread

$(O)/guests/determ_%_static: tests/guests/determ_%.c
	@mkdir -p $(@D)
	$(CC) $(DETERM_GUEST_CFLAGS) -static -o $@ $<

$(O)/guests/determ_%: tests/guests/determ_%.c
	@mkdir -p $(@D)
	$(CC) $(DETERM_GUEST_CFLAGS) -o $@ $<
