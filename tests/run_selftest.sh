#!/bin/sh
# tests/run.sh judged on stub suites whose outcome is known: a runner that
# counted a crash, an exit status or a skip as a pass would hide failures.
# Exits non-zero, saying which case, when the runner miscounts.
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/ruda-runner.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM
stub() { # name, body
	printf '#!/bin/sh\n%s\n' "$2" > "$dir/$1" && chmod +x "$dir/$1"
}
summary='echo "100%: Checks: 3, Failures: 0, Errors: 0"'
stub clean "$summary"
stub exits_23 "$summary; exit 23"
stub killed "$summary; kill -SEGV \$\$"
stub no_summary 'echo hello'
stub one_failure 'echo "66%: Checks: 3, Failures: 1, Errors: 0"; exit 1'
stub skips "echo 'SKIP a: no tool' >&2; echo 'SKIP b: not root'; $summary"
bad=0
expect() { # stubs..., then the closing line and the exit status wanted
	want_rc=$1 want=$2
	shift 2
	out=$(sh "$here/run.sh" "$@" 2>&1)
	rc=$?
	last=$(printf '%s\n' "$out" | tail -n 1)
	if [ "$last" != "$want" ] || [ $(( rc != 0 )) -ne "$want_rc" ]; then
		echo "runner: $* gave '$last' (exit $rc), want '$want' (exit status $( [ "$want_rc" = 0 ] && echo 0 || echo non-zero))"
		bad=1
	fi
}
cd "$dir" || exit 1
expect 0 "3 passed, 0 failed, 0 skipped" ./clean
expect 1 "3 passed, 1 failed, 0 skipped" ./exits_23
expect 1 "3 passed, 1 failed, 0 skipped" ./killed
expect 1 "0 passed, 1 failed, 0 skipped" ./no_summary
expect 1 "2 passed, 1 failed, 0 skipped" ./one_failure
expect 0 "1 passed, 0 failed, 2 skipped" ./skips
expect 1 "7 passed, 1 failed, 2 skipped" ./clean ./exits_23 ./skips
[ $bad -eq 0 ] && echo "runner: 7 cases counted right"
exit $bad
