#!/bin/sh
# Runs each test program given, collects Check's per-suite summaries and
# prints one closing line: "N passed, N failed".
passed=0
failed=0
for t in "$@"; do
	echo "== $t"
	out=$("$t" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	# Check prints "NN%: Checks: C, Failures: F, Errors: E" per run
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
	if [ -n "$line" ]; then
		c=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
		f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
		e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
		passed=$((passed + c - f - e))
		failed=$((failed + f + e))
	elif [ $rc -ne 0 ]; then
		failed=$((failed + 1))
	fi
	[ $rc -eq 0 ] || echo "!! $t exited with $rc"
	[ $rc -eq 0 ] || [ -n "$line" ] || true
done
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
