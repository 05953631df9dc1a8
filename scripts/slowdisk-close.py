#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Close latency of a big file on slow storage, two servers side by side.

    scripts/slowdisk-close.py [--size MiB] [--rate MiB/s] [--rounds N]
                              [--pace MiB/s] BUILD SERVER_A SERVER_B

Makes the throttled disk of tests/test_slowdisk.py (an ext4 loop device
whose writes are limited for the server's cgroup: an SD card), then, in
alternating rounds, mounts it in local mode with BUILD's client and each
server, writes a file of --size MiB into the mount (at full speed, or at
--pace MiB/s like a link as fast as the card) and closes it.  Prints, per
server, the seconds spent writing, in close() and in all, and the CPU
seconds of the server.  Needs root; timing is for a report, not a test.
"""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests'))

import util  # noqa: E402
from test_slowdisk import SlowDisk, _setup_reason  # noqa: E402

MiB = 1 << 20


def server_cpu(m):
    """CPU seconds of the mount's server processes so far."""
    tick = os.sysconf('SC_CLK_TCK')
    total = 0.0
    for p in util.proc_children(m.proc.pid):
        try:
            with open('/proc/%d/stat' % p) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(')') + 2:].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def one(disk, build, server, size, pace, tag, base):
    src = os.path.join(disk.root, 'src-' + tag)
    mnt = os.path.join(base, 'mnt-' + tag)
    os.makedirs(src, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    m = util.Mount(src, mnt, build=build,
                   server=disk.wrapper + ' ' + server,
                   opts=['timeout=120'], log_path=mnt + '.log')
    m.start()
    try:
        block = os.urandom(MiB)
        t0 = time.monotonic()
        with open(os.path.join(mnt, 'big'), 'wb') as f:
            for i in range(size):
                f.write(block)
                if pace:
                    ahead = t0 + (i + 1) / pace - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
            t1 = time.monotonic()
        t2 = time.monotonic()
        cpu = server_cpu(m)
    finally:
        problems = m.stop()
    os.unlink(os.path.join(src, 'big'))
    if problems:
        raise SystemExit('\n'.join(problems))
    return t1 - t0, t2 - t1, t2 - t0, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--size', type=int, default=256)
    ap.add_argument('--rate', type=int, default=20)
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--pace', type=int, default=0)
    ap.add_argument('build')
    ap.add_argument('servers', nargs=2)
    a = ap.parse_args()
    why = _setup_reason()
    if why:
        raise SystemExit('cannot emulate slow storage: ' + why)
    base = tempfile.mkdtemp(prefix='dio-slowdisk-')
    disk = SlowDisk(base)
    try:
        why = disk.setup()
        if why:
            raise SystemExit('cannot emulate slow storage: ' + why)
        disk.set_rate(a.rate * MiB)
        res = {s: [] for s in a.servers}
        for r in range(a.rounds):
            for i, s in enumerate(a.servers):
                res[s].append(one(disk, os.path.realpath(a.build), s,
                                  a.size, a.pace, '%d-%d' % (r, i), base))
                w, c, t, cpu = res[s][-1]
                print('round %d %s: write %.1f s, close %.1f s, total %.1f '
                      's, server CPU %.2f s' % (r, s, w, c, t, cpu),
                      flush=True)
        print('%d MiB, disk %d MiB/s, writer %s, %d rounds (mean):'
              % (a.size, a.rate, '%d MiB/s' % a.pace if a.pace else
                 'full speed', a.rounds))
        for s in a.servers:
            n = len(res[s])
            w, c, t, cpu = (sum(x[k] for x in res[s]) / n for k in range(4))
            print('  %-50s write %5.1f s  close %5.1f s  total %5.1f s  '
                  'server CPU %.2f s' % (s, w, c, t, cpu))
    finally:
        disk.teardown()


if __name__ == '__main__':
    main()
