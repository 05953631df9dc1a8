#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# pjdfstest (the POSIX file system test suite) through a qftfs mount,
# beside the same run on the served directory itself, on demand (not in
# CI: its source is not part of this tree and the machines have no
# network):
#
#   bash scripts/pjdfstest.sh PJDFSTEST_SOURCE_DIR
#
# PJDFSTEST_SOURCE_DIR is a checkout of github.com/pjd/pjdfstest (its
# pjdfstest.c and tests/).  The program is built here with the C compiler
# alone (no autotools).  The mount is local mode (the server a child of
# the client), run as root with allow_other so that the suite's -u/-g
# steps act as those users on the server, and with the server's
# --allow-devices, since the suite makes block and character devices,
# which a server refuses by default (qftfs-server(1)).  The served
# directory is on the same file system as the local run, so the two
# differ only by the mount.  The mount runs 29 tests fewer: the suite
# checks that a rename updates the file's ctime only on the file systems
# it names (ext4 among them), not on FUSE ones.
#
# Exit status: 0 the mount failed no test that the local run passed;
# 1 it did; 77 not root or no FUSE.  QFTFS_BUILD names the build tree
# (default build/); QFTFS_PJD_DIR where the trees go (default /var/tmp).
set -uo pipefail

src=${1:?usage: bash scripts/pjdfstest.sh PJDFSTEST_SOURCE_DIR}
src=$(cd "$src" && pwd) || exit 1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${QFTFS_BUILD:-$repo/build}" && pwd) || exit 1
[ "$(id -u)" -eq 0 ] || { echo "pjdfstest.sh: needs root; skipped"; exit 77; }
[ -e /dev/fuse ] || { echo "pjdfstest.sh: no /dev/fuse; skipped"; exit 77; }
command -v prove >/dev/null || { echo "pjdfstest.sh: needs prove (perl)"; exit 1; }
[ -f "$src/pjdfstest.c" ] && [ -d "$src/tests" ] ||
	{ echo "pjdfstest.sh: $src has no pjdfstest.c and tests/"; exit 1; }

work=$(mktemp -d "${QFTFS_PJD_DIR:-/var/tmp}/qftfs-pjd.XXXXXX") || exit 1
client_pid=
cleanup() {
	if [ -n "$client_pid" ]; then
		fusermount3 -u "$work/mnt" 2>/dev/null
		wait "$client_pid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# The suite and its program, side by side, as its scripts expect them.
cp -a "$src/tests" "$work/suite" || exit 1
: >"$work/config.h"
flags="-D_GNU_SOURCE -DHAVE_FACCESSAT -DHAVE_FCHMODAT -DHAVE_FCHOWNAT
	-DHAVE_FSTATAT -DHAVE_LINKAT -DHAVE_MKDIRAT -DHAVE_MKFIFOAT
	-DHAVE_MKNODAT -DHAVE_OPENAT -DHAVE_POSIX_FALLOCATE -DHAVE_RENAMEAT
	-DHAVE_SYMLINKAT -DHAVE_UNLINKAT -DHAVE_UTIMENSAT
	-DHAVE_SYS_SYSMACROS_H -DHAVE_STRUCT_STAT_ST_ATIM
	-DHAVE_STRUCT_STAT_ST_CTIM -DHAVE_STRUCT_STAT_ST_MTIM"
# shellcheck disable=SC2086  # the flags are words
cc -O2 -I"$work" $flags -o "$work/pjdfstest" "$src/pjdfstest.c" ||
	{ echo "pjdfstest.sh: cannot build pjdfstest"; exit 1; }

# prove, run inside DIR; prints the summary, returns the failing tests.
run_suite() {
	local dir=$1 out=$2
	(cd "$dir" && prove -r "$work/suite") >"$out" 2>&1
	awk '/^(All tests successful|Test Summary Report)/ { p = 1 } p' "$out"
}
# The test scripts that failed (or died) in a run: prove's report names
# each with its counts.
failures() {
	grep -E '^/.*\.t +\((Wstat: [1-9]|.*Failed: [1-9])' "$1" | awk '{ print $1 }'
}

mkdir -p "$work/local" "$work/served" "$work/mnt"
chmod 755 "$work/local" "$work/served"
echo "== the served file system itself ($work/local)"
run_suite "$work/local" "$work/local.out"

printf '#!/bin/sh\nexec %s --allow-devices "$@"\n' \
	"$build/server/qftfs-server" >"$work/server.sh"
chmod 755 "$work/server.sh"
"$build/fuse/qftfs" -f -o "server=$work/server.sh" -o allow_other \
	"$work/served" "$work/mnt" >"$work/mount.log" 2>&1 &
client_pid=$!
for _ in $(seq 100); do
	mountpoint -q "$work/mnt" && break
	sleep 0.1
done
mountpoint -q "$work/mnt" || { echo "pjdfstest.sh: the mount failed:";
	cat "$work/mount.log"; exit 1; }
echo "== through qftfs ($work/mnt)"
run_suite "$work/mnt" "$work/mount.out"

# A test script the mount fails and the local run passes is the mount's.
worse=$(comm -13 <(failures "$work/local.out" | sort) \
	<(failures "$work/mount.out" | sort))
if [ -n "$worse" ]; then
	echo "== failed through the mount only:"
	echo "$worse"
	exit 1
fi
echo "== the mount failed nothing the local run passed"
exit 0
