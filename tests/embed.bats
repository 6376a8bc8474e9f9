#!/usr/bin/env bats
# Embedding: make install's sbx.h, sbx.pc and man3 pages; a program linked with
# -lsbx against the built libsbx.so runs a guest through sbx_run.
load helpers

setup_file() {
	export PREFIX="$BATS_FILE_TMPDIR/prefix"
	make -s -C "$BATS_TEST_DIRNAME/.." O="$SBX_BUILD" PREFIX="$PREFIX" install >/dev/null
	cflags=$(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags sbx)
	# the installed header only (no -I of the source tree), the built shared library
	cc -std=c11 -Wall -Wextra -Werror -fPIE -pie $cflags -o "$BATS_FILE_TMPDIR/embed" \
		"$BATS_TEST_DIRNAME/embed/embed.c" -L"$SBX_BUILD" -lsbx
}

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
	export LD_LIBRARY_PATH="$SBX_BUILD"
}

@test "embed: installed header, pkg-config file and both man3 pages" {
	[ -f "$PREFIX/include/sbx/sbx.h" ]
	[ -f "$PREFIX/lib/libsbx.so" ]
	[ -f "$PREFIX/share/man/man3/sbx_call.3" ]
	[ -f "$PREFIX/share/man/man3/sbx_run.3" ]
	run env PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags sbx
	assert_output --partial "-I$PREFIX/include/sbx"
}

@test "embed: the program loads libsbx.so and runs a guest through sbx_run" {
	run ldd "$BATS_FILE_TMPDIR/embed"
	assert_output --partial "libsbx.so => $SBX_BUILD/libsbx.so"
	run "$BATS_FILE_TMPDIR/embed" --ephemeral -- /bin/echo hello from a guest
	assert_success
	assert_output "hello from a guest"
	run "$BATS_FILE_TMPDIR/embed" --ephemeral -- /bin/sh -c 'exit 7'
	assert_failure 7
}

@test "embed: sbx_run reports a bad command line as sbx-run does, sbx_call refuses a PIE" {
	run "$BATS_FILE_TMPDIR/embed" --frob -- /bin/true
	assert_failure 125
	assert_line --index 0 "embed: error: --frob: unknown option"
	run "$BATS_FILE_TMPDIR/embed" --entry-points
	assert_success
	assert_line --index 0 "-1 1"
	assert_line --index 1 --partial "sbx_call needs a non-PIE ET_EXEC image"
}
