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
	# a mapping that can store is charged its length; a read-only one nothing
	run sbx-run --ephemeral --rw "$PWD/w:/w" --result r.json -- /usr/bin/python3 -c '
import mmap, os
fd = os.open("/w/a", os.O_RDONLY)
mmap.mmap(fd, 1000000, mmap.MAP_SHARED, mmap.PROT_READ)
fd = os.open("/w/a", os.O_RDWR)
mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ)
mmap.mmap(fd, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)'
	assert_success
	assert_equal "$(jq .usage.storage_write r.json)" 8192
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
