#!/bin/sh
# The README's two commands on a minimal Debian 12, as a newcomer runs them:
# a debootstrap --variant=minbase root, this tree copied in (tracked files
# and untracked ones git does not ignore), nothing installed beforehand but
# the README's first line (make, git). It checks, in order:
#
#   1. a user with neither root nor sudo: `make run` stops with one sentence
#      saying what to have root run;
#   2. root without sudo, in a fresh copy: `make run` installs the packages,
#      builds quietly, prints its ready line; the README's "try it" lines
#      run against it; then `make check` in the same tree;
#   3. unless --quick, a user with sudo in a new root: `make run` installs
#      through sudo, builds and gets ready;
#   4. with --deb or --deb-only: root runs `make deb` in a new root (it
#      installs the build dependencies, builds the packages and runs
#      lintian); the packages then go to another new root, where
#      tests/deb-check.sh installs them, runs a client built against them,
#      reinstalls and purges them. --deb-only skips 1-3.
#
# Usage (as root): sh tests/fresh-debian.sh [--quick] [--deb|--deb-only] [WORKDIR]
# WORKDIR (default /var/tmp/ruda-fresh-debian) keeps the debootstrapped base
# as base.tar, so a second run skips the download. Everything mounted for
# the roots lives in a private mount namespace and goes when the script
# ends. Exits 0 when every step behaved as the README says.
set -eu

quick=0
deb=0
flags=""
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--deb) deb=1 ;;
	--deb-only) deb=2 ;;
	*) break ;;
	esac
	flags="$flags $1"
	shift
done
work=${1:-/var/tmp/ruda-fresh-debian}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
tree=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" != 0 ]; then
	echo "fresh-debian.sh: needs root (debootstrap, chroot, mounts)" >&2
	exit 2
fi
# the mounts below stay private to this run, and vanish with it
if [ -z "${RUDA_FRESH_NS:-}" ]; then
	# shellcheck disable=SC2086 # $flags: options without spaces
	RUDA_FRESH_NS=1 exec unshare --mount --propagation private sh "$0" $flags "$work"
fi

step() { printf '\n=== %s\n' "$*"; }
failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
now() { date +%s; }

mkdir -p "$work"
if [ ! -f "$work/base.tar" ]; then
	command -v debootstrap >/dev/null 2>&1 ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
	step "debootstrap --variant=minbase bookworm ($mirror)"
	rm -rf "$work/base"
	debootstrap --variant=minbase bookworm "$work/base" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log"; exit 1; }
	tar -C "$work/base" -cf "$work/base.tar" .
	rm -rf "$work/base"
fi

# A new root from the base, with /proc, /sys, /dev, a fresh /dev/shm and
# the host's resolver; prints nothing.
new_root() {
	root=$1
	rm -rf "$root"
	mkdir -p "$root"
	tar -C "$root" -xf "$work/base.tar"
	mount -t proc proc "$root/proc"
	mount -t sysfs sysfs "$root/sys"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
}

# Copy the tree as `git clone` would see it (plus uncommitted work) to
# $root$dest, owned by `owner`.
copy_tree() {
	root=$1 dest=$2 owner=$3
	mkdir -p "$root$dest"
	(cd "$tree" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) |
		tar -C "$root$dest" -xf -
	chroot "$root" chown -R "$owner" "$dest"
}

# Run a command in the root as `user` with a login-like, minimal environment.
in_root() {
	root=$1 user=$2
	shift 2
	home=/root
	[ "$user" = root ] || home=/home/$user
	chroot --userspec="$user:$user" "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME="$home" USER="$user" LOGNAME="$user" TERM=dumb sh -c "cd && $*"
}

# `make run` in the root's $dir in the background; waits for the ready line
# (15 min at most). Sets run_pid (a process group) and run_log.
start_make_run() {
	root=$1 user=$2 dir=$3 sock=$4
	run_log=$work/make-run.$user.log
	: >"$run_log" # not the last run's ready line
	t0=$(now)
	setsid sh -c "$(command -v chroot) --userspec=$user:$user $root env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=\$(dirname $dir) \
		TERM=dumb sh -c 'cd $dir && exec make run RUN_SOCKET=$sock'" >"$run_log" 2>&1 &
	run_pid=$!
	i=0
	while ! grep -q "ready on $sock" "$run_log"; do
		if ! kill -0 "$run_pid" 2>/dev/null || [ $i -ge 900 ]; then
			cat "$run_log"
			fail "make run as $user: no ready line"
			return 1
		fi
		sleep 1
		i=$((i + 1))
	done
	echo "make run as $user: ready after $(($(now) - t0)) s; everything it printed" \
		"($(wc -l <"$run_log") lines):"
	sed 's/^/    /' "$run_log"
}

stop_make_run() {
	[ -n "${run_pid:-}" ] || return 0
	kill -TERM "-$run_pid" 2>/dev/null || true
	wait "$run_pid" 2>/dev/null || true
}

cleanup_root() {
	umount -R "$1/proc" "$1/sys" "$1/dev" 2>/dev/null || umount -lR "$1/dev" 2>/dev/null || true
}

