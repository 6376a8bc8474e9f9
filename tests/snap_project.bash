# The generated C project of the make -j2 snapshot tests (snap_tree.bats,
# snap_fleet.bats), loaded after helpers.

# a C project of 12 modules (each a few seconds of cc1) in $1
gen_project() {
	local d=$1 i f
	mkdir -p "$d"
	for i in $(seq 1 12); do
		{
			echo '#include "mods.h"'
			for f in $(seq 1 60); do
				echo "static unsigned long f${i}_$f(unsigned long x) { unsigned long h = x * $f + $i; for (int k = 0; k < 8; k++) h = (h ^ (h >> 7)) * 0x9e3779b97f4a7c15ul + k; return h; }"
			done
			echo "unsigned long mod$i(unsigned long x) {"
			for f in $(seq 1 60); do echo "	x = f${i}_$f(x);"; done
			echo '	return x; }'
		} >"$d/m$i.c"
		echo "unsigned long mod$i(unsigned long);" >>"$d/mods.h"
	done
	{
		echo '#include <stdio.h>'
		echo '#include "mods.h"'
		echo 'int main(void) { unsigned long x = 1;'
		for i in $(seq 1 12); do echo "	x = mod$i(x);"; done
		echo '	printf("%lx\n", x); return 0; }'
	} >"$d/main.c"
	{
		printf 'OBJS := main.o'
		for i in $(seq 1 12); do printf ' m%d.o' "$i"; done
		printf '\nprog: $(OBJS)\n\t/usr/bin/gcc -o $@ $(OBJS)\n'
		printf '%%.o: %%.c mods.h\n\t/usr/bin/gcc -O2 -pipe -c -o $@ $<\n'
	} >"$d/Makefile"
}
