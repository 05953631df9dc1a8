# SPDX-License-Identifier: MIT
"""What needs nothing from the server never waits for it (issue 17;
docs/reliability.md, "With the link down").

With the link cut, these must return at once -- not after a deadline, nor
after the grace of a session being resumed:

- close() of a file opened read-only (and read) before the cut;
- close() of a file whose writes were all fsync'ed before the cut;
- stat(2) of a name whose entry and attributes the client holds as valid
  (-o entry_timeout / attr_timeout longer than the test), after a read
  made the kernel ask for them again; of a directory too while its lease
  is kept (a session being resumed keeps them);
- `qftfs --stats MOUNTPOINT`;
- `fusermount3 -u`, and the client then exits within seconds.

Each in every state of the link: just cut (the client does not know yet:
a request sent then is simply never answered), declared dead while the
session is being resumed (-o resume=, 120 s by default: what needs the
server waits for it that long), and given up once the grace ran out --
when, besides, a new operation that needs the server (a stat of a name
not held) fails at once with EIO, until the host answers again.  After
the heal the same mount works.

The link is tests/netns.py's: every packet silently dropped, as a pulled
cable does.  FAST, the bound on "at once", is generous for a loaded
machine: the operations beat it by two orders of magnitude.  A wait for
the server lasts a deadline at least (then the grace, while resuming),
and -o timeout=5 keeps that five times FAST while the test, which waits
for the client to declare the link dead, stays cheap.  Each operation runs in a
helper process that times the system call alone (process start-up is not
the mount's); one that waits is aborted, with the mount, when it waits
longer than the test can afford.
"""

import json
import os
import select
import subprocess
import sys
import time

import pytest

import util

from netns import lab, link  # noqa: F401
from test_faults import home, served, ssh_mount, until_works  # noqa: F401

P = os.path.join

DEADLINE = 5                  # -o timeout: a wait for the server shows
FAST = 1.0                    # "at once": a system call, in the helper
FAST_CMD = 2.0                # ... a whole command (`qftfs --stats`)
# How long a measured operation may take before the test gives up on it.
BOUND = DEADLINE + 10
# attr/entry timeouts longer than the test: what the client was told
# before the cut is still valid throughout.
HELD = 600
# The client's exit after the unmount on a cut link: about 2 s
# (docs/reliability.md); it was 5 s, or the whole grace with a file just
# released.
EXIT_BOUND = 4
OPTS = ['timeout=%d' % DEADLINE, 'keepalive=1',
        'attr_timeout=%d' % HELD, 'entry_timeout=%d' % HELD]
UP, RESUMING, DOWN = 0, 1, 2  # link_state of the statistics (conn.h)

# The helper: one command per line on stdin, one JSON line back for each,
# [seconds the system call took, errno or null]:
#   open NAME r PATH   open for reading and read it all
#   open NAME w PATH   create, write 300000 bytes, fsync
#   close NAME         close(2)
#   stat PATH          stat(2)
HELPER = r'''
import json, os, sys, time
fds = {}
for line in sys.stdin:
    words = line.split()
    t0 = time.monotonic()
    err = None
    try:
        if words[0] == 'open' and words[2] == 'r':
            fd = os.open(words[3], os.O_RDONLY)
            assert os.read(fd, 1 << 20)
            fds[words[1]] = fd
        elif words[0] == 'open':
            fd = os.open(words[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                         0o644)
            os.write(fd, b'w' * 300000)
            os.fsync(fd)
            fds[words[1]] = fd
        elif words[0] == 'close':
            os.close(fds.pop(words[1]))
        elif words[0] == 'stat':
            os.stat(words[1])
    except OSError as e:
        err = e.errno
    print(json.dumps([time.monotonic() - t0, err]), flush=True)
'''


