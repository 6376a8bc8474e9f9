#!/usr/bin/env bats
# storage_write (SPEC §4.1): every path by which a guest stores bytes or inodes in
# host files is counted per call, and the call that would cross the bound does not
# run: the lease closes on storage_write and the bound directory holds at most the
# bound + max(1 %, 1 MiB). Each attack puts up to 256 MiB there at full speed.
load helpers

BOUND=$((8 << 20))
SLACK=$((1 << 20))

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
	mkdir w
}

# attack HOW: tests/guests/meter_store HOW into a --rw bind under storage_write=8M
attack() {
	run sbx-run --ephemeral --limits storage_write=8M --rw "$PWD/w:/w" --result r.json \
		-- "$GUESTS/meter_store" "$1" /w
}

stored() { du -sB1 w | cut -f1; } # allocated bytes: a sparse file's size is not storage

closed_within_bound() {
	[ "$status" = 124 ] || echo "$output" >&2
	assert_equal "$status" 124
	assert_equal "$(jq -r .closed r.json)" storage_write
	[ "$(jq .usage.storage_write r.json)" -gt "$BOUND" ]
	echo "stored $(stored) bytes" >&2
	[ "$(stored)" -le $((BOUND + SLACK)) ]
}

@test "a write loop into a bind stops at the bound" {
	attack write
	closed_within_bound
}

@test "a write asking SSIZE_MAX bytes is refused and closes the lease, its charge one the lease can record" {
	attack huge
	closed_within_bound
}

@test "fallocate is storage: 256 MiB allocated at once is refused" {
	attack fallocate
	closed_within_bound
}

@test "Linux AIO is not available (ENOSYS): nothing is stored through io_submit" {
	attack aio
	assert_equal "$status" 3
	assert_output --partial "io_setup: Function not implemented"
	[ "$(stored)" -le $((BOUND + SLACK)) ]
}

@test "vmsplice into a pipe, then splice into a file, is storage" {
	attack splice
	closed_within_bound
}

@test "stores into a MAP_SHARED file mapping are storage: the mapping is charged" {
	attack mmap
	closed_within_bound
}

@test "copy_file_range is storage" {
	attack copy
	closed_within_bound
}

@test "sendfile is storage" {
	attack sendfile
	closed_within_bound
}

@test "pwritev2 is storage: its iovec lengths are the count" {
	attack pwritev2
	closed_within_bound
}

@test "every inode created is charged: 100k empty files stop at the bound" {
	attack files
	closed_within_bound
	n=$(find w -mindepth 1 | wc -l)
	echo "$n files" >&2
	[ $((n * 4096)) -le $((BOUND + SLACK)) ]
}

@test "storage_write is exact: bytes into files plus one inode each; pipes, output, /dev/null and reads are not storage" {
	run sbx-run --ephemeral --rw "$PWD/w:/w" --result r.json -- /bin/sh -c \
		'head -c 1000000 /dev/zero > /w/a && head -c 3000000 /dev/zero | cat > /dev/null &&
		 head -c 50000 /dev/zero && cat /w/a > /dev/null' >out
	assert_success
	assert_equal "$(jq .usage.storage_write r.json)" $((1000000 + 4096))
	assert_equal "$(jq .usage.output_bytes r.json)" 50000
	# a shared mapping is charged the 64 KiB runs it stores into; one never
	# stored into, a read-only one and a private one nothing
	run sbx-run --ephemeral --rw "$PWD/w:/w" --result r.json -- /usr/bin/python3 -c '
import mmap, os
fd = os.open("/w/a", os.O_RDONLY)
mmap.mmap(fd, 1000000, mmap.MAP_SHARED, mmap.PROT_READ)
fd = os.open("/w/a", os.O_RDWR)
mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ)
mmap.mmap(fd, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)[0] = 1
mmap.mmap(fd, 1000000)[:2] = b"ab"
m = mmap.mmap(fd, 1000000)
m[0] = 3
m[999999] = 4'
	assert_success
	# two mappings' first runs, and the last run's five pages up to the mapping's end
	assert_equal "$(jq .usage.storage_write r.json)" $((2 * 65536 + 5 * 4096))
	assert_equal "$(head -c 2 w/a | od -An -tx1 | tr -d ' ')" 0362
}

