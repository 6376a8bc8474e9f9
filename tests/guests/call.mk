# sbx_call guests: the caller's own executable becomes the guest, so
# these are non-PIE (ET_EXEC) with a build-id, linked against libsbx; one PIE
# build checks the refusal.
CALL_GUESTS := $(O)/guests/call_modes $(O)/guests/call_modes_pie $(O)/guests/readfile \
	$(O)/guests/call_state $(O)/guests/call_host $(O)/guests/call_warm
guests: $(CALL_GUESTS)

$(O)/guests/call_modes: tests/guests/call_modes.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fno-pie -no-pie -Wl,--build-id -o $@ $< $(O)/libsbx.a $(LDLIBS)

$(O)/guests/call_modes_pie: tests/guests/call_modes.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIE -pie -Wl,--build-id -o $@ $< $(O)/libsbx.a $(LDLIBS)

$(O)/guests/readfile: examples/readfile/readfile.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fno-pie -no-pie -Wl,--build-id -o $@ $< $(O)/libsbx.a $(LDLIBS)

$(O)/guests/call_state: tests/guests/call_state.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fno-pie -no-pie -Wl,--build-id -o $@ $< $(O)/libsbx.a $(LDLIBS)

$(O)/guests/call_host: tests/guests/call_host.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fno-pie -no-pie -Wl,--build-id -o $@ $< $(O)/libsbx.a $(LDLIBS)

$(O)/guests/call_warm: tests/guests/call_warm.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fno-pie -no-pie -Wl,--build-id -o $@ $< $(O)/libsbx.a $(LDLIBS)
