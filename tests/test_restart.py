# SPDX-License-Identifier: MIT
"""A session carried over to a new server after its server died (issue
17; docs/protocol.md, "Carrying a session over to a new server";
docs/reliability.md): the server is killed with kill -9 in the middle of
the work, on a host that did not reboot, and the work completes.

- HELLO tells the host's boot id to a client that asks (QFT_FEAT_BOOTID),
  and only then; a test build's QFTFS_FAULT_BOOT_ID replaces it;
- kill -9 of the server in the middle of a 64 MiB upload over ssh: cp
  exits 0 and the server has every byte -- what the old server
  acknowledged was in the host's page cache, the rest is sent again;
- the same for a download;
- with a changed boot id (the fault hook plays a host that rebooted) the
  same upload fails with EIO, and what is on the server is a prefix of
  what was written, nothing else;
- requests the old server never answered whose effect nobody can know
  (mkdir, an O_EXCL create, a rename) fail with EIO, while a write and
  its fsync, sent again, succeed -- with the server stopped (SIGSTOP)
  before it could answer any of them, then killed.

The mounts run over the lab of tests/netns.py (its own sshd), as a board
reached over ssh would be.
"""

import os
import random
import signal
import sys
import threading
import time

import pytest

import util
import wire
from util import MiB

from netns import lab  # noqa: F401
from test_faults import (Bg, file_size, home, kill_servers,  # noqa: F401
                         served, server_pids, ssh_mount, until_works,
                         wait_for)
from test_resume import digest, fed_digest, upload_across

P = os.path.join

DEADLINE = 5
GRACE = 60
OPTS = ['timeout=%d' % DEADLINE, 'keepalive=2', 'resume=%d' % GRACE]
COPY_SIZE = 64 * MiB
SLACK = 30
CARRIED = 'session carried over to a new server'
BOOT_ID = '/proc/sys/kernel/random/boot_id'


def host_boot_id():
    with open(BOOT_ID) as f:
        return f.read().strip()


# ---------------------------------------------------------------------------
# The boot id on the wire

def test_boot_id_in_hello(wire_server, tmp_path):
    """Asked for, the HELLO reply carries the host's boot id; not asked
    for, it carries nothing more than an older server's would."""
    if not os.path.exists(BOOT_ID):
        pytest.skip('%s is missing here' % BOOT_ID)
    s = wire_server(str(tmp_path), hello=False)
    r = s.hello(features=wire.FEAT_BOOTID)
    assert r.status == 0, r
    assert r['features'] & wire.FEAT_BOOTID
    assert r['boot_id'] == host_boot_id().encode()
    s2 = wire_server(str(tmp_path), hello=False)
    r = s2.hello()
    assert r.status == 0 and not r['features'] & wire.FEAT_BOOTID, r
    assert 'boot_id' not in r.fields


def test_boot_id_fault_hook(wire_server, tmp_path):
    """A test build's QFTFS_FAULT_BOOT_ID replaces the boot id (the
    tests' stand-in for a host that rebooted); a value HELLO could not
    carry is a usage error."""
    why = util.fault_injection_reason(util.build_dir())
    if why:
        pytest.skip(why)
    s = wire_server(str(tmp_path), hello=False,
                    extra_env={'QFTFS_FAULT_BOOT_ID': 'rebooted-1'})
    r = s.hello(features=wire.FEAT_BOOTID)
    assert r.status == 0 and r['boot_id'] == b'rebooted-1', r
    exe = util.server_bin(util.build_dir())
    res = util.run([exe, '--stdio', '--root', str(tmp_path)], timeout=30,
                   env=dict(os.environ, QFTFS_FAULT_BOOT_ID='two words'))
    assert res.returncode != 0
    assert 'QFTFS_FAULT_BOOT_ID' in res.stderr, res.stderr


# ---------------------------------------------------------------------------
# kill -9 of the server

