#!/bin/bash
# One call on a GPU machine without the build's packages (the device tool's
# H200; ../shared/device/README.md): unpack the runtime .debs carried in
# .gpu-debs/, then run `make bench`'s groups and/or integration suites from a
# build made elsewhere, writing everything under OUT.
#
#   tests/gpu-run.sh [all|bench|tests] [BUILD_DIR]     (default: all build-gpu)
#   TESTS="test_x test_y"   suites to run (default: those below)
#   OUT                     where results go (default: ./gpu-out)
#
# The build's programs find rudad and the shaders by the path they were
# built at (RUDA_BUILD_DIR); that path is linked to BUILD_DIR here.
set -u
MODE=${1:-all}
BUILD=${2:-build-gpu}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
for f in .gpu-debs/*.deb; do dpkg -x "$f" /; done
ldconfig
nvidia=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$nvidia" ] && export VK_DRIVER_FILES=$nvidia
built_at=$(grep -aoE "/[[:alnum:]_./-]+/$BUILD" "$BUILD/tests/test_memory" 2>/dev/null | head -n 1)
if [ -n "$built_at" ] && [ "$built_at" != "$PWD/$BUILD" ]; then
	mkdir -p "$(dirname "$built_at")" && ln -sfn "$PWD/$BUILD" "$built_at"
fi
if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
	"$BUILD/bench/bench" --build-dir "$BUILD" --json "$OUT/results.json" > "$OUT/bench.txt" 2>&1
	echo "bench rc $?"
	tail -n 25 "$OUT/bench.txt"
fi
if [ "$MODE" = all ] || [ "$MODE" = tests ]; then
	for t in ${TESTS:-test_sync_fast test_execution test_export test_isolation test_staging \
		test_memory test_transfer test_arena test_priority test_allocation test_tensor \
		test_graphs test_streams test_builtin_kernels test_dynamic_counts test_kernel \
		test_faults test_devices test_clients test_bad_input test_queues test_sync_buffers}; do
		[ -x "$BUILD/tests/$t" ] || { echo "$t missing"; continue; }
		timeout 240 "$BUILD/tests/$t" > "/tmp/$t.txt" 2>&1
		rc=$?
		{ echo "== $t rc $rc"; cat "/tmp/$t.txt"; } >> "$OUT/tests.txt"
		echo "$t rc $rc $(grep -E '^[0-9]+%: Checks' "/tmp/$t.txt" | tail -n 1)"
		grep -E ':[FE]:' "/tmp/$t.txt" | head -5
	done
fi
