#!/usr/bin/env bats
# sbx-lease: lifecycle through pipes, every refusal (store unchanged), slots, expiry, verify.
# Run as lease.bats against a store directory; as lease_etcd.bats (a link to this
# file) against a 3-member etcd cluster, with LOCAL as the host's part of the store.
load helpers

setup_file() {
	if [ "$(basename "$BATS_TEST_FILENAME")" = lease_etcd.bats ]; then
		sbx_etcd_start
	fi
}

teardown_file() {
	sbx_etcd_stop
}

setup() {
	sbx_setup_store
	LOCAL=$SBX_STORE
	if [ -n "${SBX_TEST_ETCD:-}" ]; then
		export SBX_HOST_DIR=$LOCAL
		SBX_STORE=$(sbx_etcd_url "t$BATS_TEST_NUMBER")
	fi
	cd "$BATS_TEST_TMPDIR"
}

# Content digest of the whole store (names + bytes), to prove a refusal changed nothing.
store_sum() {
	(cd "$LOCAL" && find . -print | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
	 if [ -n "${SBX_TEST_ETCD:-}" ]; then sbx_etcdctl get --prefix "/t$BATS_TEST_NUMBER/" -w json | jq -c .kvs; fi) | sha256sum
}

# Another store (its receipts are not this store's).
other_store() {
	if [ -n "${SBX_TEST_ETCD:-}" ]; then
		SBX_HOST_DIR="$BATS_TEST_TMPDIR/other" SBX_STORE=$(sbx_etcd_url "o$BATS_TEST_NUMBER") "$@"
	else
		SBX_STORE="$BATS_TEST_TMPDIR/other" "$@"
	fi
}

# Re-digest an edited receipt exactly as sbx does (canonical JSON, domain prefix).
redigest() {
	local body
	body=$(jq -cS 'del(.digest, .sig)' <<<"$1")
	local d
	d=$( (printf 'sbx/receipt/v1\0'; printf '%s' "$body") | sha256sum | cut -d' ' -f1)
	jq -c --arg d "$d" '.digest = $d' <<<"$1"
}

new_lease() {
	sbx-lease request --image /bin/true "$@"
}

@test "happy path Requested to Destroyed through pipes, verified" {
	run bash -c 'sbx-lease request --image /bin/true --escrow 5 --fees fuel=2 |
		sbx-lease fund --amount 7 --evidence - |
		sbx-lease activate --evidence - |
		sbx-lease observe --usage fuel=2,memory=4K --evidence - |
		sbx-lease settle --evidence - |
		sbx-lease expire --evidence - |
		sbx-lease destroy --evidence -'
	assert_success
	id=$(jq -r .lease.id <<<"$output")
	assert_equal "$(jq -r .lease.state <<<"$output")" Destroyed
	assert_equal "$(jq -r .lease.usage.memory <<<"$output")" 4096
	# settlement: cost 2*2 = 4 charged of escrow 7, 3 refunded
	assert_equal "$(jq -r .lease.charge <<<"$output")" 4
	assert_equal "$(jq -r .lease.refund <<<"$output")" 3
	run sbx-lease log "$id"
	assert_success
	assert_equal "$(jq -r .edge <<<"$output" | tr '\n' ' ')" "request fund activate observe settle expire destroy "
	assert_equal "$(jq -r .seq <<<"$output" | tr '\n' ' ')" "0 1 2 3 4 5 6 "
	# each receipt's prev is the previous digest
	run bash -c "sbx-lease log $id | jq -r '[.prev, .digest] | @tsv'"
	prevs=$(cut -f1 <<<"$output" | tail -n +2)
	digs=$(cut -f2 <<<"$output" | head -n -1)
	assert_equal "$prevs" "$digs"
	run sbx-lease verify
	assert_success
	assert_equal "$(jq -r .ok <<<"$output")" true
	[ ! -e "$LOCAL/ns/$id" ]
}

@test "store is created 0700 with its authority key" {
	run sbx-lease clock
	assert_success
	assert_equal "$(stat -c %a "$LOCAL")" 700
	[ -s "$LOCAL/authority.key" ]
	[ -s "$LOCAL/authority.pub" ]
	assert_equal "$(jq -r .mode <<<"$output")" wall
}

