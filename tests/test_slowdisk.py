# SPDX-License-Identifier: MIT
"""Durable close on slow storage, on real local mounts.

What must hold (docs/protocol.md, "Progress"; qftfs(1), timeout=):

- a close(2) whose fdatasync on the server takes longer than the request
  deadline (-o timeout=) succeeds: the server sends PROGRESS frames while
  it syncs, and the client counts them as life, so the deadline measures
  the server's silence, not its work;
- a server stopped (SIGSTOP) or killed while it syncs still makes that
  close fail with EIO within the deadline: the frames stop with it;
- the server writes a big file out behind the stream (sync_file_range),
  so that by the time the last WRITE is answered all but a bounded tail
  is on the disk already, and close() waits only for that tail.  Counted
  in bytes the server's cgroup wrote, not in seconds;
- but not where close() does not wait for the disk (commit=async,
  commit=none: the client marks those handles QFT_O_LAZY): there the
  stream goes at the link's pace, and fsync(2) still makes the server
  write the whole file out before it returns.

"Slow storage" is an ext4 file system on a loop device whose writes are
throttled for the server's cgroup: cgroup v2 io.max (wbps) or, on a
cgroup v1 host, blkio.throttle.write_bps_device.  The server's fdatasync
submits the file's write-out itself, in its own cgroup, so the close waits
for the throttle.  Where that cannot be set up (not root, no loop device,
no throttling controller, or the throttle does not slow an fdatasync) the
tests skip and say why.  Timing is asserted only as bounds the scenario
needs (the close really outlasted the deadline; the failure came within
deadline plus slack), never as speed.
"""

import errno
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

import util
from util import MiB

P = os.path.join

TIMEOUT = 5          # -o timeout=
SLACK = 7            # scheduling, a loaded machine, the watchdog's tick
RATE = 2 * MiB       # bytes/s the server may write to the slow disk
# The server writes all but the last 32-36 MiB out while the file streams
# in (WRITEOUT_TAIL below), so the close's fdatasync writes about that:
# 16 s or more at RATE, over 3 x TIMEOUT.
FILE = 40 * MiB
IMAGE = 1024 * MiB

V1_BLKIO = '/sys/fs/cgroup/blkio'
V2_ROOTS = ('/sys/fs/cgroup', '/sys/fs/cgroup/unified')

WRAPPER = '''#!/bin/sh
# Puts the server into the throttled cgroup, then becomes it.
echo $$ > '%(procs)s' || exit 1
exec "$@"
'''


def _v2_root():
    for r in V2_ROOTS:
        try:
            with open(P(r, 'cgroup.controllers')) as f:
                if 'io' in f.read().split():
                    return r
        except OSError:
            pass
    return None


def _setup_reason():
    if os.geteuid() != 0:
        return 'needs root (loop device, mount, cgroup)'
    for tool in ('losetup', 'mkfs.ext4', 'mount', 'umount'):
        if not shutil.which(tool):
            return '%s is missing' % tool
    if not _v2_root() and not os.path.exists(
            P(V1_BLKIO, 'blkio.throttle.write_bps_device')):
        return ('no write throttle: neither the cgroup v2 io controller '
                'nor cgroup v1 blkio.throttle is available')
    return None


