# SPDX-License-Identifier: MIT
"""A soak of resumable sessions (issue 17): outages of random length and
kind -- the link cut (shorter and longer than the deadline), every TCP
connection of the server's host reset, the server killed -- one after
another, under the ASan+UBSan build of client and server, with reads,
writes, listings and closes running through them all the time.

What must hold:
- the client never dies, and the mount answers at the end;
- nothing is lost: every file whose close() succeeded is on the server
  byte for byte, every read returns the file's bytes;
- every failure is EIO, and the faults explain it: the link's outages
  stay within the grace, so only a server kill may fail an operation --
  one whose outcome the dead server took with it (a create, an unlink, a
  listing in progress) -- and only within moments of the kill;
- neither program reports a sanitizer error (the mounter's teardown
  reads both logs).

The suite runs a few outages (QFTFS_SOAK_OUTAGES, default 8); the figure
in docs/reliability.md comes from `QFTFS_SOAK_OUTAGES=100`.
"""

import json
import subprocess
import os
import random
import sys
import time

import pytest

import util
from util import MiB

from netns import lab  # noqa: F401
from test_faults import (home, kill_servers, served,  # noqa: F401
                         server_pids, ssh_mount, wait_for)

P = os.path.join

DEADLINE = 3
GRACE = 40
OPTS = ['timeout=%d' % DEADLINE, 'keepalive=1', 'resume=%d' % GRACE]
# After a server kill: the carry-over (an ssh login and a new server,
# slow under the sanitizers), then a deadline, then a loaded machine.
EXPLAINED_S = 25
LONGEST_CUT = 8

# A worker: loops on one kind of work against the mount until the file
# `stop` exists, writing one JSON line per failure or loss and a last
# line with its counts.
WORKER = r'''
import errno, hashlib, json, os, random, sys, time
kind, mnt, served, stop, seed = sys.argv[1:6]
rnd = random.Random(int(seed))
out = sys.stdout
done = 0
def report(op, err, what=''):
    out.write(json.dumps({'t': time.time(), 'kind': kind, 'op': op,
                          'errno': err, 'what': what}) + '\n')
    out.flush()
def attempt(op, fn, *a):
    try:
        return True, fn(*a)
    except OSError as e:
        report(op, errno.errorcode.get(e.errno, e.errno), str(e))
        return False, None
i = 0
while not os.path.exists(stop):
    i += 1
    if kind == 'writer':
        name = 'w%d-%d' % (int(seed), i)
        data = rnd.randbytes(rnd.choice((0, 100, 70000, 300000, 1100000)))
        def write():
            fd = os.open(os.path.join(mnt, 'soak', name),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for off in range(0, len(data), 256 * 1024):
                    os.write(fd, data[off:off + 256 * 1024])
                os.fsync(fd)
            finally:
                os.close(fd)
        ok, _ = attempt('write', write)
        if ok:
            with open(os.path.join(served, 'soak', name), 'rb') as f:
                if f.read() != data:
                    report('write', 'LOST', name)
            attempt('unlink', os.unlink, os.path.join(mnt, 'soak', name))
    elif kind == 'reader':
        name = 'r%d' % (i % 4)
        def read():
            with open(os.path.join(mnt, 'ro', name), 'rb') as f:
                return f.read()
        ok, got = attempt('read', read)
        if ok:
            with open(os.path.join(served, 'ro', name), 'rb') as f:
                if got != f.read():
                    report('read', 'CORRUPT', name)
    elif kind == 'lister':
        ok, names = attempt('listdir', os.listdir, os.path.join(mnt, 'ro'))
        for n in names or ():
            attempt('stat', os.stat, os.path.join(mnt, 'ro', n))
    else:
        def hold():
            fd = os.open(os.path.join(mnt, 'ro', 'r0'), os.O_RDONLY)
            try:
                os.read(fd, 4096)
            finally:
                os.close(fd)
        attempt('close', hold)
    done += 1
out.write(json.dumps({'kind': kind, 'done': done}) + '\n')
'''


def outages():
    try:
        return max(1, int(os.environ.get('QFTFS_SOAK_OUTAGES', '8')))
    except ValueError:
        return 8