# patch BYTES (printf escapes) into a copy of /bin/true at OFFSET
patched() {
	cp /bin/true "$1"
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

@test "image validation names the file and the defect" {
	patched c32 4 '\001'
	run sbx-lease request --image c32
	assert_failure 1
	assert_output --partial "c32: not ELF64"
	patched arm 18 '\267\000'
	run sbx-lease request --image arm
	assert_output --partial "arm: machine 183 is not x86-64"
	patched rel 16 '\001\000'
	run sbx-lease request --image rel
	assert_output --partial "rel: ELF type 1 is not an executable"
	head -c 200 /bin/true >short
	run sbx-lease request --image short
	assert_output --partial "short: program header table lies outside the file"
	interp=/lib64/ld-linux-x86-64.so.2
	off=$(grep -obUa "$interp" /bin/true | head -1 | cut -d: -f1)
	patched badinterp $((off + ${#interp})) 'X'
	run sbx-lease request --image badinterp
	assert_output --partial "badinterp: PT_INTERP: interpreter path is not one NUL-terminated string"
	run sbx-lease request --image missing
	assert_output --partial "missing"
	run sbx-lease request --image "$BATS_TEST_TMPDIR"
	assert_output --partial "not a regular file"
}

@test "a non-empty directory that is not a store is refused and left alone" {
	mkdir other
	echo keep >other/file
	chmod 755 other
	run sbx-lease --store other list
	assert_failure 1
	assert_output "sbx-lease: error: store other: not an sbx store: directory is not empty and has no authority.key"
	assert_equal "$(ls other)" file
	assert_equal "$(stat -c %a other)" 755
}

@test "--format text gives tables for show, list and log" {
	new_lease --principal alice >req.json
	id=$(jq -r .lease.id req.json)
	run sbx-lease --format text show "$id"
	assert_success
	assert_line --regexp "^state +Requested"
	assert_line --regexp "^principal +alice"
	run sbx-lease --format text list
	assert_success
	assert_line --index 0 --regexp "^ID +STATE +PRINCIPAL"
	assert_line --index 1 --regexp "^$id +Requested +alice"
	run sbx-lease --format text log "$id"
	assert_success
	assert_line --index 1 --regexp "^0 +request +- +Requested"
}

@test "list filters by principal and state" {
	new_lease --principal alice | sbx-lease fund --amount 1 --evidence - >/dev/null
	new_lease --principal alice >/dev/null
	new_lease --principal bob >/dev/null
	run sbx-lease list --principal alice
	assert_equal "${#lines[@]}" 2
	run sbx-lease list --principal alice --state Funded
	assert_equal "${#lines[@]}" 1
	assert_equal "$(jq -r .state <<<"$output")" Funded
	run sbx-lease list --state Nope
	assert_failure
	assert_output --partial 'unknown state "Nope"'
}

@test "undeclared edge is refused naming edge and state; store unchanged" {
	sbx-lease clock manual >/dev/null
	new_lease >req.json
	id=$(jq -r .lease.id req.json)
	before=$(store_sum)
	run sbx-lease activate "$id" --evidence req.json
	assert_failure 1
	assert_output "sbx-lease: error: cannot activate lease $id: state is Requested, activate needs Funded"
	run sbx-lease expire --evidence req.json
	assert_failure
	assert_output --partial "batch 0 is before the deadline 3600"
	run sbx-lease destroy --evidence req.json
	assert_failure
	assert_output --partial "state is Requested, destroy needs Expired"
	assert_equal "$(store_sum)" "$before"
}

@test "tampered, forged and other-lease evidence is refused; store unchanged" {
	new_lease >a.json
	new_lease >b.json
	a=$(jq -r .lease.id a.json)
	b=$(jq -r .lease.id b.json)
	before=$(store_sum)
	# tampered: a field edited, digest left alone
	jq -c '.receipt.batch = 7' a.json >t.json
	run sbx-lease fund --amount 1 --evidence t.json
	assert_failure
	assert_output --partial "tampered"
	# forged: edited and re-digested, but the signature is not the store's
	redigest "$(jq -c '.receipt.batch = 7' a.json | jq -c .receipt)" >f.json
	run sbx-lease fund --amount 1 --evidence f.json
	assert_failure
	assert_output --partial "forged"
	# a receipt from another store
	other_store sbx-lease request --image /bin/true >o.json
	run sbx-lease fund "$a" --amount 1 --evidence o.json
	assert_failure
	assert_output --partial "forged"
	# other lease's (valid) receipt
	run sbx-lease fund "$a" --amount 1 --evidence b.json
	assert_failure
	assert_output --partial "receipt is for lease $b, not $a"
	# not JSON at all
	echo 'garbage' >g.json
	run sbx-lease fund "$a" --amount 1 --evidence g.json
	assert_failure
	assert_output --partial "g.json"
	assert_equal "$(store_sum)" "$before"
}

@test "replayed evidence (not the head) is refused; store unchanged" {
	new_lease >req.json
	sbx-lease fund --amount 3 --evidence req.json >fund.json
	before=$(store_sum)
	run sbx-lease activate --evidence req.json
	assert_failure
	assert_output --partial "replayed: receipt seq 0 (request)"
	run sbx-lease fund --amount 3 --evidence req.json
	assert_failure
	assert_output --partial "replayed"
	assert_equal "$(store_sum)" "$before"
	run sbx-lease activate --evidence fund.json
	assert_success
}

@test "a Destroyed lease is terminal; store unchanged" {
	run bash -c 'sbx-lease request --image /bin/true --lifetime 1 | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - | sbx-lease settle --evidence - |
		sbx-lease expire --evidence - | sbx-lease destroy --evidence -'
	assert_success
	echo "$output" >d.json
	id=$(jq -r .lease.id d.json)
	before=$(store_sum)
	for edge in fund activate expire destroy settle; do
		run sbx-lease $edge "$id" --amount 1 --evidence d.json
		[ "$edge" = fund ] || run sbx-lease $edge "$id" --evidence d.json
		assert_failure
		assert_output --partial "state is Destroyed"
		assert_output --partial "(Destroyed is terminal)"
	done
	assert_equal "$(store_sum)" "$before"
}

@test "usage observations are monotonic; a lower one is refused; store unchanged" {
	new_lease | sbx-lease fund --amount 1 --evidence - | sbx-lease activate --evidence - |
		sbx-lease observe --usage fuel=10,storage_read=5 --evidence - >o.json
	id=$(jq -r .lease.id o.json)
	before=$(store_sum)
	run sbx-lease observe --usage fuel=9 --evidence o.json
	assert_failure
	assert_output "sbx-lease: error: cannot observe lease: $id: fuel 9 is below the recorded 10 (usage is monotonic)"
	run sbx-lease observe --usage fuel=11,bogus=1 --evidence o.json
	assert_failure
	assert_output --partial 'unknown dimension "bogus"'
	assert_equal "$(store_sum)" "$before"
	run sbx-lease observe --usage fuel=11 --evidence o.json
	assert_success
	assert_equal "$(jq -r .lease.usage.storage_read <<<"$output")" 5
	assert_equal "$(jq -r .lease.usage.fuel <<<"$output")" 11
}

@test "limits above ceilings, negative, non-integer or unknown are refused; store unchanged" {
	sbx-lease clock >/dev/null
	before=$(store_sum)
	run new_lease --limits fuel=1000000001
	assert_failure
	assert_output --partial "fuel: 1000000001 exceeds the ceiling 1000000000"
	run new_lease --limits memory=2G
	assert_failure
	assert_output --partial "exceeds the ceiling 1073741824"
	run new_lease --limits output_values=-1
	assert_failure
	assert_output --partial 'negative value "-1"'
	run new_lease --limits memory=1.5
	assert_failure
	assert_output --partial "not a non-negative integer"
	run new_lease --limits cpu=5
	assert_failure
	assert_output --partial 'unknown dimension "cpu"'
	run new_lease --lifetime 1000001
	assert_failure
	assert_output --partial "outside 1..1000000"
	run new_lease --fees fuel=x
	assert_failure
	run sbx-lease request --image /etc/passwd
	assert_failure
	assert_output --partial "/etc/passwd: not an ELF file"
	run new_lease --principal ../evil
	assert_failure
	assert_output --partial '"../evil" is not a plain name'
	run new_lease --host-program ''
	assert_failure
	run new_lease --escrow 1.5
	assert_failure
	assert_equal "$(store_sum)" "$before"
	run new_lease --limits memory=64M,table_elements=1024,lifetime=10
	assert_success
	assert_equal "$(jq -r .lease.limits.memory <<<"$output")" 67108864
	assert_equal "$(jq -r .lease.lifetime <<<"$output")" 10
}

@test "request #33 for one principal is refused; expiry releases exactly one slot" {
	sbx-lease clock manual >/dev/null
	new_lease --principal p --lifetime 1 >r1.json
	for i in $(seq 2 32); do new_lease --principal p >"r$i.json"; done
	before=$(store_sum)
	run new_lease --principal p
	assert_failure
	assert_output --partial "principal p already holds 32 live leases"
	assert_equal "$(store_sum)" "$before"
	new_lease --principal q >/dev/null # other principals are unaffected
	sbx-lease tick >/dev/null
	new_lease --principal p >/dev/null # r1 passed its deadline: its slot is free
	id1=$(jq -r .lease.id r1.json)
	assert_equal "$(sbx-lease show "$id1" | jq -r .lease.state)" Expired
	run new_lease --principal p
	assert_failure
	# destroying the expired lease does not release it again
	sbx-lease log "$id1" | tail -n 1 | sbx-lease destroy --evidence - >/dev/null
	run new_lease --principal p
	assert_failure
	assert_output --partial "already holds 32"
	run sbx-lease verify
	assert_success
}

@test "deadlines act by themselves: overdue leases expire before any decision that counts them" {
	sbx-lease clock manual >/dev/null
	for i in $(seq 32); do new_lease --principal d --lifetime 2 >"r$i.json"; done
	new_lease --principal e --lifetime 2 --escrow 1 >req.json
	new_lease --principal e --lifetime 2 --escrow 1 | sbx-lease fund --amount 1 --evidence - >fund.json
	sbx-lease tick 2 >/dev/null
	# 32 overdue Requested leases do not block the principal's next request
	run new_lease --principal d
	assert_success
	for i in 1 17 32; do
		id=$(jq -r .lease.id "r$i.json")
		assert_equal "$(sbx-lease log "$id" | tail -n 1 | jq -r '"\(.edge) \(.to) \(.batch)"')" \
			"expire Expired 2"
	done
	# a past-deadline lease can be neither funded nor activated: it expires instead
	run sbx-lease fund --amount 1 --evidence req.json
	assert_failure
	assert_output --partial "state is Expired"
	run sbx-lease activate --evidence fund.json
	assert_failure
	assert_output --partial "state is Expired"
	assert_equal "$(sbx-lease show "$(jq -r .lease.id fund.json)" | jq -r .lease.refund)" 1
	# an Active lease no run holds and a Settled one free their slots at the deadline too
	for i in $(seq 30); do new_lease --principal f >/dev/null; done
	act=$(new_lease --principal f --lifetime 2 | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - | jq -r .lease.id)
	set=$(new_lease --principal f --lifetime 2 | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - | sbx-lease settle --evidence - | jq -r .lease.id)
	run new_lease --principal f
	assert_failure
	assert_output --partial "already holds 32"
	sbx-lease tick 2 >/dev/null
	run new_lease --principal f
	assert_success
	assert_equal "$(sbx-lease show "$act" | jq -r .lease.state) $(sbx-lease show "$set" | jq -r .lease.state)" \
		"Expired Expired"
	run sbx-lease verify
	assert_success
}

@test "64 concurrent requests for one principal admit exactly 32" {
	[ -z "${SBX_TEST_ETCD:-}" ] || skip "lease_fleet.bats races 64 requests from 4 hosts on etcd"
	for i in $(seq 64); do
		(sbx-lease request --image /bin/true --principal racer >"c$i.out" 2>"c$i.err"; echo $? >"c$i.rc") &
	done
	wait
	ok=$(cat c*.rc | grep -c '^0$')
	refused=$(grep -l "already holds 32" c*.err | wc -l)
	assert_equal "$ok" 32
	assert_equal "$refused" 32
	run sbx-lease list --principal racer
	assert_equal "${#lines[@]}" 32
	run sbx-lease verify
	assert_success
}

@test "expiry of Requested, Funded and Active leases at the deadline (manual clock)" {
	sbx-lease clock manual >/dev/null
	new_lease --lifetime 3 >req.json
	new_lease --lifetime 3 | sbx-lease fund --amount 2 --evidence - >fund.json
	new_lease --lifetime 3 --fees fuel=1 | sbx-lease fund --amount 2 --evidence - |
		sbx-lease activate --evidence - >act.json
	sbx-lease tick 2 >/dev/null
	before=$(store_sum)
	for f in req fund act; do
		run sbx-lease expire --evidence $f.json
		assert_failure
		assert_output --partial "batch 2 is before the deadline 3"
	done
	assert_equal "$(store_sum)" "$before"
	run sbx-lease tick
	assert_equal "$(jq -r .batch <<<"$output")" 3
	for f in req fund act; do
		run sbx-lease expire --evidence $f.json
		assert_success
		assert_equal "$(jq -r .lease.state <<<"$output")" Expired
	done
	assert_equal "$(jq -r .lease.refund <<<"$output")" 2
	run sbx-lease verify
	assert_success
}

@test "clock switches keep the batch monotonic; tick needs manual mode" {
	run sbx-lease tick
	assert_failure
	assert_output --partial "wall mode"
	sbx-lease clock manual >/dev/null
	sbx-lease tick 5 >/dev/null
	run sbx-lease clock wall
	assert_success
	b=$(jq -r .batch <<<"$output")
	[ "$b" -ge 5 ]
	run sbx-lease clock manual
	[ "$(jq -r .batch <<<"$output")" -ge "$b" ]
}

@test "usage above a bound closes Active into Settling naming the dimension" {
	new_lease --limits output_values=10 | sbx-lease fund --amount 1 --evidence - |
		sbx-lease activate --evidence - >act.json
	run sbx-lease observe --usage output_values=11 --evidence act.json
	assert_success
	assert_equal "$(jq -r .receipt.edge <<<"$output")" settle
	assert_equal "$(jq -r .receipt.reason <<<"$output")" output_values
	assert_equal "$(jq -r .lease.state <<<"$output")" Settling
	assert_equal "$(jq -r .lease.usage.output_values <<<"$output")" 11
	# escrow: cost 3*5 = 15 > 10 funded
	new_lease --fees storage_write=3 | sbx-lease fund --amount 10 --evidence - |
		sbx-lease activate --evidence - >act2.json
	run sbx-lease observe --usage storage_write=5 --evidence act2.json
	assert_success
	assert_equal "$(jq -r .receipt.reason <<<"$output")" escrow
	# settlement charges min(cost, escrow) = 10, refunds 0
	run sbx-lease expire --evidence - <<<"$output"
	assert_success
	assert_equal "$(jq -r .lease.charge <<<"$output")" 10
	assert_equal "$(jq -r .lease.refund <<<"$output")" 0
}

@test "lifetime reached during an observation closes the lease" {
	sbx-lease clock manual >/dev/null
	new_lease --lifetime 2 | sbx-lease fund --amount 1 --evidence - |
		sbx-lease activate --evidence - >act.json
	sbx-lease tick 2 >/dev/null
	run sbx-lease observe --usage fuel=1 --evidence act.json
	assert_success
	assert_equal "$(jq -r .receipt.reason <<<"$output")" lifetime
}

@test "destroy deletes the namespace and records a digest of its contents" {
	sbx-lease clock manual >/dev/null
	new_lease --lifetime 1 | sbx-lease fund --amount 0 --evidence - >f.json
	id=$(jq -r .lease.id f.json)
	ns="$LOCAL/ns/$id"
	[ -d "$ns" ]
	mkdir -p "$ns/dir"
	printf 'hello' >"$ns/a"
	printf 'xy' >"$ns/dir/b"
	sbx-lease tick >/dev/null
	sbx-lease expire --evidence f.json | sbx-lease destroy --evidence - >d.json
	assert_equal "$(jq -r .receipt.cells d.json)" 2
	# namespace bytes: len("a")+5 + len("dir/b")+2
	assert_equal "$(jq -r .receipt.bytes d.json)" 13
	expect=$( (printf 'sbx/namespace/v1\0'
		printf '\001\0\0\0\0\0\0\0a\005\0\0\0\0\0\0\0hello'
		printf '\005\0\0\0\0\0\0\0dir/b\002\0\0\0\0\0\0\0xy') | sha256sum | cut -d' ' -f1)
	assert_equal "$(jq -r .receipt.destroyed d.json)" "$expect"
	[ ! -e "$ns" ]
}

# Where the store keeps lease $1's record, and a receipt line (seq $2 of lease $1),
# as verify names them; and how to rewrite one (stored text in, stored text out).
rec_name() {
	if [ -n "${SBX_TEST_ETCD:-}" ]; then echo "etcd lease/$1"; else echo "leases/$1.json"; fi
}

receipt_name() {
	if [ -n "${SBX_TEST_ETCD:-}" ]; then printf 'etcd receipt/%s/%020d' "$1" "$2"; else echo "journal.jsonl:$3"; fi
}

# rewrite_record ID CMD...: the record's stored text through CMD
rewrite_record() {
	local id=$1 new
	shift
	if [ -n "${SBX_TEST_ETCD:-}" ]; then
		new=$(sbx_etcdctl get --print-value-only "/t$BATS_TEST_NUMBER/lease/$id" | "$@")
		sbx_etcdctl put "/t$BATS_TEST_NUMBER/lease/$id" "$new" >/dev/null
	else
		"$@" <"$LOCAL/leases/$id.json" >"$LOCAL/leases/$id.json.new"
		mv "$LOCAL/leases/$id.json.new" "$LOCAL/leases/$id.json"
	fi
}

# rewrite_receipt ID SEQ LINE CMD...: that receipt's stored text (journal line LINE) through CMD
rewrite_receipt() {
	local id=$1 seq=$2 line=$3 new key
	shift 3
	if [ -n "${SBX_TEST_ETCD:-}" ]; then
		key=$(printf '/t%s/receipt/%s/%020d' "$BATS_TEST_NUMBER" "$id" "$seq")
		new=$(sbx_etcdctl get --print-value-only "$key" | "$@")
		sbx_etcdctl put "$key" "$new" >/dev/null
	else
		new=$(sed -n "${line}p" "$LOCAL/journal.jsonl" | "$@")
		awk -v l="$new" -v n="$line" 'NR==n {print l; next} {print}' "$LOCAL/journal.jsonl" >"$LOCAL/j.new"
		mv "$LOCAL/j.new" "$LOCAL/journal.jsonl"
	fi
}

garbage() {
	cat >/dev/null
	echo garbage
}

redigest_in() {
	redigest "$(cat)"
}

@test "verify catches a hand-edited lease record" {
	new_lease | sbx-lease fund --amount 4 --evidence - >f.json
	id=$(jq -r .lease.id f.json)
	run sbx-lease verify
	assert_success
	rewrite_record "$id" jq -c '.lease.escrow = 400'
	run sbx-lease verify
	assert_failure 1
	assert_output --partial "$(rec_name "$id"): record disagrees with its receipt chain"
	run sbx-lease verify "$id"
	assert_failure
	# a record that is not even JSON is reported too, and other leases still work
	rewrite_record "$id" garbage
	run sbx-lease verify
	assert_failure 1
	assert_output --partial "$(rec_name "$id"):1:"
	run sbx-lease request --image /bin/true
	assert_success
}

@test "verify catches a hand-edited journal line" {
	new_lease | sbx-lease fund --amount 4 --evidence - >f.json
	id=$(jq -r .lease.id f.json)
	new_lease >/dev/null
	rewrite_receipt "$id" 1 2 sed 's/"amount":4/"amount":40/'
	run sbx-lease verify
	assert_failure
	assert_output --partial "$(receipt_name "$id" 1 2): receipt digest does not match its contents (tampered)"
	# re-digested: the signature no longer verifies
	rewrite_receipt "$id" 1 2 redigest_in
	run sbx-lease verify
	assert_failure
	assert_output --partial "$(receipt_name "$id" 1 2): receipt signature does not verify"
}

@test "every tool with commands names an unknown one the same way, exit 2 with usage" {
	for tool in sbx-lease sbx-snap sbx-trace; do
		run "$tool" frob
		assert_failure 2
		assert_line --index 0 "$tool: error: unknown command \"frob\""
		assert_output --partial "usage: $tool"
	done
}

@test "every tool names a bad option the same way, with its usage and its usage status" {
	for tool in sbx-lease sbx-snap sbx-trace sbx-run sbx-restore; do
		case $tool in sbx-run | sbx-restore) code=125 ;; *) code=2 ;; esac
		case $tool in sbx-lease | sbx-snap) verb=list ;; sbx-trace) verb=stats ;; *) verb= ;; esac
		run "$tool" $verb --frob x
		assert_failure $code
		assert_line --index 0 "$tool: error: --frob: unknown option"
		assert_output --partial "usage: $tool"
		run "$tool" $verb --store
		assert_failure $code
		assert_line --index 0 "$tool: error: --store: needs a value"
	done
	run sbx-snap
	assert_failure 2
	assert_line --index 0 "sbx-snap: error: missing command"
	run sbx-trace diff a
	assert_failure 2
	assert_line --index 0 "sbx-trace: error: diff: takes 2 operands, not 1"
}

