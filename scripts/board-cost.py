#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What the server costs on a board, estimated under qemu-user.

    python3 scripts/board-cost.py [--mib N] [--arch A ...] [--cipher C ...]

For each architecture (the static servers of scripts/cross-server.sh;
x86_64 runs natively, the ARM ones under qemu-user with a board's CPU:
Cortex-A53, Cortex-A7, ARM1176) and each data-plane cipher, mounts a temp
dir through a private loopback sshd (tests/sshd.py) with the server run
as `/usr/bin/time -v qemu-... qftfs-server`, copies N MiB of random data
onto the mount and N MiB off it, unmounts, and prints the server's CPU
seconds (user + system) per GB moved -- less those of a mount that moves
nothing -- and its peak RSS as a markdown table.

Under emulation only the ratios mean anything -- between ciphers on one
architecture, between architectures for one cipher -- never the seconds
(docs/benchmarks.md, "The server on the boards").  Needs root (sshd, FUSE),
a built tree (build/, or QFTFS_BUILD), qemu-user-static and /usr/bin/time.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), '..'))
sys.path.insert(0, os.path.join(REPO, 'tests'))

import sshd as sshd_mod  # noqa: E402
import util  # noqa: E402

MiB = 1 << 20


def parse_time(path):
    text = open(path).read()

    def num(label):
        m = re.search(r'%s: ([0-9.]+)' % re.escape(label), text)
        if not m:
            raise RuntimeError('no "%s" in %s:\n%s' % (label, path, text))
        return float(m.group(1))
    return (num('User time (seconds)') + num('System time (seconds)'),
            num('Maximum resident set size (kbytes)') / 1024)


def measure(s, home, arch, server, cipher, size, work):
    served = os.path.join(work, 'served-%s-%s-%d' % (arch, cipher, size))
    mnt = served + '.mnt'
    os.makedirs(served)
    os.makedirs(mnt)
    data = os.path.join(work, 'data')
    shutil.copyfile(data, os.path.join(served, 'down'))
    timing = os.path.join(work, 'time-%s-%s-%d' % (arch, cipher, size))
    qemu = util.qemu_command(arch)
    cmd = ['/usr/bin/time', '-v', '-o', timing] + qemu + [server]
    r = util.run([util.client_bin(util.build_dir()), '-p', str(s.port),
                  '-o', 'server=' + ' '.join(cmd), '-o', 'cipher=' + cipher,
                  s.source(served), mnt], timeout=120,
                 env=s.client_env(home))
    if r.returncode != 0:
        raise RuntimeError('mount failed: %s' % r.stderr)
    up = down = 0.0
    try:
        if size:
            t0 = time.monotonic()
            subprocess.run(['cp', data, os.path.join(mnt, 'up')],
                           check=True)
            up = time.monotonic() - t0
            t0 = time.monotonic()
            subprocess.run(['cat', os.path.join(mnt, 'down')], check=True,
                           stdout=subprocess.DEVNULL)
            down = time.monotonic() - t0
        else:
            os.listdir(mnt)
    finally:
        subprocess.run(['fusermount3', '-u', mnt], check=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if os.path.exists(timing) and 'Exit status' in open(timing).read():
            break
        time.sleep(0.1)
    if size and (util.sha256_file(os.path.join(served, 'up')) !=
                 util.sha256_file(data)):
        raise RuntimeError('%s %s: the upload differs' % (arch, cipher))
    cpu, rss = parse_time(timing)
    shutil.rmtree(served)
    os.rmdir(mnt)
    return cpu, rss, up, down


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--mib', type=int, default=128,
                    help='MiB copied each way (default 128)')
    ap.add_argument('--arch', action='append',
                    help='x86_64, aarch64, armhf, armel (default: all)')
    ap.add_argument('--cipher', action='append',
                    help='aes256-gcm, chacha20, none (default: all)')
    a = ap.parse_args()
    arches = a.arch or ['x86_64', 'aarch64', 'armhf', 'armel']
    ciphers = a.cipher or ['aes256-gcm', 'chacha20', 'none']
    why = sshd_mod.unavailable_reason() or util.fuse_unavailable_reason()
    if why:
        sys.exit('board-cost: %s' % why)
    work = tempfile.mkdtemp(prefix='qftfs-board-cost-')
    s = sshd_mod.Sshd(os.path.join(work, 'sshd')).start()
    try:
        home = s.client_home(os.path.join(work, 'home'))
        with open(os.path.join(work, 'data'), 'wb') as f:
            for _ in range(a.mib):
                f.write(os.urandom(MiB))
        moved_gb = 2 * a.mib * MiB / 1e9
        print('| arch | binary | cipher | server CPU s/GB | peak RSS MiB '
              '| up s | down s |')
        print('|---|---|---|---|---|---|---|')
        for arch in arches:
            server, why = util.cross_server(arch)
            if why:
                print('| %s | not built: %s |' % (arch, why))
                continue
            if util.qemu_command(arch) is None:
                print('| %s | qemu-user missing |' % arch)
                continue
            size = os.path.getsize(server)
            for cipher in ciphers:
                # What a mount costs without data (start-up, emulator's
                # translation, handshakes), subtracted from the figure.
                base, _, _, _ = measure(s, home, arch, server, cipher, 0,
                                        work)
                cpu, rss, up, down = measure(s, home, arch, server, cipher,
                                             a.mib * MiB, work)
                print('| %s | %d KiB | %s | %.2f | %.1f | %.1f | %.1f |'
                      % (arch, size // 1024, cipher,
                         max(cpu - base, 0) / moved_gb, rss, up, down),
                      flush=True)
    finally:
        s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