@pytest.mark.deadline(1800)
def test_soak_outages(lab, mounter, tmp_path, served, home):
    b = util.asan_build_dir()
    if not os.path.isdir(b):
        pytest.skip('sanitizer build %s is missing' % b)
    os.mkdir(P(served, 'soak'))
    os.mkdir(P(served, 'ro'))
    for i in range(4):
        with open(P(served, 'ro', 'r%d' % i), 'wb') as f:
            f.write(random.Random(i).randbytes(2 * MiB))
    m = ssh_mount(mounter, lab, home, served, opts=OPTS, build=b)
    stop = str(tmp_path / 'stop')
    workers = []
    for n, kind in enumerate(('writer', 'writer', 'reader', 'lister',
                              'closer')):
        log = open(str(tmp_path / ('worker%d.log' % n)), 'w+')
        workers.append((subprocess.Popen(
            [sys.executable, '-c', WORKER, kind, m.mnt, served, stop,
             str(n)], stdout=log, stderr=subprocess.STDOUT), log))
    rnd = random.Random(int(os.environ.get('QFTFS_SOAK_SEED', '17')))
    faults = []
    t_start = time.monotonic()
    try:
        for i in range(outages()):
            time.sleep(rnd.uniform(0.5, 2.0))
            kind = rnd.choices(('cut', 'reset', 'kill'), (2, 1, 1))[0]
            t0 = time.time()
            if kind == 'cut':
                lab.cut()
                time.sleep(rnd.uniform(0.5, LONGEST_CUT))
                lab.heal()
            elif kind == 'reset':
                lab.reset_tcp()
            else:
                # The server the last kill's carry-over starts may not
                # be up yet: the kill is of the next one.
                wait_for(lambda: server_pids(served), 60,
                         'a server to kill (the last one was killed)')
                t0 = time.time()
                kill_servers(served)
            faults.append((t0, time.time(), kind))
            assert m.proc.poll() is None, \
                'the client died in outage %d (%s):\n%s' % (
                    i, kind, util.tail(m.log()))
        # Long enough for the last outage's resume or carry-over.
        time.sleep(EXPLAINED_S / 2)
    finally:
        lab.heal()
        open(stop, 'w').close()
        ends = []
        for proc, log in workers:
            try:
                ends.append(proc.wait(timeout=(GRACE + 30) *
                                      util.timeout_scale()))
            except Exception:
                if m.dev:
                    util.fuse_abort(m.dev)
                proc.kill()
                proc.wait(timeout=30)
                ends.append(None)
    took = time.monotonic() - t_start
    assert m.proc.poll() is None, 'the client died:\n' + util.tail(m.log())
    assert ends == [0] * len(workers), 'a worker did not end: %s' % ends
    failures, counts = [], {}
    for proc, log in workers:
        log.seek(0)
        for line in log:
            rec = json.loads(line)
            if 'done' in rec:
                counts[rec['kind']] = counts.get(rec['kind'], 0) + \
                    rec['done']
            else:
                failures.append(rec)
        log.close()
    kills = [f[0] for f in faults if f[2] == 'kill']
    bad = [f for f in failures if f['errno'] != 'EIO' or not any(
        k <= f['t'] <= k + EXPLAINED_S * util.timeout_scale()
        for k in kills)]
    assert not bad, 'failures no fault explains: %s\nfaults: %s\n%s' % (
        bad[:10], faults, util.tail(m.log()))
    assert all(counts.get(k, 0) > 0 for k in
               ('writer', 'reader', 'lister', 'closer')), counts
    # The mount answers, and sees what the server has.
    assert sorted(os.listdir(P(m.mnt, 'ro'))) == ['r0', 'r1', 'r2', 'r3']
    with open(P(m.mnt, 'ro', 'r1'), 'rb') as f:
        assert f.read() == random.Random(1).randbytes(2 * MiB)
    print('%d outages (%s) in %.0f s; operations %s; EIO after kills: %d'
          % (len(faults), ', '.join('%s %d' % (k, sum(
              1 for f in faults if f[2] == k)) for k in
              ('cut', 'reset', 'kill')), took, counts, len(failures)))
    problems = m.stop()
    assert not problems, '\n'.join(problems)