@test "sbx-lease takes its options before or after the command; -- ends them" {
	id=$(sbx-lease --image /bin/true --principal p request | jq -r .lease.id)
	run sbx-lease list --format=json
	assert_success
	after=$output
	run sbx-lease --format=json list
	assert_success
	assert_output "$after"
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	run sbx-lease --principal p --format text list --state Requested
	assert_success
	assert_line --partial "$id"
	run sbx-lease show -- "$id"
	assert_success
	run sbx-lease --amount 3 show "$id"
	assert_failure 2
	assert_line --index 0 "sbx-lease: error: --amount: not an option of this command"
	run sbx-lease --frob list
	assert_failure 2
	assert_line --index 0 "sbx-lease: error: --frob: unknown option"
	run sbx-lease list --format
	assert_failure 2
	assert_line --index 0 "sbx-lease: error: --format: needs a value"
	run sbx-lease --format=text=x list
	assert_failure 2
	assert_line --index 0 "sbx-lease: error: --format: unknown format \"text=x\" (json or text)"
}

@test "bad command lines exit 2 with usage" {
	run sbx-lease
	assert_failure 2
	assert_output --partial "usage: sbx-lease"
	run sbx-lease frobnicate
	assert_failure 2
	run sbx-lease fund --evidence x
	assert_failure 2
	assert_output --partial "fund: needs --amount"
	run sbx-lease show not-an-id
	assert_failure 1
	assert_output --partial "not a lease id"
}

