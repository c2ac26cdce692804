#!/bin/bash
# one device call: bench then suites (not committed)
for f in .gpu-debs/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /work/main && ln -sfn $PWD/build-gpu /work/main/build-gpu
cd /work/main
MODE=${1:-all}
if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  build-gpu/bench/bench --build-dir build-gpu --json $OUT/results.json > $OUT/bench.txt 2>&1
  echo "bench rc $?"; tail -n 25 $OUT/bench.txt
fi
if [ "$MODE" = all ] || [ "$MODE" = tests ]; then
  for t in ${TESTS:-test_sync_fast test_execution test_export test_staging test_memory test_transfer test_arena test_priority test_faults test_devices test_isolation test_allocation test_tensor test_graphs test_streams test_clients}; do
    [ -x build-gpu/tests/$t ] || { echo "$t missing"; continue; }
    timeout 240 build-gpu/tests/$t > /tmp/$t.txt 2>&1; rc=$?
    echo "== $t rc $rc" >> $OUT/tests.txt; cat /tmp/$t.txt >> $OUT/tests.txt
    echo "$t rc $rc $(grep -E '^[0-9]+%: Checks' /tmp/$t.txt | tail -n 1)"
    grep -E ":[FE]:" /tmp/$t.txt | head -5
  done
fi