root=$work/root
trap 'stop_make_run 2>/dev/null; cleanup_root "$root"' EXIT
if [ $deb != 2 ]; then
	new_root "$root"

	step "the README's first line, as root: apt-get update && apt-get install -y make git"
	t0=$(now)
	in_root "$root" root "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q make git >/dev/null" ||
		fail "installing make and git"
	echo "done in $(($(now) - t0)) s: $(in_root "$root" root 'make --version | head -n 1; git --version')"

	step "1. a user with neither root nor sudo: make run"
	in_root "$root" root "useradd -m plain"
	copy_tree "$root" /home/plain/ruda plain:plain
	set +e
	out=$(in_root "$root" plain "cd ruda && make run RUN_SOCKET=/tmp/plain.sock" 2>&1)
	rc=$?
	set -e
	echo "$out" | sed 's/^/    /'
	echo "exit status $rc"
	[ $rc -ne 0 ] || fail "make run succeeded without the packages"
	echo "$out" | grep -q "needs root: run su -c 'apt-get install -y" ||
		fail "no sentence saying what to run"

	step "2. root, no sudo, a fresh copy: make run, then the README's try-it lines"
	copy_tree "$root" /root/ruda root:root
	if start_make_run "$root" root /root/ruda /tmp/rudad.sock; then
		for line in "RUDA_SOCKET=/tmp/rudad.sock build/example build/shaders/add_f32.spv" \
			"build/rudactl --socket /tmp/rudad.sock status"; do
			echo "\$ $line"
			set +e
			out=$(in_root "$root" root "cd ruda && $line" 2>&1)
			rc=$?
			set -e
			echo "$out" | sed 's/^/    /'
			echo "    (exit status $rc)"
			[ "$rc" = 0 ] || fail "$line"
		done
		stop_make_run
	fi

	step "2. root: make check in the same tree"
	t0=$(now)
	set +e
	in_root "$root" root "cd ruda && make check" >"$work/make-check.log" 2>&1
	rc=$?
	set -e
	secs=$(($(now) - t0))
	grep -E '^(failed suites:|[0-9]+ passed, )|^SKIP |^!! ' "$work/make-check.log" | sed 's/^/    /' || true
	echo "make check: exit status $rc after $((secs / 60)) min $((secs % 60)) s" \
		"(whole log: $work/make-check.log)"
	[ $rc -eq 0 ] || fail "make check"
	cleanup_root "$root"

	if [ $quick = 0 ]; then
		step "3. a user with sudo, in a new root: make run"
		root=$work/root-sudo
		new_root "$root"
		in_root "$root" root "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q make git sudo >/dev/null"
		in_root "$root" root "useradd -m -G sudo admin && echo 'admin ALL=(ALL) NOPASSWD: ALL' >/etc/sudoers.d/admin"
		copy_tree "$root" /home/admin/ruda admin:admin
		if start_make_run "$root" admin /home/admin/ruda /tmp/admin.sock; then
			set +e
			out=$(in_root "$root" admin "cd ruda && RUDA_SOCKET=/tmp/admin.sock build/example build/shaders/add_f32.spv" 2>&1)
			rc=$?
			set -e
			echo "$out" | sed 's/^/    /'
			[ $rc -eq 0 ] || fail "the example as admin"
			stop_make_run
		fi
		cleanup_root "$root"
	fi
fi

if [ $deb != 0 ]; then
	step "4. root, a fresh copy in a new root: make deb"
	root=$work/root-deb
	new_root "$root"
	in_root "$root" root "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q make git >/dev/null"
	copy_tree "$root" /root/ruda root:root
	t0=$(now)
	set +e
	in_root "$root" root "cd ruda && make deb" >"$work/make-deb.log" 2>&1
	rc=$?
	set -e
	secs=$(($(now) - t0))
	# the build's end, then lintian's verdict
	sed -n '/dpkg-genchanges/,$p' "$work/make-deb.log" | sed 's/^/    /'
	echo "make deb: exit status $rc after $((secs / 60)) min $((secs % 60)) s" \
		"(whole log: $work/make-deb.log)"
	[ $rc -eq 0 ] || fail "make deb"
	debs=$root/root/ruda/build/deb
	cleanup_root "$root"

	if [ $rc -eq 0 ]; then
		step "4. the packages in another new root: install, use, reinstall, purge"
		root=$work/root-deb-install
		new_root "$root"
		mkdir -p "$root/root/debs"
		cp "$debs"/*.deb "$root/root/debs/"
		cp "$tree/tests/deb-check.sh" "$root/root/"
		in_root "$root" root "apt-get update -q >/dev/null"
		set +e
		in_root "$root" root "sh deb-check.sh /root/debs" 2>&1 | tee "$work/deb-check.log"
		set -e
		grep -q '^deb-check: every check passed' "$work/deb-check.log" ||
			fail "the packages (tests/deb-check.sh; log: $work/deb-check.log)"
		cleanup_root "$root"
	fi
fi

step "result"
if [ $failures -eq 0 ]; then
	echo "every step behaved as the README says"
else
	echo "$failures step(s) failed"
fi
[ $failures -eq 0 ]
