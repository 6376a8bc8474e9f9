# Shared bats set-up: a temporary store, the freshly built tools on PATH.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

: "${SBX_BUILD:=$(cd "$BATS_TEST_DIRNAME/.." && pwd)/build}"
export SBX_BUILD
export PATH="$SBX_BUILD/bin:$PATH"
GUESTS="$SBX_BUILD/guests"
# Guests run inside the sandbox, whose /tmp is private: a build tree under /tmp
# is invisible there, so its guests are copied to /var/tmp (read-only inside).
case "$GUESTS" in
/tmp/*)
	copy="/var/tmp/sbx-guests.$(printf %s "$SBX_BUILD" | sha256sum | cut -c1-12)"
	mkdir -p "$copy" && cp -a -u "$GUESTS/." "$copy/" && GUESTS=$copy
	;;
esac

sbx_setup_store() {
	export SBX_STORE="$BATS_TEST_TMPDIR/store"
	unset XDG_STATE_HOME
}

setup() {
	sbx_setup_store
}