@test "plain writes settle at the writer's next stop, exactly: failed, short and refused writes, an overwrite, threads, pipes between, a writer ending right after" {
	run sbx-run --ephemeral --rw "$PWD/w:/w" --result r.json -- "$GUESTS/meter_exact" /w
	assert_success
	assert_output stored
	# 1,833 bytes into a, 1,000 into each of t0..t3, 7 into c, and 6 inodes
	assert_equal "$(jq .usage.storage_write r.json)" $((5840 + 6 * 4096))
	assert_equal "$(stat -c %s w/a w/t0 w/c | tr '\n' ' ')" "1533 1000 7 "
}

# map HOW [storage_write bound]: tests/guests/meter_map HOW /w
map() {
	run sbx-run --ephemeral --limits "storage_write=${2:-64M}" --rw "$PWD/w:/w" --result r.json \
		-- "$GUESTS/meter_map" "$1" /w
	[ "$status" = 0 ] || [ "$status" = 124 ] || echo "$output" >&2
}

@test "two bytes stored into a 2 GiB sparse shared mapping are charged their two 64 KiB runs" {
	map sparse
	assert_success
	assert_output ab
	assert_equal "$(jq .usage.storage_write r.json)" $((4096 + 2 * 65536))
	assert_equal "$(jq -r .closed r.json)" null
}

@test "a guest storing into every page of a 1 GiB shared mapping is closed within the bound" {
	map dirty 8M
	closed_within_bound
}

@test "a read into a held mapping works and is charged the runs it stores into" {
	# two files (an inode each), 256 KiB written, and runs 0-4 and 9 of the mapping;
	# near storage_read's bound, where every call stops, the same
	for bound in 64M 64M,storage_read=1M; do
		map read "$bound"
		assert_success
		assert_output "rrr r r"
		assert_equal "$(jq .usage.storage_write r.json)" $((2 * 4096 + 262144 + 6 * 65536))
	done
}

@test "an unprivileged invoker's held mappings are charged the same: faults, reads, fork" {
	UDIR=$(mktemp -d /tmp/sbx-storage.XXXXXX)
	chmod 0777 "$UDIR"
	mkdir -m 0777 "$UDIR/w"
	for how in sparse read fork; do
		run $SBX_AS_NOBODY env SBX_STORE="$UDIR/store" sbx-run --ephemeral --limits storage_write=64M \
			--rw "$UDIR/w:/w" --result "$UDIR/r.json" -- "$GUESTS/meter_map" "$how" /w
		assert_success
		echo "$how: $(jq .usage.storage_write "$UDIR/r.json")" >>"$UDIR/used"
	done
	run cat "$UDIR/used"
	rm -rf "$UDIR"
	assert_output "sparse: $((4096 + 2 * 65536))
read: $((2 * 4096 + 262144 + 6 * 65536))
fork: $((4096 + 16 * 65536))"
}

@test "a held mapping keeps its charge through mprotect, fork, threads and mremap" {
	map protect # rw by mprotect, stored, read-only again: a store then faults
	assert_success
	assert_output "w segv"
	assert_equal "$(jq .usage.storage_write r.json)" $((4096 + 65536))
	map fork # a child, the parent and 4 threads store into all 16 runs
	assert_success
	assert_output tpt
	assert_equal "$(jq .usage.storage_write r.json)" $((4096 + 16 * 65536))
	map remap # grown by mremap: the growth is held
	assert_success
	assert_output abcz
	assert_equal "$(jq .usage.storage_write r.json)" $((4096 + 2 * 65536))
	# remap_file_pages would put other pages of the file under a writable run
	map pages
	assert_success
	assert_output "remap_file_pages: Function not implemented"
}

