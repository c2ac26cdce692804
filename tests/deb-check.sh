#!/bin/sh
# shellcheck disable=SC2086,SC2010,SC2012 # $files and $packages are word lists of plain names
# The Debian packages of `make deb` used as an administrator would, on a
# Debian 12 system where systemd is not PID 1 (a chroot or a container):
#
#   1. apt installs them (and what they depend on and recommend);
#   2. what they put in place: the files (dpkg -L), the user and group
#      ruda, /var/cache/ruda owned by ruda, the conffile, the units' state;
#   3. rudad started as rudad.service would, as user ruda with
#      CACHE_DIRECTORY; a member of the group ruda builds docs/example.c
#      with pkg-config against the installed libruda-dev, runs it and
#      rudactl status, imports the Python module; a user outside the group
#      is refused;
#   4. reinstalled over itself (the upgrade path of the maintainer
#      scripts), with a changed conffile that must survive; used again;
#   5. purged: nothing of the packages is left, but the user ruda (Debian
#      leaves system users in place).
#
# Usage (as root, on a machine you can throw away; tests/fresh-debian.sh
# --deb runs it in a fresh root): sh tests/deb-check.sh DEBDIR
# DEBDIR holds the .deb files (build/deb after `make deb`). Exits 0 when
# every check passed.
set -u

debs=$(cd "${1:?usage: deb-check.sh DEBDIR}" && pwd)
sock=/run/ruda/rudad.sock
failures=0
log=${TMPDIR:-/tmp}/deb-check.$$.log

