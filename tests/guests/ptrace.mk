# Guests of tests/ptrace.bats: ptrace_* tracers built as the run guests are,
# ptrace_leak_asan, an AddressSanitizer build whose LeakSanitizer stops the world
# with ptrace at exit, and ptrace_crash, unoptimized for a debugger's backtrace.
PTRACE_GUEST_SRC := $(filter-out tests/guests/ptrace_leak.c,$(wildcard tests/guests/ptrace_*.c))
PTRACE_GUESTS := $(patsubst tests/guests/%.c,$(O)/guests/%,$(PTRACE_GUEST_SRC)) \
	$(O)/guests/ptrace_leak_asan
guests: $(PTRACE_GUESTS)

$(O)/guests/ptrace_leak_asan: tests/guests/ptrace_leak.c
	@mkdir -p $(@D)
	clang -fsanitize=address -g -O0 -pthread -o $@ $<

$(O)/guests/ptrace_crash: tests/guests/ptrace_crash.c
	@mkdir -p $(@D)
	$(CC) -g -O0 -o $@ $<

$(O)/guests/ptrace_%: tests/guests/ptrace_%.c tests/guests/escape.h
	@mkdir -p $(@D)
	$(CC) $(RUN_GUEST_CFLAGS) -o $@ $<