class SlowDisk:
    """An ext4 loop device mounted at `root`, and a cgroup whose writes to
    it are throttled; `wrapper` runs a command inside that cgroup."""

    def __init__(self, base):
        self.base = base
        self.loop = None
        self.root = P(base, 'disk')
        self.mounted = False
        self.cg = None
        self.v2 = False
        self.wrapper = P(base, 'in-cgroup.sh')

    def setup(self):
        img = P(self.base, 'disk.img')
        with open(img, 'wb') as f:
            f.truncate(IMAGE)
        r = util.run(['losetup', '-f', '--show', img], timeout=30)
        if r.returncode != 0:
            return 'losetup failed: %s' % (r.stderr or r.stdout).strip()
        self.loop = r.stdout.strip()
        r = util.run(['mkfs.ext4', '-q', '-F', self.loop], timeout=120)
        if r.returncode != 0:
            return 'mkfs.ext4 failed: %s' % r.stderr.strip()
        os.makedirs(self.root)
        r = util.run(['mount', self.loop, self.root], timeout=30)
        if r.returncode != 0:
            return 'mount of the loop device failed: %s' % r.stderr.strip()
        self.mounted = True
        return self._cgroup()

    def _cgroup(self):
        name = 'qftfs-slowdisk-%d' % os.getpid()
        v2 = _v2_root()
        try:
            if v2:
                with open(P(v2, 'cgroup.subtree_control'), 'w') as f:
                    f.write('+io')
                self.cg, self.v2 = P(v2, name), True
            else:
                self.cg = P(V1_BLKIO, name)
            os.mkdir(self.cg)
        except OSError as e:
            self.cg = None
            return 'cannot make a cgroup for the throttle: %s' % e
        with open(self.wrapper, 'w') as f:
            f.write(WRAPPER % {'procs': P(self.cg, 'cgroup.procs')})
        os.chmod(self.wrapper, 0o755)
        return None

    def set_rate(self, bps):
        """Throttles writes of the cgroup to the disk to `bps` bytes/s."""
        rdev = os.stat(self.loop).st_rdev
        dev = '%d:%d' % (os.major(rdev), os.minor(rdev))
        if self.v2:
            path, line = P(self.cg, 'io.max'), '%s wbps=%d' % (dev, bps)
        else:
            path = P(self.cg, 'blkio.throttle.write_bps_device')
            line = '%s %d' % (dev, bps)
        with open(path, 'w') as f:
            f.write(line)

    def written(self):
        """Bytes the cgroup has written to the disk so far."""
        rdev = os.stat(self.loop).st_rdev
        dev = '%d:%d' % (os.major(rdev), os.minor(rdev))
        if self.v2:
            with open(P(self.cg, 'io.stat')) as f:
                for line in f:
                    if line.startswith(dev + ' '):
                        for kv in line.split()[1:]:
                            k, _, v = kv.partition('=')
                            if k == 'wbytes':
                                return int(v)
            return 0
        with open(P(self.cg, 'blkio.throttle.io_service_bytes')) as f:
            for line in f:
                w = line.split()
                if len(w) == 3 and w[0] == dev and w[1] == 'Write':
                    return int(w[2])
        return 0

    def probe(self):
        """Seconds an fdatasync of 2 MiB takes in the cgroup at 1 MiB/s."""
        self.set_rate(1 * MiB)
        probe = P(self.root, 'probe')
        t0 = time.monotonic()
        r = util.run([self.wrapper, 'dd', 'if=/dev/zero', 'of=' + probe,
                      'bs=1M', 'count=2', 'conv=fdatasync', 'status=none'],
                     timeout=120)
        took = time.monotonic() - t0
        os.unlink(probe)
        return took if r.returncode == 0 else None

    def teardown(self):
        if self.mounted:
            if util.run(['umount', self.root], timeout=120).returncode:
                util.run(['umount', '-l', self.root], timeout=30)
        if self.loop:
            util.run(['losetup', '-d', self.loop], timeout=30)
        if self.cg:
            # The processes in it have exited with their mounts.
            for _ in range(50):
                try:
                    os.rmdir(self.cg)
                    break
                except OSError:
                    time.sleep(0.1)


@pytest.fixture
def slowdisk(tmp_path):
    """A SlowDisk throttled to RATE.  Request it before `mounter`, so that
    the mounts end before the disk goes."""
    why = _setup_reason()
    if why:
        pytest.skip('slow storage cannot be emulated: ' + why)
    d = SlowDisk(str(tmp_path))
    try:
        why = d.setup()
        if not why:
            took = d.probe()
            if took is None:
                why = 'a command in the throttled cgroup failed'
            elif took < 1.2:
                why = ('the throttle does not slow fdatasync here (2 MiB '
                       'at 1 MiB/s took %.2f s)' % took)
        if why:
            pytest.skip('slow storage cannot be emulated: ' + why)
        d.set_rate(RATE)
        yield d
    finally:
        d.teardown()