class Helper:
    """The HELPER process.  Never left blocked: a system call still
    waiting after BOUND seconds aborts the mount's FUSE connection, and
    fails the test."""

    def __init__(self, mount):
        self.mount = mount
        self.proc = subprocess.Popen([sys.executable, '-c', HELPER],
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def do(self, *words):
        """(seconds, errno or None) of one command."""
        self.proc.stdin.write(' '.join(words) + '\n')
        self.proc.stdin.flush()
        t0 = time.monotonic()
        r, _, _ = select.select([self.proc.stdout], [], [],
                                BOUND * util.timeout_scale())
        out = self.proc.stdout.readline() if r else ''
        if not out:
            self.finish()
            pytest.fail('%s still waiting after %.0fs with the link cut' %
                        (' '.join(words), time.monotonic() - t0),
                        pytrace=False)
        took, err = json.loads(out)
        return took, err

    def fast(self, phase, *words):
        took, err = self.do(*words)
        what = '%s: %s' % (phase, ' '.join(words))
        assert err is None, '%s failed after %.2fs: %s' % (
            what, took, os.strerror(err))
        assert took < FAST * util.timeout_scale(), \
            '%s took %.2fs with the link cut (deadline %ds)' % (
                what, took, DEADLINE)
        return took

    def finish(self):
        if self.proc.poll() is not None:
            return
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            if self.mount.dev:
                util.fuse_abort(self.mount.dev)
            self.proc.kill()
            self.proc.wait(timeout=30)


def stats(build, m):
    """`qftfs --stats --json`: (seconds, dict), failing the test when it
    fails or waits."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([util.client_bin(build), '--stats', '--json',
                            m.mnt], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True,
                           timeout=BOUND * util.timeout_scale())
    except subprocess.TimeoutExpired:
        if m.dev:
            util.fuse_abort(m.dev)
        pytest.fail('qftfs --stats still waiting after %ds' % BOUND,
                    pytrace=False)
    took = time.monotonic() - t0
    assert r.returncode == 0, 'qftfs --stats: %s' % r.stderr
    assert took < FAST_CMD * util.timeout_scale(), \
        'qftfs --stats took %.2fs with the link cut' % took
    return took, json.loads(r.stdout)


def wait_state(build, m, state, within):
    """Polls --stats (each reading at once) until link_state is `state`."""
    t0 = time.monotonic()
    while True:
        st = stats(build, m)[1]
        if st['link_state'] == state:
            return st
        assert time.monotonic() - t0 < within * util.timeout_scale(), \
            'link_state %d, not %d, %ds after the cut: %s' % (
                st['link_state'], state, within, st)
        time.sleep(0.2)


def check_fast(h, build, m, phase, closes, held, fresh=None):
    """Every check of the module docstring but the unmount.  `fresh`: a
    file read (from the server) since it was given its attributes, so
    its stat comes to the client, which must answer it from what it
    holds."""
    for name in closes:
        h.fast(phase, 'close', name)
    for p in held:
        h.fast(phase, 'stat', p)
    st = stats(build, m)[1]
    if fresh:
        h.fast(phase, 'stat', fresh)
        local = stats(build, m)[1]['getattrs_local']
        assert local > st['getattrs_local'], \
            '%s: the stat of %s did not come to the client' % (phase,
                                                              fresh)


def prepare(m, served, h):
    """Files held open by the helper, names whose attributes the kernel
    was given for HELD seconds (returned), and files s1, s2, s3 looked
    up and then read: the kernel then asks for their atime again at
    their next stat, one each phase."""
    for name in ('ro1', 'ro2', 'ro3', 's1', 's2', 's3'):
        with open(P(served, name), 'wb') as f:
            f.write(name.encode() * 50000)
    os.mkdir(P(m.mnt, 'd'))
    with open(P(m.mnt, 'd', 'f'), 'wb') as f:
        f.write(b'f' * 1000)
    for name in ('ro1', 'ro2', 'ro3', 's1', 's2', 's3'):
        h.fast('before the cut', 'open', name, 'r', P(m.mnt, name))
    for name in ('s1', 's2', 's3'):
        h.fast('before the cut', 'close', name)
    for name in ('w1', 'w2', 'w3'):
        h.fast('before the cut', 'open', name, 'w', P(m.mnt, name))
    held = [P(m.mnt, 'ro1'), P(m.mnt, 'd', 'f'), P(m.mnt, 'd')]
    for p in held:
        os.stat(p)
    return held


# A directory's attributes change with what is made in it, so the client
# holds none of them: it answers them from the directory's lease, which
# ends with the session.  Past the grace only files' are held.
def files_of(held):
    return [p for p in held if not p.endswith('/d')]


def after_heal(m, served):
    until_works(['ls', P(m.mnt, 'd')], m, DEADLINE + 30, 'ls after the heal')
    with open(P(m.mnt, 'w1'), 'rb') as f:
        assert f.read() == b'w' * 300000
    with open(P(m.mnt, 'new'), 'wb') as f:
        f.write(b'after the heal')
    with open(P(served, 'new'), 'rb') as f:
        assert f.read() == b'after the heal'


@pytest.mark.deadline(150)
def test_outage_answers_what_needs_no_server(link, mounter, served, home,
                                            build):
    """Right after the cut and again, five times in a row, once the link
    is declared dead and the session is being resumed; after the heal
    the session resumes and the mount works."""
    m = ssh_mount(mounter, link, home, served, opts=OPTS)
    h = Helper(m)
    try:
        held = prepare(m, served, h)
        st = stats(build, m)[1]
        assert st['link_state'] == UP, st
        link.cut()
        check_fast(h, build, m, 'just cut', ['ro2', 'w1'], held,
                   P(m.mnt, 's1'))
        wait_state(build, m, RESUMING, DEADLINE + 10)
        check_fast(h, build, m, 'resuming', ['ro3', 'w2'], held,
                   P(m.mnt, 's2'))
        # The fifth in a row is no slower than the first.
        for i in range(3):
            check_fast(h, build, m, 'resuming, again', [], held)
        h.fast('resuming', 'close', 'ro1')
        link.heal()
        h.finish()
    finally:
        link.heal()
        h.finish()
    after_heal(m, served)
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(150)
def test_outage_past_the_grace(link, mounter, served, home, build):
    """Once the grace of -o resume= has run out: what the client holds
    still answers at once, and a stat of a name it does not hold fails
    at once with EIO instead of waiting for a deadline; after the heal
    the mount serves again."""
    grace = 2
    m = ssh_mount(mounter, link, home, served,
                  opts=OPTS + ['resume=%d' % grace])
    h = Helper(m)
    try:
        held = prepare(m, served, h)
        # On the server, never looked up through the mount.
        with open(P(served, 'unseen'), 'wb') as f:
            f.write(b'u')
        link.cut()
        wait_state(build, m, RESUMING, DEADLINE + 10)
        st = wait_state(build, m, DOWN, grace + 10)
        assert st['connected'] == 0, st
        held = files_of(held)
        check_fast(h, build, m, 'past the grace', ['ro2', 'w1'], held,
                   P(m.mnt, 's3'))
        for i in range(3):
            took, err = h.do('stat', P(m.mnt, 'unseen'))
            assert err == 5, 'stat of a name not held past the grace: ' \
                '%s after %.2fs, not EIO' % (
                    err and os.strerror(err), took)
            assert took < FAST * util.timeout_scale(), \
                'stat of a name not held past the grace failed after ' \
                '%.2fs, not at once' % took
        check_fast(h, build, m, 'past the grace, again', ['ro3'], held)
        link.heal()
        h.finish()
    finally:
        link.heal()
        h.finish()
    after_heal(m, served)
    os.stat(P(m.mnt, 'unseen'))
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(120)
@pytest.mark.parametrize('when', ['just_cut', 'resuming'])
def test_outage_unmount_at_once(link, mounter, served, home, build, when):
    """fusermount3 -u returns at once with the link cut, a read-only file
    just closed (its release is the client's last request), and the
    client exits within seconds, not after a deadline or the grace."""
    m = ssh_mount(mounter, link, home, served, opts=OPTS)
    with open(P(served, 'ro'), 'wb') as f:
        f.write(b'r' * 100000)
    h = Helper(m)
    try:
        h.fast('before the cut', 'open', 'ro', 'r', P(m.mnt, 'ro'))
        link.cut()
        if when == 'resuming':
            wait_state(build, m, RESUMING, DEADLINE + 10)
        h.fast(when, 'close', 'ro')
        h.finish()
        t0 = time.monotonic()
        r = subprocess.run(['fusermount3', '-u', m.mnt],
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=BOUND * util.timeout_scale())
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert took < FAST_CMD * util.timeout_scale(), \
            'fusermount3 -u took %.2fs with the link cut' % took
        assert util.find_mount(m.mnt) is None
        try:
            crc = m.proc.wait(timeout=EXIT_BOUND * util.timeout_scale())
        except subprocess.TimeoutExpired:
            pytest.fail('qftfs still running %.1fs after the unmount with '
                        'the link cut' % (time.monotonic() - t0),
                        pytrace=False)
        print('%s: the client exited %.1fs after the unmount began' %
              (when, time.monotonic() - t0))
        # 1 says the link was lost (fuse/main.c); a signal is a crash.
        assert crc in (0, 1), 'qftfs exited with %d' % crc
    finally:
        link.heal()
        h.finish()
    problems = m.stop()
    assert not problems, '\n'.join(problems)
