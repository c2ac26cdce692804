#!/bin/sh
# The devices group of `make bench` on a machine with GPUs (issue #11):
# all-reduce (f32, sum and max) and to_client at 1 MiB, 64 MiB and 1 GiB,
# each result checked against a CPU reference, against the same bytes moved
# through the client.
#
#   tests/bench/devices.sh BUILD_DIR [OUT_DIR]
#
# BUILD_DIR holds rudad and bench/bench (a build carried to the machine runs
# in place). rudad opens every GPU; with one GPU it opens it twice, as two
# logical devices. RUDA_BENCH_DEVICES (rudad --device syntax: "0,1", "0,0")
# chooses others. Writes OUT_DIR/devices.json and OUT_DIR/devices.txt.
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
RUDA_BENCH_MAX_BYTES=${RUDA_BENCH_MAX_BYTES:-1G} \
	"$build/bench/bench" --only devices --json "$out/devices.json" | tee "$out/devices.txt"
