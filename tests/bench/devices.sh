#!/bin/sh
# The devices group of `make bench` on a machine with GPUs (issue #11):
# all-reduce (f32, sum and max) and to_client at 1 MiB, 64 MiB and 1 GiB,
# each result checked against a CPU reference, against the same bytes moved
# through the client (and to_client against the device's own copy, issue #24).
#
#   tests/bench/devices.sh BUILD_DIR [OUT_DIR]
#
# BUILD_DIR holds rudad and bench/bench (a build carried to the machine runs
# in place). rudad opens every GPU; with one GPU it opens it twice, as two
# logical devices. RUDA_BENCH_DEVICES (rudad --device syntax: "0,1", "0,0")
# chooses others. Writes OUT_DIR/devices.json, OUT_DIR/devices.txt and
# rudad's log, OUT_DIR/rudad.log. With RUDA_BENCH_RUDAD_CONF='log_level =
# debug' that log has a line per to_client saying where its time went
# (arrival to reply), copied to OUT_DIR/to_client-phases.txt, and a line
# per all-reduce by device copies, copied to OUT_DIR/all-reduce-phases.txt.
set -eu
build=${1:?usage: devices.sh BUILD_DIR [OUT_DIR]}
out=${2:-${OUT:-.}}
mkdir -p "$out"
# the NVIDIA driver's Vulkan, where the machine has it outside the loader's path
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
	VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
	export VK_DRIVER_FILES
fi
"$build/rudad" --list-devices
rm -f "$out/rudad.log"
RUDA_BENCH_RUDAD_LOG="$out/rudad.log" RUDA_BENCH_MAX_BYTES=${RUDA_BENCH_MAX_BYTES:-1G} \
	"$build/bench/bench" --only devices --json "$out/devices.json" | tee "$out/devices.txt"
if grep 'to_client [0-9]* B, device' "$out/rudad.log" >"$out/to_client-phases.txt"; then
	echo "to_client phases, ms from the request's arrival (all in $out/to_client-phases.txt):" |
		tee -a "$out/devices.txt"
	tail -n 8 "$out/to_client-phases.txt" | tee -a "$out/devices.txt"
fi
if grep 'all-reduce of [0-9]* B over [0-9]* devices by device copies' "$out/rudad.log" \
	>"$out/all-reduce-phases.txt"; then
	echo "all-reduce phases, ms from the first request (all in $out/all-reduce-phases.txt):" |
		tee -a "$out/devices.txt"
	tail -n 4 "$out/all-reduce-phases.txt" | tee -a "$out/devices.txt"
fi
