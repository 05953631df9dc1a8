#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The server's direct I/O (--direct) against the page cache, side by side.

    direct-bench.py BUILD ROUNDS SIZE_MIB CONFIGS

CONFIGS is a comma-separated list of IO-DIRECT (posix-off, posix-auto,
uring-off, uring-auto).  Local-mode mounts (-o server=), interleaved
rounds (every other one in reverse order); per round and config: a file
of SIZE_MIB written onto the mount from the page cache (1 MiB writes,
close timed apart), then read off it with the machine's page cache
dropped (cold) and again through a fresh mount (warm: the server's cache
as the cold pass left it).  Prints medians (min-max) of MB/s, CPU
seconds per GB of the server and of the client (/proc/PID/stat) and the
close.  Root: drops the page cache.  Files under /tmp/od/b.
"""
import os, subprocess, sys, time, statistics, glob
B = sys.argv[1]; ROUNDS = int(sys.argv[2]); SIZE = int(sys.argv[3]) << 20
CONFIGS = sys.argv[4].split(',')   # e.g. posix-off,posix-auto,uring-off,uring-auto
T = '/tmp/od/b'; SRC = T + '/src'; MNT = T + '/mnt'; ORIG = T + '/orig'
os.makedirs(SRC, exist_ok=True); os.makedirs(MNT, exist_ok=True)
MiB = 1 << 20
if not os.path.exists(ORIG) or os.path.getsize(ORIG) != SIZE:
    with open(ORIG, 'wb') as f:
        for _ in range(SIZE // MiB): f.write(os.urandom(MiB))
TCK = os.sysconf('SC_CLK_TCK')
def cpu(pid):
    try:
        v = open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()
        return (int(v[11]) + int(v[12])) / TCK
    except OSError: return 0.0
def drop(): subprocess.run(['sync']); open('/proc/sys/vm/drop_caches', 'w').write('3')
def mount(cfg):
    io, d = cfg.split('-')
    p = subprocess.Popen([B + '/fuse/qftfs', '-f', '-o', 'server=%s/server/qftfs-server --io=%s --direct=%s' % (B, io, d), SRC, MNT],
                         stdout=open(T + '/log', 'ab'), stderr=subprocess.STDOUT)
    for _ in range(100):
        time.sleep(0.05)
        if os.path.ismount(MNT): break
    srv = [int(x) for x in subprocess.run(['pgrep', '-P', str(p.pid)], capture_output=True, text=True).stdout.split()]
    return p, srv
def umount(p):
    subprocess.run(['umount', MNT]); p.wait()
def measure(cfg, kind):
    p, srv = mount(cfg)
    c0 = cpu(p.pid); s0 = sum(cpu(x) for x in srv)
    buf = bytearray(MiB); closet = 0
    t0 = time.monotonic()
    if kind == 'up':
        with open(ORIG, 'rb') as src:
            fd = os.open(MNT + '/f', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            while True:
                n = src.readinto(buf)
                if not n: break
                os.write(fd, memoryview(buf)[:n])
            tc = time.monotonic(); os.close(fd); closet = time.monotonic() - tc
    else:
        fd = os.open(MNT + '/f', os.O_RDONLY)
        while os.readv(fd, [buf]): pass
        os.close(fd)
    el = time.monotonic() - t0
    c1 = cpu(p.pid); s1 = sum(cpu(x) for x in srv)
    umount(p)
    gb = SIZE / 1e9
    return dict(mbs=SIZE / 1e6 / el, srv=(s1 - s0) / gb, cli=(c1 - c0) / gb, close=closet)
res = {}
for r in range(ROUNDS):
    order = CONFIGS if r % 2 == 0 else CONFIGS[::-1]
    for cfg in order:
        with open(ORIG, 'rb') as f:   # the source in the page cache
            while f.read(8 * MiB): pass
        drop() if False else None
        res.setdefault((cfg, 'up'), []).append(measure(cfg, 'up'))
        drop()
        res.setdefault((cfg, 'down-cold'), []).append(measure(cfg, 'down'))
        res.setdefault((cfg, 'down-warm'), []).append(measure(cfg, 'down'))
        os.unlink(SRC + '/f')
    print('round', r + 1, 'done', file=sys.stderr)
def fmt(xs, k, f):
    v = [x[k] for x in xs]
    return (f + ' (' + f + '-' + f + ')') % (statistics.median(v), min(v), max(v))
print('| config | workload | MB/s | server CPU s/GB | client CPU s/GB | close s |')
print('|---|---|---:|---:|---:|---:|')
for kind in ('up', 'down-cold', 'down-warm'):
    for cfg in CONFIGS:
        xs = res[(cfg, kind)]
        print('| %s | %s | %s | %s | %s | %s |' % (cfg, kind, fmt(xs, 'mbs', '%.0f'), fmt(xs, 'srv', '%.2f'),
              fmt(xs, 'cli', '%.2f'), fmt(xs, 'close', '%.3f') if kind == 'up' else ''))
