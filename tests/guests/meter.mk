# Metering, inspection and state-transport guests, and inspect_host and
# layer_host, host programs embedding the C inspection API and the supervisor's
# layers (linked with libsbx).
METER_GUESTS := $(O)/guests/meter_hog $(O)/guests/meter_hold $(O)/guests/meter_store \
	$(O)/guests/meter_load $(O)/guests/meter_race $(O)/guests/meter_vec $(O)/guests/meter_copy $(O)/guests/meter_map \
	$(O)/guests/meter_exact $(O)/guests/meter_leader \
	$(O)/guests/inspect_open $(O)/guests/inspect_mem \
	$(O)/guests/inspect_writev $(O)/guests/inspect_threads $(O)/guests/inspect_loop
METER_LIBSBX := $(O)/guests/state_echo $(O)/guests/inspect_host $(O)/guests/layer_host
guests: $(METER_GUESTS) $(METER_LIBSBX)

$(O)/guests/meter_%: tests/guests/meter_%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -Wall -D_GNU_SOURCE -pthread -o $@ $<

$(O)/guests/inspect_%: tests/guests/inspect_%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -Wall -D_GNU_SOURCE -pthread -o $@ $<

$(METER_LIBSBX): $(O)/guests/%: tests/guests/%.c $(O)/libsbx.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(O)/libsbx.a $(LDLIBS)
