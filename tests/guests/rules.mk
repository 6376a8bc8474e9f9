# Test guests: each topic adds its own .mk here.
include tests/guests/snap.mk
include tests/guests/meter.mk
include tests/guests/call.mk
include tests/guests/run.mk
include tests/guests/determ.mk
include tests/guests/ptrace.mk
