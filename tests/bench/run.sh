#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The qftfs benchmark:
#
#   bash tests/bench/run.sh [--quick] [--links LIST] [--tools LIST] [--data LIST]
#                           [--workloads LIST] [--passes cold|cold,warm]
#                           [--directions LIST] [--timeout SECS] [--out DIR]
#   bash tests/bench/run.sh resume [--link NAME] [--cut SECS] [--at FRACTION]
#                           [--tools qftfs,sshfs]
#   bash tests/bench/run.sh sqlite [--rows N] [--link NAME]
#
# Runs qftfs, sshfs, scp, rsync -e ssh and iperf3 side by side over emulated
# links (big files, and trees: cp -r, rsync -a and tar x onto the mount, cp
# -r off it, find and du through it), checks every copy against its source, and writes results.json,
# results.md and chart.png to tests/bench/results/<timestamp>/.  See
# docs/benchmarks.md for what is measured and how.
#
# `resume` is the outage scenario (tests/bench/resume.py): an upload whose
# link is cut and healed in the middle, qftfs beside sshfs -o reconnect.
# `sqlite` is the locks scenario (tests/bench/sqlite2.py): two sqlite
# writers on two mounts of one directory, rows/s; local-mode mounts, or
# with --link mounts over ssh across that emulated link.
#
# Needs root.  Link emulation: tc netem if the kernel has sch_netem, else the
# command in QFTFS_BENCH_LINK_CMD (interface: `CMD up RTT_MS RATE_MBIT`,
# `CMD down`, and for `resume` `CMD cut` / `CMD heal`).  Exit status: 0 every copy succeeded and verified; 1 a copy
# failed, timed out or did not verify (or the harness broke); 77 skipped
# (not root, no link emulator); 130 interrupted.
#
# Environment: QFTFS_BUILD (default <repo>/build), QFTFS_BENCH_DIR (scratch
# and cached data, default /var/tmp/qftfs-bench), QFTFS_BENCH_TIMEOUT,
# QFTFS_BENCH_LINK_CMD, QFTFS_BENCH_HOST / _NETNS / _SSH_PORT / _IDENTITY
# (where the external emulator puts the server), QFTFS_BENCH_BACKEND=netem|cmd
# to force one.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1

if [ "$(id -u)" -ne 0 ]; then
	echo "run.sh: the benchmark needs root (network namespaces, drop_caches, FUSE); skipped"
	exit 77
fi

need=()
for cmd in iperf3:iperf3 sshfs:sshfs rsync:rsync scp:openssh-client sshd:openssh-server \
	fusermount3:fuse3; do
	command -v "${cmd%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${cmd%%:*}" ] || need+=("${cmd#*:}")
done
# the chart: matplotlib, from Debian's package for the system python.
# python3-munkres answers python3-fonttools' "python3-scipy |
# python3-munkres": without it apt picks scipy, whose pythran pulls
# libboost-dev, 14,000 headers into /usr/include, which is a data set here.
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || need+=(python3-munkres python3-matplotlib)
if [ ${#need[@]} -gt 0 ]; then
	echo "run.sh: installing ${need[*]}"
	inst=(apt-get install -y -q --no-install-recommends)
	DEBIAN_FRONTEND=noninteractive "${inst[@]}" "${need[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
			"${inst[@]}" "${need[@]}" >/dev/null; } ||
		echo "run.sh: could not install ${need[*]}; missing tools are skipped, no chart without matplotlib"
fi

if [ "${1:-}" = sqlite ]; then
	shift
	exec /usr/bin/python3 tests/bench/sqlite2.py --argv0 "bash tests/bench/run.sh sqlite" "$@"
fi
if [ "${1:-}" = resume ]; then
	shift
	exec /usr/bin/python3 tests/bench/resume.py --argv0 "bash tests/bench/run.sh resume" "$@"
fi
if [ "${1:-}" = copy ]; then
	shift
	exec /usr/bin/python3 tests/bench/copy_within.py --argv0 "bash tests/bench/run.sh copy" "$@"
fi
exec /usr/bin/python3 tests/bench/bench.py --argv0 "bash tests/bench/run.sh" "$@"
