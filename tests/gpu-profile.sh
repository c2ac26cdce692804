#!/bin/bash
# Profile rudad's threads with perf while one bench command runs, on the
# GPU machine of the device tool (../shared/device/README.md), which has no
# perf. Debian's perf and the libraries it links are carried as .debs in
# .gpu-debs/perf/ and unpacked into /opt/perf, apart from the system's
# libraries (Debian 12's libdw or libelf over the machine's would break
# other programs). Here, once:
#
#   mkdir -p .gpu-debs/perf && cd .gpu-debs/perf && apt-get \
#     -oAPT::Architecture=amd64 -oDir::State::Lists=/tmp/amd64-lists download \
#     linux-perf libbabeltrace1 libdw1 libelf1 libnuma1 libopencsd1 \
#     libperl5.36 libpython3.11 libslang2 libunwind8 libtraceevent1 \
#     libglib2.0-0 libpcre2-8-0 libexpat1 libbz2-1.0 libuuid1 libcrypt1 \
#     libcap2 libzstd1 liblzma5 zlib1g
#
# (after ../shared/device/prepare.sh has made the lists). There, after
# tests/gpu-run.sh's set-up (the runtime .debs, VK_DRIVER_FILES, the build
# linked at the path it was built at):
#
#   OUT=$OUT tests/gpu-profile.sh 'RUDA_BENCH_SHARING=latency build-gpu/bench/bench --build-dir build-gpu --only sharing'
#
# Writes $OUT/profile-*.txt: rudad's loop thread by library and by symbol,
# every thread by symbol, and the loop's call graph. Build rudad with
# CFLAGS="-O2 -g -fno-omit-frame-pointer" for whole call graphs.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p /opt/perf "$OUT"
for f in .gpu-debs/perf/*.deb; do dpkg -x "$f" /opt/perf; done
perf() { LD_LIBRARY_PATH=/opt/perf/usr/lib/x86_64-linux-gnu /opt/perf/usr/bin/perf "$@"; }
perf --version || exit 1
bash -c "$1" > "$OUT/profile-bench.txt" 2>&1 &
bench=$!
pid=
for _ in $(seq 1 200); do
	pid=$(pgrep -n -f "rudad --socket /tmp/ruda-bench-")
	[ -n "$pid" ] && break
	sleep 0.05
done
[ -n "$pid" ] || { echo "no rudad started"; wait $bench; exit 1; }
echo "rudad pid $pid"
# until rudad exits (the bench stops it), or two minutes
timeout 120 bash -c "LD_LIBRARY_PATH=/opt/perf/usr/lib/x86_64-linux-gnu \
	/opt/perf/usr/bin/perf record -F 1999 -g -p $pid -o /tmp/rudad.perf" 2>&1 | tail -n 2
wait $bench
echo "bench rc $?"
report() { perf report -i /tmp/rudad.perf -q "$@" 2>/dev/null; }
report --no-children --tid "$pid" --sort dso -g none | head -n 30 > "$OUT/profile-loop-dso.txt"
report --no-children --tid "$pid" --sort sym -g none | head -n 100 > "$OUT/profile-loop-sym.txt"
report --children --tid "$pid" --sort sym -g none | head -n 150 > "$OUT/profile-loop-children.txt"
report --no-children --sort comm,sym -g none | head -n 100 > "$OUT/profile-threads.txt"
report --no-children --tid "$pid" --sort sym -g caller,0.5,callee --percent-limit 1.5 |
	head -n 800 > "$OUT/profile-loop-graph.txt"
head -n 20 "$OUT/profile-loop-dso.txt"
head -n 40 "$OUT/profile-loop-sym.txt"