def kill_fault(served, before=None):
    """The fault for test_resume.upload_across: `before` (if any), then
    kill -9 of the server, which must be gone for good (the carry-over
    starts another)."""
    def fault():
        if before:
            before()
        old = server_pids(served)
        kill_servers(served)
        assert not set(old) & set(server_pids(served))
    return fault


@pytest.mark.deadline(180)
def test_upload_across_server_kill(lab, mounter, tmp_path, served, home):
    """kill -9 of the server 16 MiB into a 64 MiB cp: the client starts a
    new server, carries the session over, and cp exits 0 with every
    byte on the server."""
    m = ssh_mount(mounter, lab, home, served, opts=OPTS)
    # Resumed once first: a resumed link still knows its host's boot.
    with open(P(m.mnt, 'before'), 'wb') as f:
        f.write(b'x')
    lab.reset_tcp()
    os.stat(P(m.mnt, 'before'))
    with open(P(m.mnt, 'before'), 'rb') as f:
        assert f.read() == b'x'
    wait_for(lambda: 'session resumed' in m.log(), 30, 'the resume')
    t0 = time.monotonic()
    cp = upload_across(m, tmp_path, served, kill_fault(served))
    assert cp.rc == 0, 'cp failed across a server kill: %s\n%s' % (
        cp.output, util.tail(m.log()))
    assert digest(P(served, 'big')) == fed_digest(COPY_SIZE)
    assert os.stat(P(m.mnt, 'big')).st_size == COPY_SIZE
    log = m.log()
    assert CARRIED in log, util.tail(log)
    assert len(server_pids(served)) == 1
    print('cp done %.1fs after the kill' % (time.monotonic() - t0))
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(180)
def test_download_across_server_kill(lab, mounter, tmp_path, served, home):
    """kill -9 of the server while a 64 MiB file is read off the mount:
    the reads are sent again to the new server, and the copy is exact."""
    src = P(served, 'big')
    rnd = random.Random(7)
    with open(src, 'wb') as f:
        for _ in range(COPY_SIZE // MiB):
            f.write(rnd.randbytes(MiB))
    want = digest(src)
    m = ssh_mount(mounter, lab, home, served, opts=OPTS)
    out = str(tmp_path / 'copy')
    fd = os.open(P(m.mnt, 'big'), os.O_RDONLY)
    try:
        with open(out, 'wb') as dst:
            n = 0
            while True:
                if n == 16 * MiB:
                    kill_servers(served)
                b = os.read(fd, MiB)
                if not b:
                    break
                dst.write(b)
                n += len(b)
    finally:
        os.close(fd)
    assert digest(out) == want
    assert CARRIED in m.log(), util.tail(m.log())
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(180)
def test_rebooted_host_fails_with_eio(lab, mounter, tmp_path, served, home):
    """The same kill, but the new server names another boot of the host
    (the fault hook): what the old server acknowledged may be lost, so
    cp fails with EIO -- and the server holds a prefix of what was
    written, nothing else.  The mount then works again."""
    wrap, boot = util.fault_server(tmp_path, util.build_dir(),
                                   'QFTFS_FAULT_BOOT_ID')
    m = ssh_mount(mounter, lab, home, served, opts=OPTS, server=wrap)
    target = P(served, 'big')

    def reboot():
        with open(boot, 'w') as f:
            f.write('rebooted-%d' % os.getpid())

    copy = upload_across(m, tmp_path, served, kill_fault(served, reboot))
    rc = copy.rc
    assert rc != 0, 'cp reported success across a reboot of the host'
    assert 'Input/output error' in copy.output, copy.output
    log = m.log()
    assert 'boot id changed' in log, util.tail(log)
    assert CARRIED not in log
    # Whatever reached the server is the start of what was written.
    size = file_size(target)
    assert size < COPY_SIZE
    rnd = random.Random(64)
    with open(target, 'rb') as f:
        for off in range(0, size, MiB):
            want = rnd.randbytes(MiB)
            got = f.read(MiB)
            assert got == want[:len(got)], 'wrong bytes at %d' % off
    until_works(['ls', m.mnt], m, 20, 'the mount after the new boot')
    problems = m.stop()
    assert not problems, '\n'.join(problems)


ATTEMPT = r'''
import errno, os, sys
what, a, b = sys.argv[1:4]
try:
    if what == 'mkdir':
        os.mkdir(a)
    elif what == 'create':
        os.close(os.open(a, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    else:
        os.rename(a, b)
    print(0)
except OSError as e:
    print(errno.errorcode[e.errno])
'''


@pytest.mark.deadline(180)
def test_unknown_outcomes_fail_with_eio(lab, mounter, tmp_path, served,
                                        home):
    """A mkdir, an O_EXCL create and a rename that the old server ran but
    never answered (its fault hook stops it right before the reply; then
    it is killed): nobody can know they were made, so each fails with
    EIO -- never a guess, never a second execution.  WRITEs at an offset
    and their fsync, unanswered at the same kill, are sent again to the
    new server and succeed."""
    # The server started next stops itself once it has executed the
    # named request, before answering it.
    wrap, stop = util.fault_server(tmp_path, util.build_dir(),
                                   'QFTFS_FAULT_STOP_REPLY', 'MKDIR')
    m = ssh_mount(mounter, lab, home, served, opts=OPTS, server=wrap)
    d = P(m.mnt, 'd')
    os.makedirs(P(served, 'd'))
    with open(P(served, 'd', 'old'), 'wb') as f:
        f.write(b'old')
    data = random.Random(3).randbytes(3 * MiB)
    fd = os.open(P(m.mnt, 'w'), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, data[:MiB])
    os.fsync(fd)
    synced = {}

    def write_and_sync():
        try:
            # Answered by the write-behind at once; the fsync waits.
            os.pwrite(fd, data[MiB:], MiB)
            os.fsync(fd)
            synced['rc'] = 0
        except OSError as e:
            synced['rc'] = e.errno

    got = {}
    t = None
    try:
        for what, a, b_, after in (('mkdir', 'new', '-', 'CREATE'),
                                   ('create', 'x', '-', 'RENAME'),
                                   ('rename', 'old', 'renamed', '')):
            pids = server_pids(served)
            assert len(pids) == 1, pids
            op = Bg([sys.executable, '-c', ATTEMPT, what, P(d, a),
                     P(d, b_)], m, tmp=str(tmp_path))
            try:
                wait_for(lambda: util.proc_stopped(pids[0]), 30,
                         'the server to stop before answering ' + what)
                if what == 'mkdir':
                    # Behind the unanswered MKDIR: WRITEs and an FSYNC.
                    t = threading.Thread(target=write_and_sync,
                                         daemon=True)
                    t.start()
                    time.sleep(1)
                    assert t.is_alive(), synced
                # The next server stops at the next request.
                with open(stop, 'w') as f:
                    f.write(after)
                os.kill(pids[0], signal.SIGKILL)
                assert op.wait(GRACE + SLACK) is not None, what
            finally:
                op.finish()
            got[what] = op.output.strip()
        t.join((GRACE + SLACK) * util.timeout_scale())
        assert not t.is_alive(), 'fsync still waiting after the kill'
    finally:
        if t and t.is_alive() and m.dev:
            util.fuse_abort(m.dev)
    assert got == {'mkdir': 'EIO', 'create': 'EIO', 'rename': 'EIO'}, \
        '%s\n%s' % (got, util.tail(m.log()))
    # Each was made by the server that died: the EIO says "unknown",
    # not "not done".
    assert os.path.isdir(P(served, 'd', 'new'))
    assert os.path.exists(P(served, 'd', 'x'))
    assert os.path.exists(P(served, 'd', 'renamed'))
    assert synced == {'rc': 0}, synced
    os.close(fd)
    with open(P(served, 'w'), 'rb') as f:
        assert f.read() == data
    assert m.log().count(CARRIED) == 3, util.tail(m.log())
    problems = m.stop()
    assert not problems, '\n'.join(problems)
