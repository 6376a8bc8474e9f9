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
