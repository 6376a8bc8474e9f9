#!/bin/sh
# Prints the path of a pristine tree of Debian bookworm's zlib source package
# (configure, make, make test), fetched once with apt-get source through a
# private deb-src list and unpacked into ZLIB_CACHE (default
# /var/tmp/sbx-determ-zlib-cache); nothing of the host's apt configuration or
# lists changes. Copy the tree before building in it. On failure it prints why
# on stderr and exits 1 (tests skip with that reason).
set -eu
c=${ZLIB_CACHE:-/var/tmp/sbx-determ-zlib-cache}
if [ -f "$c/zlib-src/configure" ] && [ -f "$c/zlib-src/.sbx-complete" ]; then
	echo "$c/zlib-src"
	exit 0
fi
command -v apt-get >/dev/null && command -v dpkg-source >/dev/null ||
	{ echo "zlib-source: apt-get and dpkg-source are needed to fetch bookworm's zlib" >&2; exit 1; }
mkdir -p "$c/apt/lists/partial" "$c/apt/cache/archives/partial"
chmod 755 "$c"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
	>"$c/apt/sources.list"
set -- -q -o Dir::Etc::sourcelist="$c/apt/sources.list" -o Dir::Etc::sourceparts=- \
	-o Dir::State::lists="$c/apt/lists" -o Dir::Cache="$c/apt/cache"
if ! { apt-get "$@" update && (cd "$c" && apt-get "$@" source --download-only zlib); } >"$c/fetch.log" 2>&1; then
	# the first failed fetch says why (apt-get update only warns), else apt's error
	why=$(grep -m1 '^W: Failed to fetch' "$c/fetch.log" || grep -m1 '^E:' "$c/fetch.log" || tail -n 1 "$c/fetch.log")
	echo "zlib-source: cannot fetch bookworm's zlib source package: $why" >&2
	exit 1
fi
rm -rf "$c/zlib-src"
if ! (cd "$c" && dpkg-source -q -x zlib_*.dsc zlib-src) >>"$c/fetch.log" 2>&1; then
	echo "zlib-source: cannot unpack $(ls "$c"/zlib_*.dsc 2>/dev/null | head -n 1)" >&2
	exit 1
fi
# the sources lie in every lease's past: their mtimes are the tarball's
touch "$c/zlib-src/.sbx-complete"
chmod -R a+rX "$c/zlib-src"
echo "$c/zlib-src"
