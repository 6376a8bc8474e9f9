#!/bin/sh
# A generated C project whose objects are large, for sbx-run --chain (tests/chain.bats,
# bench/chain.sh): MODULES modules, each object holding an initialized array of KIB
# KiB that the binary keeps and one of PAD KiB (default 0) that the link drops
# (--gc-sections), main.c, and a Makefile: make -j2 writes ~2 × MODULES × KIB KiB
# plus MODULES × PAD KiB. Usage: chain-project.sh DIR MODULES KIB [PAD]
set -eu
d=$1 n=$2 kib=$3 pad=${4:-0}
mkdir -p "$d"
: >"$d/mods.h"
for i in $(seq 1 "$n"); do
	{
		printf 'unsigned char blob%d[%d] = { %d };\n' "$i" $((kib * 1024)) "$i"
		[ "$pad" = 0 ] || printf 'unsigned char pad%d[%d] = { %d };\n' "$i" $((pad * 1024)) "$i"
		printf 'unsigned long mod%d(unsigned long x)\n{\n' "$i"
		printf '\tfor (unsigned long k = 0; k < sizeof blob%d; k += 4096)\n' "$i"
		printf '\t\tx = x * 31 + blob%d[k];\n\treturn x;\n}\n' "$i"
	} >"$d/m$i.c"
	echo "unsigned long mod$i(unsigned long);" >>"$d/mods.h"
done
{
	echo '#include <stdio.h>'
	echo '#include "mods.h"'
	echo 'int main(void)'
	echo '{'
	echo '	unsigned long x = 1;'
	for i in $(seq 1 "$n"); do echo "	x = mod$i(x);"; done
	printf '\tprintf("%%lx\\n", x);\n\treturn 0;\n}\n'
} >"$d/main.c"
{
	printf 'OBJS := main.o'
	for i in $(seq 1 "$n"); do printf ' m%d.o' "$i"; done
	printf '\nprog: $(OBJS)\n\t/usr/bin/gcc -Wl,--gc-sections -o $@ $(OBJS)\n'
	printf '%%.o: %%.c mods.h\n\t/usr/bin/gcc -O2 -pipe -fdata-sections -c -o $@ $<\n'
} >"$d/Makefile"
