# The generated 12-module C project of the --deterministic make -j2 tests
# (determ.bats, determ_snap.bats), loaded after helpers.

# A 12-module C project (and main.c) with a Makefile, in $1; $2: more compiler
# options (-pipe: no temporary files in the run's own /tmp, which snapshots before
# format version 8 did not hold).
gen_project() {
	mkdir -p "$1"
	for i in $(seq 1 12); do
		printf 'int f%d(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * %d; return s; }\n' \
			"$i" "$i" >"$1/m$i.c"
	done
	{
		printf '#include <stdio.h>\n'
		for i in $(seq 1 12); do printf 'int f%d(int);\n' "$i"; done
		printf 'int main(void) { long s = 0;\n'
		for i in $(seq 1 12); do printf 's += f%d(%d);\n' "$i" "$i"; done
		printf 'printf("%%ld\\n", s); return 0; }\n'
	} >"$1/main.c"
	{
		printf 'OBJ = main.o'
		for i in $(seq 1 12); do printf ' m%d.o' "$i"; done
		printf '\nprog: $(OBJ)\n\tcc -o $@ $(OBJ)\n%%.o: %%.c\n\tcc -O1%s -c $< -o $@\n' "${2:+ $2}"
	} >"$1/Makefile"
}

# An Active lease (funded with nothing) for the program $1; its id.
lease_for() {
	local req
	req=$(sbx-lease request --image "$1")
	sbx-lease fund --amount 0 --evidence - <<<"$req" | sbx-lease activate --evidence - >/dev/null
	jq -r .lease.id <<<"$req"
}