# A caller of its own: another configuration directory, so none of the test's keys.
as_other() { XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/other" "$@"; }

@test "a principal is proven by its key: without it, or with another, nothing of its leases moves" {
	new_lease --principal alice | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - >act.json
	new_lease --principal bob >/dev/null
	new_lease --principal alice >req2.json
	before=$(store_sum)
	for how in "" "--principal-key $XDG_CONFIG_HOME/sbx/principals/bob"; do
		# shellcheck disable=SC2086
		run as_other sbx-lease settle --evidence act.json $how
		assert_failure
		assert_output --partial "sbx-lease: error: principal alice: not signed by its key"
		# shellcheck disable=SC2086
		run as_other sbx-lease fund --amount 1 --evidence req2.json $how
		assert_failure
		assert_output --partial "sbx-lease: error: principal alice: not signed by its key"
	done
	# a request in alice's name by a caller with another key is refused too
	run as_other sbx-lease request --image /bin/true --principal alice
	assert_failure
	assert_output --partial "principal alice: not signed by its key"
	assert_equal "$(store_sum)" "$before"
	# the key was made at first use, 0600 in a 0700 directory, never in the store
	[ "$(stat -c %a "$XDG_CONFIG_HOME/sbx/principals")" = 700 ]
	[ "$(stat -c %a "$XDG_CONFIG_HOME/sbx/principals/alice")" = 600 ]
	! grep -rqF "$(cut -c1-64 "$XDG_CONFIG_HOME/sbx/principals/alice")" "$LOCAL" || false
	pub=$(cut -c65-128 "$XDG_CONFIG_HOME/sbx/principals/alice")
	# receipts and the record name the renter's public key
	assert_equal "$(sbx-lease log "$(jq -r .lease.id act.json)" | jq -r .renter | sort -u | grep -v null)" "$pub"
	assert_equal "$(jq -r .lease.renter act.json)" "$pub"
	sbx-lease settle --evidence act.json >set.json
	sbx-lease expire --evidence set.json >exp.json
	before=$(store_sum)
	run as_other sbx-lease destroy --evidence exp.json
	assert_failure
	assert_output --partial "principal alice: not signed by its key"
	assert_equal "$(store_sum)" "$before"
	# the key itself, named with --principal-key, works from anywhere
	as_other sbx-lease destroy --evidence exp.json \
		--principal-key "$XDG_CONFIG_HOME/sbx/principals/alice" >/dev/null
	sbx-lease verify
}

@test "a damaged, truncated or mismatched principal key file is refused clearly, nothing changes" {
	new_lease --principal alice | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - >act.json
	key=$XDG_CONFIG_HOME/sbx/principals/alice
	head -c 50 "$key" >trunc.key
	{ cut -c1-64 "$key" | tr -d '\n'; cut -c1-64 "$key"; } >mismatch.key
	printf 'zz%s' "$(cut -c3-128 "$key")" >junk.key
	: >empty.key
	head -c 100000 /dev/zero >huge.key
	before=$(store_sum)
	for k in trunc mismatch junk empty huge; do
		run sbx-lease settle --evidence act.json --principal-key "$k.key"
		assert_failure
		assert_output --regexp "^sbx-lease: error: principal alice: "
		[[ $output == *"damaged"* || $output == *"larger than"* ]] || {
			echo "$k: $output"; false; }
	done
	run sbx-lease settle --evidence act.json --principal-key missing.key
	assert_failure
	assert_output --partial "principal alice: not signed by its key (no key missing.key"
	assert_equal "$(store_sum)" "$before"
}

@test "verify checks every renter signature against the key recorded for the principal" {
	[ -z "${SBX_TEST_ETCD:-}" ] || skip "the directory store's record of a principal"
	new_lease --principal alice | sbx-lease fund --amount 0 --evidence - >/dev/null
	new_lease --principal bob >/dev/null
	sbx-lease verify
	# a principal's record replaced behind the store's back
	cp "$LOCAL/principals/bob.pub" "$LOCAL/principals/alice.pub"
	run sbx-lease verify
	assert_failure
	assert_output --partial "not the key recorded for principal alice"
}

@test "sbx-run --ephemeral in another principal's name needs its key: refused, nothing requested" {
	new_lease --principal alice >/dev/null
	n=$(sbx-lease list | wc -l)
	run as_other sbx-run --ephemeral --principal alice -- /bin/true
	assert_equal "$status" 125
	assert_output --partial "sbx-run: error: principal alice: not signed by its key"
	assert_equal "$(sbx-lease list | wc -l)" "$n"
	as_other sbx-run --ephemeral --principal alice \
		--principal-key "$XDG_CONFIG_HOME/sbx/principals/alice" --result r.json -- /bin/true
	assert_equal "$(jq -r '.receipts[] | select(.edge == "destroy") | .renter' r.json)" \
		"$(cut -c65-128 "$XDG_CONFIG_HOME/sbx/principals/alice")"
}

@test "sbx-run --lease of another principal's lease needs its key: a run spends its escrow" {
	id=$(new_lease --principal alice | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - | jq -r .lease.id)
	seq=$(sbx-lease show "$id" | jq -r .lease.seq)
	run as_other sbx-run --lease "$id" -- /bin/true
	assert_equal "$status" 125
	assert_output --partial "sbx-run: error: principal alice: not signed by its key"
	assert_equal "$(sbx-lease show "$id" | jq -r .lease.seq)" "$seq"
	as_other sbx-run --lease "$id" --principal-key "$XDG_CONFIG_HOME/sbx/principals/alice" -- /bin/true
	sbx-run --lease "$id" -- /bin/true
}

@test "a clock moved by another client decides the next edge of a process that read it before" {
	# two handles in one process (tests/unit/test_lease.c, test_store_clock): the
	# first requests, the second ticks past the deadline, the first's fund is refused
	SBX_TEST_STORE=$SBX_STORE run "$SBX_BUILD/tests/test_lease"
	assert_success
	assert_output --partial "0 failed"
}

@test "a process alone at the store compares what it kept: no read per transition; a record moved meanwhile is decided again" {
	# tests/unit/test_lease.c, test_store_kept: 34 transitions of one lease in one
	# process, then another handle moves it and the first's stale head is refused
	SBX_TEST_STORE=$SBX_STORE SBX_TEST_KEPT=1 run "$SBX_BUILD/tests/test_lease"
	assert_success
	assert_output --partial "0 failed"
	[ -n "${SBX_TEST_ETCD:-}" ] || return 0
	command -v strace >/dev/null || skip "strace not installed"
	SBX_STORE=$(sbx_etcd_url "k$BATS_TEST_NUMBER") SBX_TEST_STORE=$(sbx_etcd_url "k$BATS_TEST_NUMBER") \
		SBX_TEST_KEPT=1 strace -f -qq -e trace=sendto -s 48 -o st.txt "$SBX_BUILD/tests/test_lease" >/dev/null
	# two handles' opening reads and the stale head's re-reads, not one a transition
	reads=$(grep -c 'POST /v3/kv/range' st.txt)
	[ "$reads" -le 24 ] || { echo "$reads reads for 36 transitions"; return 1; }
}

@test "etcd: a principal's slots as one list (a store written before slot keys) count, and move into slot keys at its next change" {
	[ -n "${SBX_TEST_ETCD:-}" ] || skip "etcd's key layout"
	p="/t$BATS_TEST_NUMBER"
	new_lease --principal old >a.json
	new_lease --principal old >b.json
	a=$(jq -r .lease.id a.json) b=$(jq -r .lease.id b.json)
	# each live lease holds one key slots/PRINCIPAL/NN
	assert_equal "$(sbx_etcdctl get --prefix "$p/slots/old/" --keys-only | grep -c .)" 2
	# as the list an earlier sbx kept
	sbx_etcdctl del --prefix "$p/slots/old/" >/dev/null
	sbx_etcdctl put "$p/slots/old" "[\"$a\",\"$b\"]" >/dev/null
	sbx-lease verify >/dev/null
	# the next request of the principal moves the list into slots, its lease beside
	new_lease --principal old >c.json
	sbx-lease verify >/dev/null
	assert_equal "$(sbx_etcdctl get "$p/slots/old" --keys-only | grep -c .)" 0
	assert_equal "$(sbx_etcdctl get --prefix "$p/slots/old/" --print-value-only | sort | tr '\n' ' ')" \
		"$(jq -r .lease.id a.json b.json c.json | sort | tr '\n' ' ')"
	# a lease leaving the live states frees its own slot
	sbx-lease fund --amount 0 --evidence b.json | sbx-lease activate --evidence - |
		sbx-lease settle --evidence - | sbx-lease expire --evidence - >/dev/null
	assert_equal "$(sbx_etcdctl get --prefix "$p/slots/old/" --print-value-only | sort | tr '\n' ' ')" \
		"$(jq -r .lease.id a.json c.json | sort | tr '\n' ' ')"
	sbx-lease verify >/dev/null
}
