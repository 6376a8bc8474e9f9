# snaptree guests (tests/snaptree.bats): every tests/snaptree/NAME.c becomes
# $(O)/guests/snaptree/NAME; non-PIE like the other snapshot guests, threads allowed.
SNAPTREE_GUESTS := $(patsubst tests/snaptree/%.c,$(O)/guests/snaptree/%,$(wildcard tests/snaptree/*.c))
guests: $(SNAPTREE_GUESTS)

$(O)/guests/snaptree/%: tests/snaptree/%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-pie -no-pie -pthread -D_GNU_SOURCE -Wall -Wextra -Werror -o $@ $<
