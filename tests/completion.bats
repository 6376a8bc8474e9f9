#!/usr/bin/env bats
# Bash completion (completions/sbx, installed per tool by make install).
load helpers

# complete WORDS...: the candidates bash offers for the last word
complete_line() {
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	local f
	f=$(complete -p "$1" | sed 's/.*-F \([^ ]*\) .*/\1/')
	"$f"
	printf '%s\n' "${COMPREPLY[@]}"
}

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
	source "$BATS_TEST_DIRNAME/../completions/sbx"
}

@test "completion: options, values and commands of the five tools" {
	run complete_line sbx-run --resu
	assert_output "--result
--result-fd"
	run complete_line sbx-run --trace-level f
	assert_output file
	run complete_line sbx-trace prov
	assert_output provenance
	run complete_line sbx-trace timeline --format ch
	assert_output chrome
	run complete_line sbx-lease ve
	assert_output verify
	run complete_line sbx-snap ta
	assert_output take
	# options before the verb: their values skipped, the verb's options offered
	run complete_line sbx-lease --principal p --st
	assert_output "--store
--state"
	run complete_line sbx-lease --principal p li
	assert_output list
	run complete_line sbx-run --ephemeral -- sbx-ru
	assert_line sbx-run
	# the ids of the store's leases
	id=$(sbx-lease request --image /bin/true | jq -r .lease.id)
	run complete_line sbx-run --lease L
	assert_output "$id"
	run complete_line sbx-lease show L
	assert_line "$id"
}

@test "completion: every option sbx-run --help names is offered" {
	for o in $(sbx-run --help | grep -o -- '--[a-z-]*' | sort -u); do
		[ "$o" = -- ] && continue
		run complete_line sbx-run "$o"
		assert_line -- "$o"
	done
}

@test "completion: every option offered is one the tool takes" {
	for tool in sbx-run sbx-restore; do
		for o in $(complete_line "$tool" --); do
			[ "$o" = -- ] || [ "$o" = --help ] && continue
			run "$tool" "$o"
			refute_output --partial "unknown option"
		done
	done
	for tool in sbx-lease sbx-snap sbx-trace; do
		case $tool in sbx-lease) verb=list ;; sbx-snap) verb=take ;; sbx-trace) verb=adjudicate ;; esac
		for o in $(complete_line "$tool" "$verb" --); do
			run "$tool" "$verb" "$o"
			refute_output --partial "unknown or incomplete option"
			refute_output --partial "unknown option"
		done
	done
}
