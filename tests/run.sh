#!/bin/sh
# Runs each test program given, streaming its checks as they finish, and
# prints one closing line: "N passed, N failed, N skipped".
#
# A suite counts as failed, besides the checks Check reports failed, when
# it exits non-zero or dies of a signal with no failure counted (a crash or
# a sanitizer report at exit, a leak found by valgrind), or prints no
# summary at all. A check that prints a line starting "SKIP " (as
# "SKIP name: why", on stdout or stderr) counts as skipped, not passed.
passed=0
failed=0
skipped=0
failed_suites=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ruda-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
for t in "$@"; do
	echo "== $t"
	# Check writes each check's result to its log as the check ends
	{ CK_LOG_FILE_NAME=- "$t" 2>&1; echo $? > "$tmp/rc"; } | tee "$tmp/out"
	rc=$(cat "$tmp/rc")
	# Check prints "NN%: Checks: C, Failures: F, Errors: E" per run
	line=$(grep -E '^[0-9]+%: Checks: ' "$tmp/out" | tail -n 1)
	s=$(grep -c '^SKIP ' "$tmp/out")
	if [ -n "$line" ]; then
		c=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
		f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
		e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
		passed=$((passed + c - f - e - s))
		skipped=$((skipped + s))
		failed=$((failed + f + e))
		if [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ]; then
			failed=$((failed + 1))
			echo "!! $t: every check passed, but it exited with status $rc" \
				"(a crash, a sanitizer or valgrind report at exit?)"
		fi
	else
		failed=$((failed + 1))
		echo "!! $t: no Check summary (exit status $rc)"
	fi
	if [ "$rc" -ne 0 ]; then
		[ "$rc" -gt 128 ] && echo "!! $t died of signal $((rc - 128))"
		failed_suites="$failed_suites $t"
	fi
done
echo
[ -z "$failed_suites" ] || echo "failed suites:$failed_suites"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