# run CMD: prints it, its output indented and a non-zero exit status
run() {
	echo "\$ $*"
	out=$(sh -c "$*" 2>&1)
	rc=$?
	[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/    /'
	[ $rc -eq 0 ] || echo "    (exit status $rc)"
	return $rc
}
# check WHAT CMD: run CMD, a failure if it fails
check() {
	what=$1
	shift
	run "$@" || { echo "FAIL: $what"; failures=$((failures + 1)); }
}
step() { printf '\n--- %s\n' "$*"; }

packages="rudad ruda-tools libruda1 libruda-dev python3-ruda"
files=""
for p in $packages; do
	f=$(ls "$debs/${p}_"*.deb 2>/dev/null | tail -n 1)
	[ -n "$f" ] || { echo "deb-check.sh: no ${p}_*.deb in $debs" >&2; exit 2; }
	files="$files $f"
done

# apt-get, its output in $log; prints the lines about ruda's packages
apt_get() {
	DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@" >"$log" 2>&1
	rc=$?
	grep -E -i "(rudad|ruda-tools|libruda|python3-ruda|ruda\.conf|sysusers|warning|error)" "$log" |
		grep -v -E '^(Get|Selecting|Preparing)' | sed 's/^/    /'
	[ $rc -eq 0 ] || { tail -n 20 "$log" | sed 's/^/    /'; echo "    (exit status $rc)"; }
	return $rc
}

# rudad as rudad.service runs it (User=ruda, CacheDirectory=ruda), on the
# socket rudad.socket would listen on; sets rudad_pid
start_rudad() {
	echo "\$ runuser -u ruda -- env CACHE_DIRECTORY=/var/cache/ruda /usr/sbin/rudad --socket $sock &"
	setsid runuser -u ruda -- env CACHE_DIRECTORY=/var/cache/ruda /usr/sbin/rudad \
		--socket $sock >/tmp/rudad.log 2>&1 &
	rudad_pid=$!
	i=0
	while ! grep -q "ready on $sock" /tmp/rudad.log; do
		if ! kill -0 $rudad_pid 2>/dev/null || [ $i -ge 120 ]; then
			sed 's/^/    /' /tmp/rudad.log
			echo "FAIL: rudad did not get ready"
			failures=$((failures + 1))
			return 1
		fi
		sleep 1
		i=$((i + 1))
	done
	sed 's/^/    /' /tmp/rudad.log
}

stop_rudad() {
	kill -TERM $rudad_pid 2>/dev/null
	wait $rudad_pid 2>/dev/null
	echo "rudad stopped (exit status $?)"
}

# what a member of the group ruda does with the packages
use_it() {
	# <ruda/ruda.h> includes the generated <ruda/status.h> and <ruda/common.h>
	check "libruda-dev's headers" "dpkg -L libruda-dev | grep -x -e /usr/include/ruda/ruda.h \
		-e /usr/include/ruda/status.h -e /usr/include/ruda/common.h | sort | tee /tmp/headers.out"
	[ "$(wc -l < /tmp/headers.out)" -eq 3 ] || { echo "FAIL: libruda-dev lacks a header"; failures=$((failures + 1)); }
	check "the example, built with pkg-config, against rudad" "runuser -u alice -- sh -c 'cd &&
		cc -o example /usr/share/doc/libruda-dev/examples/example.c \$(pkg-config --cflags --libs ruda) &&
		RUDA_SOCKET=$sock ./example /usr/share/ruda/shaders/add_f32.spv' | tee /tmp/example.out"
	grep -q "ok: 4096 sums correct" /tmp/example.out || { echo "FAIL: no 'ok: 4096 sums correct'"; failures=$((failures + 1)); }
	check "rudactl status" "runuser -u alice -- rudactl --socket $sock status"
	check "the Python module" "runuser -u alice -- python3 -c 'import ruda; print(ruda.__file__)'"
}

step "1. apt-get install ./rudad_*.deb ./ruda-tools_*.deb ./libruda1_*.deb ./libruda-dev_*.deb ./python3-ruda_*.deb"
[ -n "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ] ||
	apt-get update -q >/dev/null 2>&1
apt_get install $files || { echo "FAIL: apt-get install"; exit 1; }
# to build a client: a compiler and pkg-config (libruda-dev brings the rest)
apt_get install --no-install-recommends build-essential pkgconf ||
	{ echo "FAIL: installing build-essential pkgconf"; exit 1; }

step "2. what the packages put in place"
for p in $packages; do
	check "dpkg -L $p" "dpkg -L $p | grep -v -e '^/\.\$' | while read -r f; do [ -d \"\$f\" ] || echo \"\$f\"; done"
done
check "the user ruda" "getent passwd ruda && id ruda"
check "the group ruda" "getent group ruda"
check "/var/cache/ruda and /run/ruda owned by ruda" "stat -c '%U:%G %a %n' /var/cache/ruda /run/ruda &&
	[ \"\$(stat -c %U:%G /var/cache/ruda)\" = ruda:ruda ] && [ \"\$(stat -c %U:%G /run/ruda)\" = ruda:ruda ]"
check "/etc/ruda/rudad.conf is a conffile" "dpkg-query -W -f='\${Conffiles}\n' rudad | grep /etc/ruda/rudad.conf"
check "rudad.socket enabled, rudad.service not" "systemctl is-enabled rudad.socket;
	[ \"\$(systemctl is-enabled rudad.socket)\" = enabled ] && ! systemctl is-enabled rudad.service"
check "rudad --check-config" "runuser -u ruda -- rudad --check-config"
check "the unit names the installed rudad" "grep '^ExecStart=' /lib/systemd/system/rudad.service && test -x /usr/sbin/rudad"
run "useradd -m -G ruda alice && useradd -m bob"

step "3. rudad as the unit runs it; a member of ruda uses it"
if start_rudad; then
	use_it
	check "a user outside the group ruda is refused" "! runuser -u bob -- env RUDA_SOCKET=$sock \
		/home/alice/example /usr/share/ruda/shaders/add_f32.spv"
	stop_rudad
	check "the pipeline cache in /var/cache/ruda, owned by ruda" \
		"ls -ln /var/cache/ruda | head -n 5 && [ -z \"\$(find /var/cache/ruda ! -user ruda)\" ]"
fi

step "4. reinstalled over itself, with a changed conffile"
run "echo 'log_level = info' >>/etc/ruda/rudad.conf"
apt_get install --reinstall $files || { echo "FAIL: apt-get install --reinstall"; failures=$((failures + 1)); }
check "the changed conffile kept" "tail -n 1 /etc/ruda/rudad.conf && grep -q '^log_level = info' /etc/ruda/rudad.conf"
check "the user, the cache and its owner kept" "id ruda && [ \"\$(stat -c %U:%G /var/cache/ruda)\" = ruda:ruda ]"
check "rudad.socket still enabled" "[ \"\$(systemctl is-enabled rudad.socket)\" = enabled ]"
if start_rudad; then
	use_it
	stop_rudad
fi

step "5. apt-get purge"
apt_get purge $packages || { echo "FAIL: apt-get purge"; failures=$((failures + 1)); }
check "no package left, not even in state rc" "! dpkg -l $packages 2>/dev/null | grep -E '^[a-z]{2} '"
check "dpkg knows no file of them" "! dpkg -S /usr/sbin/rudad /usr/bin/rudactl /etc/ruda /usr/include/ruda"
check "/etc/ruda, /var/cache/ruda, /run/ruda, /usr/share/ruda, the Python module gone" \
	"for d in /etc/ruda /var/cache/ruda /run/ruda /usr/share/ruda /usr/lib/python3/dist-packages/ruda \
		/lib/systemd/system/rudad.socket /etc/systemd/system/sockets.target.wants/rudad.socket; do
		[ ! -e \$d ] || { echo \"left: \$d\"; exit 1; }; done"
check "no file named *ruda* left outside /home, /tmp, /proc and DEBDIR" \
	"left=\$(find / -xdev \\( -path /proc -o -path /home -o -path /tmp -o -path '$debs' \\) -prune -o \
		-name '*ruda*' -print | grep -v -e '^/var/lib/apt' -e '^/var/cache/apt' -e '^/var/log/apt'); \
	[ -z \"\$left\" ] || { echo \"\$left\"; exit 1; }"
check "the user and group ruda stay (Debian leaves system users)" "getent passwd ruda && getent group ruda"

rm -f "$log"
echo
if [ $failures -eq 0 ]; then
	echo "deb-check: every check passed"
else
	echo "deb-check: $failures check(s) failed"
fi
[ $failures -eq 0 ]
