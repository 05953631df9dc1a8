#!/usr/bin/env bash
# Installs what qftfs needs to build and test on Debian, but only what is
# missing, so a second run costs nothing.  Usage: install-deps.sh [build|test]
set -euo pipefail

build_pkgs=(meson ninja-build pkg-config gcc libfuse3-dev fuse3 liburing-dev
	liblz4-dev libssh2-1-dev libssl-dev)
# setpriv (util-linux), diff, tar and mount are essential on Debian, listed
# so a stripped image still gets them; strace lets a test watch the
# server's fdatasync calls (commit=close); tcpdump shows what the data
# plane puts on the wire; acl checks that ls -l still sees POSIX ACLs;
# clang and its runtimes build the libFuzzer targets (-Dfuzz=true);
# iproute2 builds the fault tests' network namespace; python3-cryptography
# lets the hostile-peer tests forge and replay sealed records;
# qemu-user-static runs the servers cross-built for the boards
# (scripts/cross-server.sh installs its own compilers), file checks their
# ELF headers, dropbear-bin and busybox are the small systems' sshd and
# shell the bootstrap must work with.  sshfs's help lists the options
# qftfs must accept (test_compat); tmux gives `qftfs --stats --watch` a
# terminal (test_stats).
test_pkgs=(python3-pytest python3-cryptography iproute2 rsync sqlite3 git
	attr acl openssh-server openssh-client util-linux diffutils tar mount
	strace tcpdump clang libclang-rt-14-dev qemu-user-static file
	dropbear-bin busybox sshfs tmux)

pkgs=("${build_pkgs[@]}")
[ "${1:-build}" = test ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages: ${missing[*]}" >&2
	echo "install-deps: not root, so not installing; run: sudo apt-get install ${missing[*]}" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
