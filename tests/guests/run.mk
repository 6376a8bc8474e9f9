# sbx-run guests: run_* behaviour guests and escape_* hostile guests,
# dynamic by default; run_hello and escape_int80 also static.
RUN_GUEST_SRC := $(wildcard tests/guests/run_*.c tests/guests/escape_*.c)
RUN_GUESTS := $(patsubst tests/guests/%.c,$(O)/guests/%,$(RUN_GUEST_SRC)) \
	$(O)/guests/run_hello_static $(O)/guests/escape_int80_static
guests: $(RUN_GUESTS)
RUN_GUEST_CFLAGS := -O1 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -pthread

$(O)/guests/run_%_static: tests/guests/run_%.c tests/guests/escape.h
	@mkdir -p $(@D)
	$(CC) $(RUN_GUEST_CFLAGS) -static -o $@ $<

$(O)/guests/escape_%_static: tests/guests/escape_%.c tests/guests/escape.h
	@mkdir -p $(@D)
	$(CC) $(RUN_GUEST_CFLAGS) -static -o $@ $<

$(O)/guests/run_%: tests/guests/run_%.c tests/guests/escape.h
	@mkdir -p $(@D)
	$(CC) $(RUN_GUEST_CFLAGS) -o $@ $<

$(O)/guests/escape_%: tests/guests/escape_%.c tests/guests/escape.h
	@mkdir -p $(@D)
	$(CC) $(RUN_GUEST_CFLAGS) -o $@ $<