@test "a protection change without PROT_WRITE runs without a stop in a process that holds no shared mapping" {
	map noheld
	assert_success
	assert_output protected
	# 2000 mprotect calls; the run's own stops (its exec, the loader) are a few
	[ "$(jq .supervisor.stops r.json)" -lt 200 ]
}

@test "once a process holds a mapping every protection change stops: a child's and a later thread's read-only mprotect fault its stores" {
	map inherit
	assert_success
	# the held-mapping filter beside the boundary's
	assert_output "w segv segv 2"
	assert_equal "$(jq .usage.storage_write r.json)" $((4096 + 65536))
}

@test "a thread with a filter of its own: a mapping made writable by mprotect is held and charged all the same" {
	map ownfilter
	assert_success
	# the held-mapping filter could not join every thread's: the boundary's alone
	assert_output "abc 1"
	assert_equal "$(jq .usage.storage_write r.json)" $((4096 + 3 * 65536))
}

# copy_small COPIER [sbx-run options]: a run that has stored more than it has read
# (40 small files) copies a 2-byte file with COPIER SRC DST, which asks the kernel
# for far more than the file holds and lets it stop at the end (cp: copy_file_range)
copy_small() {
	local copier=$1
	shift
	run sbx-run --ephemeral "$@" --rw "$PWD/w:/w" --result r.json -- /bin/sh -c \
		'cd /w && for i in $(seq 40); do echo x > f$i; done && printf ab > two &&
		 '"$copier"' two copy && cat copy'
}

# The copy ran and was charged what it moved: 42 files of 2 bytes and an inode
# each (4096), plus at most the trace's bytes when there is one (its last events
# are written after the last count).
copied_small() {
	local files=$((42 * (4096 + 2))) used
	[ "$status" = 0 ] || echo "$output" >&2
	assert_success
	assert_output ab
	assert_equal "$(jq -r .closed r.json)" null
	used=$(jq .usage.storage_write r.json)
	[ "$used" -ge "$files" ] && [ "$used" -le $((files + ${1:-0})) ]
}

@test "cp of a 2-byte file after 40 small files is charged 2 bytes, not what storage_read has left, plain and traced" {
	copy_small cp
	copied_small
	copy_small cp --trace T --trace-level file
	copied_small "$(stat -c %s T)"
}

@test "sendfile, splice and copy_file_range of a 2-byte file asking 1 GiB or more are charged 2 bytes, plain and traced" {
	for how in sendfile splice copy; do
		rm -rf w/* T
		copy_small "$GUESTS/meter_copy $how"
		copied_small
		rm -rf w/*
		copy_small "$GUESTS/meter_copy $how" --trace T --trace-level file
		copied_small "$(stat -c %s T)"
	done
}

@test "Python's own mmap test suite, its large sparse files included, passes under the default bound" {
	chmod 777 w
	run sbx-run --ephemeral --rw "$PWD/w:/w" --result r.json -- /bin/sh -c \
		'cd /w && python3 -m test -u largefile test_mmap'
	[ "$status" = 0 ] || echo "$output" >&2
	assert_success
	assert_output --partial "Tests result: SUCCESS"
	assert_equal "$(jq -r .closed r.json)" null
	[ "$(jq .usage.storage_write r.json)" -lt $((64 << 20)) ]
}

@test "a write's stop reads its thread's I/O count once: the last write settles from the count the next one starts from" {
	# 3000 one-byte writes, each its own stop; storage_write exact
	strace -qq -e trace=pread64 -e signal=none -s 16 -o s.log \
		sbx-run --ephemeral --rw "$PWD/w:/w" --result r.json -- \
		/usr/bin/dd if=/dev/zero of=/w/f bs=1 count=3000 status=none
	assert_equal "$(stat -c %s w/f)" 3000
	# the file's 3000 bytes and its inode's
	assert_equal "$(jq .usage.storage_write r.json)" $((3000 + 4096))
	[ "$(jq .supervisor.stops r.json)" -ge 3000 ]
	# one read of the thread's io file per write (two before), plus the ticks'
	n=$(grep -c '"rchar: ' s.log)
	echo "io reads: $n" >&2
	[ "$n" -lt 4500 ]
}