def _mount(mounter, disk, **kw):
    src = P(disk.root, 'src')
    os.makedirs(src, exist_ok=True)
    # --direct=off: a long fdatasync needs the file dirty in the page
    # cache; with direct writes (the default where the file system has
    # them) the data reaches the disk during the WRITEs, and the close
    # has next to nothing left to sync.
    return mounter(src=src, server_wrapper=disk.wrapper,
                   server=util.server_bin(util.build_dir()) +
                   ' --direct=off',
                   opts=['timeout=%d' % TIMEOUT], **kw)


def _servers(m):
    return [p for p in util.proc_children(m.proc.pid)
            if util.proc_alive(p, '--root')]


def _write_unclosed(path, size):
    """Opens `path` and writes `size` pseudo-random bytes, every MiB
    different; returns (open file, sha256 of the content)."""
    import hashlib
    import random
    rnd = random.Random(size)
    h = hashlib.sha256()
    f = open(path, 'wb')
    for _ in range(size // MiB):
        b = rnd.randbytes(MiB)
        f.write(b)
        h.update(b)
    return f, h.hexdigest()


@pytest.mark.deadline(240)
def test_long_flush_is_not_a_lost_link(slowdisk, mounter):
    """close() whose fdatasync needs over twice the deadline succeeds, and
    the data is all there."""
    m = _mount(mounter, slowdisk)
    src, mnt = m
    f, digest = _write_unclosed(P(mnt, 'big'), FILE)
    t0 = time.monotonic()
    f.close()
    took = time.monotonic() - t0
    # Without this the test would not test anything: the close must have
    # outlasted the deadline by far.
    assert took > 2 * TIMEOUT, (
        'the close took %.1f s: the throttle did not make the fdatasync '
        'outlast the %d s deadline' % (took, TIMEOUT))
    assert util.sha256_file(P(src, 'big')) == digest
    log = m.log()
    assert 'no reply' not in log, util.tail(log)
    # The same mount goes on working: the link was never given up.
    assert os.stat(P(mnt, 'big')).st_size == FILE


def _close_in_thread(f):
    """Starts f.close() in a thread; returns (thread, result dict)."""
    res = {}

    def run():
        t0 = time.monotonic()
        try:
            f.close()
            res['err'] = None
        except OSError as e:
            res['err'] = e.errno
        res['t'] = time.monotonic()
        res['took'] = res['t'] - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, res


@pytest.mark.deadline(240)
@pytest.mark.parametrize('sig', [signal.SIGSTOP, signal.SIGKILL],
                         ids=['stopped', 'killed'])
def test_server_lost_during_long_flush_fails(slowdisk, mounter, sig):
    """The server stopped or killed while it syncs: close() fails with EIO
    within the deadline of the loss, not when the sync would have ended."""
    m = _mount(mounter, slowdisk, expect_rc=None)
    src, mnt = m
    f, _ = _write_unclosed(P(mnt, 'big'), FILE)
    pids = _servers(m)
    assert pids, 'no server child found'
    t, res = _close_in_thread(f)
    # Well into the sync, past a deadline's worth of it: the progress
    # frames are what keeps the close waiting by now.
    time.sleep(TIMEOUT + 1)
    assert 'err' not in res, (
        'the close ended (%r) before the server was %s: the throttle did '
        'not make the fdatasync long' % (res.get('err'), sig.name))
    lost = time.monotonic()
    for p in pids:
        os.kill(p, sig)
    try:
        t.join(TIMEOUT + SLACK + 30)
        assert not t.is_alive(), 'close() still waiting %d s after the ' \
            'server was %s' % (TIMEOUT + SLACK + 30, sig.name)
        assert res['err'] == errno.EIO, 'close() after the server was ' \
            '%s: %r' % (sig.name, res['err'])
        assert res['t'] - lost <= TIMEOUT + SLACK, (
            'close() failed %.1f s after the server was %s, deadline %d s'
            % (res['t'] - lost, sig.name, TIMEOUT))
    finally:
        for p in pids:
            try:
                os.kill(p, signal.SIGCONT)
            except OSError:
                pass
    # The client logs why it gave up right after failing the waiters: a
    # stopped server by its silence, a killed one maybe by its end.
    until = time.monotonic() + 10
    while 'lost' not in m.log() and time.monotonic() < until:
        time.sleep(0.1)
    assert 'lost' in m.log(), util.tail(m.log())


# The server's bound (server/xfer.c WRITEOUT_LAG + WRITEOUT_CHUNK): what
# may still be unwritten when the last WRITE of a stream is answered.
WRITEOUT_TAIL = 36 * MiB


# The server's debug line for a lazy handle (server/ops.c finish_open).
LAZY_LOG = 'lazy handle: no write-out behind its WRITEs'


def _mount_debug(mounter, disk, commit):
    src = P(disk.root, 'src')
    os.makedirs(src, exist_ok=True)
    # attr_timeout=0: an fstat asks the server, behind the WRITEs.
    return mounter(src=src, server_wrapper=disk.wrapper,
                   server=util.server_bin(util.build_dir()) + ' -d',
                   opts=['attr_timeout=0', 'commit=' + commit])


@pytest.mark.deadline(240)
@pytest.mark.parametrize('commit', ['close', 'async', 'none'])
def test_writeout_behind_the_stream(slowdisk, mounter, commit):
    """commit=close: before close(), all but the tail of a 96 MiB file has
    reached the disk, and after it the file is whole.  commit=async and
    commit=none, where close() does not wait for the disk: the stream is
    not paced to it (the server wrote out less than pacing would have
    made it write before answering the last WRITE)."""
    size = 96 * MiB
    slowdisk.set_rate(32 * MiB)
    m = _mount_debug(mounter, slowdisk, commit)
    src, mnt = m
    before = slowdisk.written()
    f, digest = _write_unclosed(P(mnt, 'big'), size)
    with f:
        f.flush()
        # Runs on the server after every WRITE before it was answered.
        assert os.fstat(f.fileno()).st_size == size
        early = slowdisk.written() - before
    if commit == 'close':
        total = slowdisk.written() - before
        assert total >= size, 'the close wrote %d of %d bytes' % (total, size)
        assert early >= size - WRITEOUT_TAIL, (
            'only %.1f MiB of %d MiB reached the disk before close(): no '
            'write-out behind the stream' % (early / MiB, size // MiB))
        assert LAZY_LOG not in m.log(), util.tail(m.log())
    else:
        assert early < size - WRITEOUT_TAIL, (
            '%.1f MiB of %d MiB reached the disk before close() although '
            'commit=%s does not wait for it: the stream was paced to the '
            'disk' % (early / MiB, size // MiB, commit))
        assert LAZY_LOG in m.log(), util.tail(m.log())
    if commit == 'async':
        r = util.run([m.client, '--sync', mnt], timeout=120)
        assert r.returncode == 0, (r.stdout, r.stderr)
    assert util.sha256_file(P(src, 'big')) == digest


@pytest.mark.deadline(240)
def test_fsync_of_lazy_handle_is_durable(slowdisk, mounter):
    """commit=async: fsync() of a file whose WRITEs were not paced still
    makes the server fdatasync it: the server's own cgroup wrote the whole
    file to the disk before fsync() returned."""
    size = 48 * MiB
    slowdisk.set_rate(32 * MiB)
    m = _mount_debug(mounter, slowdisk, 'async')
    src, mnt = m
    before = slowdisk.written()
    f, digest = _write_unclosed(P(mnt, 'big'), size)
    with f:
        f.flush()
        assert os.fstat(f.fileno()).st_size == size
        assert LAZY_LOG in m.log(), util.tail(m.log())
        early = slowdisk.written() - before
        assert early < size - WRITEOUT_TAIL, (
            'the stream was paced: %.1f MiB on the disk before fsync'
            % (early / MiB))
        os.fsync(f.fileno())
        synced = slowdisk.written() - before
    assert synced >= size, (
        'fsync() returned when the server had written %.1f of %d MiB'
        % (synced / MiB, size // MiB))
    fsyncs = [l for l in m.log().splitlines() if 'FSYNC id' in l]
    assert fsyncs and all(l.endswith(': ok') for l in fsyncs), \
        util.tail(m.log())
    assert util.sha256_file(P(src, 'big')) == digest
