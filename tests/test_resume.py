# SPDX-License-Identifier: MIT
"""Resumable sessions (issue 17; docs/protocol.md, "Resuming a session";
-o resume= in docs/qftfs.1): a link that dies under a transfer is taken
up again where it stopped, and the transfer completes, byte for byte.

The faults are real, on the lab of tests/netns.py (a network namespace
with an sshd, the server on the far side of a veth pair):
- a cut longer than -o timeout= (every packet dropped, silently), in the
  middle of an upload, a download and a tree copied with commit=async;
- every TCP connection of the server's host reset (`ss -K`), which also
  kills the ssh connection the mount was made over;
- the client's address changed (the old one removed) mid-upload;
- an outage longer than -o resume=: the copy must then fail with EIO
  within grace + deadline, never hang, and the mount serve again after
  the heal;
- the server's fault hook (a -Dfault_injection build, env
  QFTFS_FAULT_DROP_REPLY): the first reply of each named op is never
  sent and its connection is shut down, so each of those ops is sent
  again on a resumed link and must take effect exactly once;
- attaching over ssh (qftfs-server --attach): the cut and the reset with
  -o transport=ssh, a direct port a firewall blocks while ssh works
  (an `ip rule` blackhole in the server's namespace), a session that is
  gone (the client then starts a new server), and an attach by another
  user or with a wrong proof (refused, nothing changes).

Every copy goes through a FIFO the test feeds (or drains), so the fault
lands in the middle of it however fast the machine is, and the test
checks that it did (the transfer was not complete when the link came
back).
"""

import hashlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

import util
import wire
from util import MiB

from netns import lab, link  # noqa: F401
from test_faults import (DrainCopy, FeedCopy, file_size, home, served,  # noqa: F401
                         kill_servers, server_pids, ssh_mount, until_works,
                         wait_for, run_bounded, wait_no_server)

P = os.path.join

DEADLINE = 5
CUT = 10                      # seconds: two deadlines
GRACE = 60
OPTS = ['timeout=%d' % DEADLINE, 'keepalive=2', 'resume=%d' % GRACE]
COPY_SIZE = 64 * MiB
# What a loaded machine may add before a resumed transfer completes, or
# an error reaches the process that waits for it.
SLACK = 20
RESUMING = 'link lost; resuming (up to'
RESUMED = 'session resumed after'


def fed_digest(size, seed=64):
    """sha256 of what FeedCopy(size, seed) sends (1 MiB pieces)."""
    h = hashlib.sha256()
    rnd = random.Random(seed)
    for _ in range(size // MiB):
        h.update(rnd.randbytes(MiB))
    return h.hexdigest()


def digest(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for b in iter(lambda: f.read(MiB), b''):
            h.update(b)
    return h.hexdigest()


def assert_resumed(m, at_least=1):
    log = m.log()
    assert log.count(RESUMING) >= 1, \
        'the link was never lost with a resume; log:\n' + util.tail(log)
    assert log.count(RESUMED) >= at_least, \
        'the session was not resumed (%d of %d); log:\n%s' % (
            log.count(RESUMED), at_least, util.tail(log))
    assert 'cannot resume the session' not in log, util.tail(log)


def upload_across(m, tmp_path, served, fault, heal=None, during=0,
                  before_heal=None):
    """A 64 MiB cp onto the mount with `fault` injected once the server
    has 8 MiB of it; `heal` after `during` seconds.  Returns the cp."""
    target = P(served, 'big')
    copy = FeedCopy(tmp_path, P(m.mnt, 'big'), m)
    try:
        assert copy.feed(16 * MiB), 'cp stopped reading before any fault'
        wait_for(lambda: file_size(target) >= 8 * MiB, 60,
                 'the server to write 8 MiB')
        fault()
        copy.done()
        if heal:
            time.sleep(during)
            assert copy.cp.proc.poll() is None, \
                'cp ended during the fault: %s' % copy.cp.output
            assert file_size(target) < COPY_SIZE, \
                'the file was complete before the heal: the fault was late'
            if before_heal:
                before_heal()
            heal()
        rc = copy.cp.wait(GRACE + SLACK)
        assert rc is not None, 'cp still running %ds after the fault' % (
            GRACE + SLACK)
    finally:
        copy.finish()
    return copy.cp


@pytest.mark.deadline(180)
def test_upload_across_cut(link, mounter, tmp_path, served, home):
    """(a) The link cut for two deadlines in the middle of a 64 MiB
    upload, then healed: cp exits 0 and the server has every byte."""
    m = ssh_mount(mounter, link, home, served, opts=OPTS)
    seen = {}

    def stats():
        # The statistics say so while it resumes, and need no server.
        r = util.run([util.client_bin(m.build), '--stats', '--json',
                      m.mnt], timeout=10)
        assert r.returncode == 0, r.stderr
        seen.update(json.loads(r.stdout))
        r = util.run([util.client_bin(m.build), '--stats', m.mnt],
                     timeout=10)
        seen['text'] = r.stdout

    t0 = time.monotonic()
    cp = upload_across(m, tmp_path, served, link.cut, link.heal, CUT,
                       before_heal=stats)
    assert seen['link_state'] == 1, seen
    assert 0 < seen['resume_left_ms'] <= GRACE * 1000, seen
    assert seen['resume_kept'] > 0, seen
    assert 'RESUMING' in seen['text'] and 's left' in seen['text'], \
        seen['text']
    assert cp.rc == 0, 'cp failed across a %d s cut: %s' % (CUT, cp.output)
    assert digest(P(served, 'big')) == fed_digest(COPY_SIZE)
    assert os.stat(P(m.mnt, 'big')).st_size == COPY_SIZE
    assert_resumed(m)
    after = json.loads(util.run([util.client_bin(m.build), '--stats',
                                 '--json', m.mnt], timeout=10).stdout)
    assert after['link_state'] == 0 and after['resumes'] >= 1, after
    assert after['resume_kept'] == 0 or after['server_in_flight'] > 0
    print('cp done %.1fs after the fault' % (time.monotonic() - t0))
    problems = m.stop()
    assert not problems, '\n'.join(problems)
    # The unmount's BYE ended the session: the server does not wait out
    # its grace.
    left = wait_no_server(served, 10)
    assert not left, 'qftfs-server %s still running 10 s after the ' \
        'unmount (BYE sent?)' % left


@pytest.mark.deadline(180)
def test_download_across_cut(link, mounter, tmp_path, served, home):
    """(b) The same for a 64 MiB download: cp off the mount into a FIFO
    the test drains, cut at 16 MiB for two deadlines."""
    src = P(served, 'big')
    rnd = random.Random(7)
    with open(src, 'wb') as f:
        for _ in range(COPY_SIZE // MiB):
            f.write(rnd.randbytes(MiB))
    want = digest(src)
    m = ssh_mount(mounter, link, home, served, opts=OPTS)
    cp = DrainCopy(tmp_path, P(m.mnt, 'big'), m, 16 * MiB)
    try:
        cp.paused()
        link.cut()
        cp.go()
        time.sleep(CUT)
        assert cp.cp.proc.poll() is None, 'cp ended in the cut: ' + \
            cp.cp.output
        assert cp.n < COPY_SIZE, \
            'the whole file was read before the heal: the cut was late'
        link.heal()
        rc = cp.wait(GRACE + SLACK)
    finally:
        cp.finish()
    assert rc == 0, 'cp failed across a %d s cut: %s' % (CUT, cp.cp.output)
    assert cp.err is None, cp.err
    assert cp.n == COPY_SIZE and cp.digest() == want
    assert_resumed(m)
    problems = m.stop()
    assert not problems, '\n'.join(problems)


def make_tree(root, n):
    """n files in a few directories, of 100 B to 200 KiB; {relpath: data}."""
    files = {}
    rnd = random.Random(17)
    for i in range(n):
        rel = P('d%02d' % (i % 7), 'f%04d' % i)
        files[rel] = rnd.randbytes(rnd.choice((100, 3000, 40000, 200000)))
    return files


@pytest.mark.deadline(240)
def test_async_tree_across_cut(link, mounter, tmp_path, served, home,
                               build):
    """(c) A tree written with -o commit=async while the link is cut for
    two deadlines: every write succeeds, `qftfs --sync` exits 0, and the
    server has every file byte for byte."""
    m = ssh_mount(mounter, link, home, served, opts=OPTS + ['commit=async'])
    files = make_tree(None, 600)
    names = sorted(files)
    state = {'i': 0, 'err': None}
    gate = threading.Event()

    def writer():
        try:
            for i, rel in enumerate(names):
                if i == 150:
                    gate.set()
                d = P(m.mnt, 'tree', os.path.dirname(rel))
                os.makedirs(d, exist_ok=True)
                with open(P(m.mnt, 'tree', rel), 'wb') as f:
                    f.write(files[rel])
                state['i'] = i + 1
        except OSError as e:
            state['err'] = e
        gate.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    assert gate.wait(60), 'the writer did not get to 150 files'
    link.cut()
    time.sleep(CUT)
    written_in_cut = state['i']
    link.heal()
    t.join(GRACE + SLACK)
    assert not t.is_alive(), 'the writer still runs %ds after the heal' % (
        GRACE + SLACK)
    assert state['err'] is None, state['err']
    rc, out = run_bounded([util.client_bin(build), '--sync', m.mnt], m,
                          GRACE + SLACK)
    assert rc == 0, 'qftfs --sync: exit %s: %s' % (rc, out)
    for rel in names:
        with open(P(served, 'tree', rel), 'rb') as f:
            assert f.read() == files[rel], rel
    assert_resumed(m)
    assert written_in_cut < len(names), \
        'the tree was written before the cut hurt: it landed too late'
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(180)
def test_upload_across_reset(link, mounter, tmp_path, served, home):
    """(d) Every TCP connection of the server's host reset in the middle
    of an upload (`ss -K`, the ssh connection too): cp exits 0."""
    m = ssh_mount(mounter, link, home, served, opts=OPTS)
    killed = []
    cp = upload_across(m, tmp_path, served,
                       lambda: killed.append(link.reset_tcp()))
    # ss reports each socket it reset; the ssh, bulk and meta
    # connections were there, at least two of them are always listed.
    assert killed and len(killed[0]) >= 2, \
        'ss -K reset too little: %s' % killed
    assert cp.rc == 0, 'cp failed across a reset: %s' % cp.output
    assert 'connection was reset' in m.log() or \
        'closed the connection' in m.log(), util.tail(m.log())
    assert digest(P(served, 'big')) == fed_digest(COPY_SIZE)
    assert_resumed(m)
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(180)
def test_upload_across_address_change(link, mounter, tmp_path, served,
                                      home):
    """(e) The client's address changes in the middle of an upload (a new
    one added, the old one removed): the session resumes from the new
    address and cp exits 0."""
    m = ssh_mount(mounter, link, home, served, opts=OPTS)
    old = link.ns.host_addr
    cp = upload_across(m, tmp_path, served, link.move_client)
    assert link.ns.host_addr != old
    assert cp.rc == 0, 'cp failed across an address change: %s' % cp.output
    assert digest(P(served, 'big')) == fed_digest(COPY_SIZE)
    assert_resumed(m)
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(240)
def test_outage_longer_than_resume(link, mounter, tmp_path, served, home):
    """(f) A cut longer than -o resume=8 (with -o timeout=5): cp fails with
    EIO within grace + deadline (+ slack), does not hang, and the mount
    serves again after the heal."""
    grace = 8
    m = ssh_mount(mounter, link, home, served,
                  opts=['timeout=%d' % DEADLINE, 'keepalive=2',
                        'resume=%d' % grace])
    target = P(served, 'big')
    copy = FeedCopy(tmp_path, P(m.mnt, 'big'), m)
    try:
        assert copy.feed(16 * MiB), 'cp stopped reading before any fault'
        wait_for(lambda: file_size(target) >= 8 * MiB, 60,
                 'the server to write 8 MiB')
        link.cut()
        t0 = time.monotonic()
        copy.done()
        rc = copy.cp.wait(grace + DEADLINE + SLACK)
        took = time.monotonic() - t0
        assert rc is not None, 'cp still running %ds after the cut' % (
            grace + DEADLINE + SLACK)
    finally:
        copy.finish()
    assert rc != 0, 'cp reported success across an outage past the grace'
    assert 'Input/output error' in copy.cp.output, copy.cp.output
    # Within the grace it must not have failed: it waited for the link.
    assert took >= grace, 'cp failed %.1fs after the cut, inside the grace' \
        % took
    assert took <= grace + DEADLINE + 5, \
        'cp failed %.1fs after the cut (grace %d, deadline %d)' % (
            took, grace, DEADLINE)
    log = m.log()
    assert RESUMING in log and 'cannot resume the session' in log, \
        util.tail(log)
    # New calls fail at once past the grace, without a deadline's wait.
    if link.is_cut:
        t1 = time.monotonic()
        rc2, _ = run_bounded(['stat', P(m.mnt, 'nothing')], m, 30)
        assert rc2 is not None and rc2 != 0
        assert time.monotonic() - t1 < 2.5, \
            'a call after the grace waited %.1fs' % (time.monotonic() - t1)
    link.heal()
    took_back, _ = until_works(['ls', '-la', m.mnt], m, 40,
                               'the mount after the heal')
    data = random.Random(3).randbytes(MiB)
    with open(P(m.mnt, 'after'), 'wb') as f:
        f.write(data)
    with open(P(served, 'after'), 'rb') as f:
        assert f.read() == data
    print('cp failed %.1fs after the cut; served again %.1fs after the heal'
          % (took, took_back))
    problems = m.stop()
    assert not problems, '\n'.join(problems)


DROP = 'MKDIR,CREATE,RENAME,UNLINK,WRITE'


@pytest.mark.deadline(180)
def test_ops_exactly_once(lab, mounter, tmp_path, served, home):
    """(g) With the server's fault hook dropping the first reply of MKDIR,
    CREATE, RENAME, UNLINK and WRITE and shutting that connection down,
    each is sent again on a resumed link and takes effect exactly once:
    mkdir and an O_EXCL create succeed (no EEXIST), a rename and an
    unlink succeed (no ENOENT), an append appends once."""
    # A wrapper, as the list's commas cannot pass through -o server=.
    wrap, _ = util.fault_server(tmp_path, util.build_dir(),
                                'QFTFS_FAULT_DROP_REPLY', DROP)
    m = ssh_mount(mounter, lab, home, served, opts=OPTS, server=wrap)
    with open(P(served, 'log'), 'wb') as f:
        f.write(b'first\n')
    os.mkdir(P(m.mnt, 'd'))
    fd = os.open(P(m.mnt, 'd', 'x'), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                 0o644)
    os.close(fd)
    os.rename(P(m.mnt, 'd', 'x'), P(m.mnt, 'd', 'y'))
    os.unlink(P(m.mnt, 'd', 'y'))
    with open(P(m.mnt, 'log'), 'ab') as f:
        f.write(b'second\n')
    assert os.path.isdir(P(served, 'd'))
    assert os.listdir(P(served, 'd')) == []
    with open(P(served, 'log'), 'rb') as f:
        assert f.read() == b'first\nsecond\n'
    # Each of the five dropped replies cost one resume.
    assert_resumed(m, at_least=5)
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(60)
def test_resume_option_checked(build, tmp_path):
    """-o resume= beyond the cap is refused with a message that says why."""
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    r = util.run([util.client_bin(build), '-o', 'resume=3601', 'h:/x',
                  str(mnt)], timeout=30)
    assert r.returncode != 0
    assert 'at most 3600' in r.stderr, r.stderr
    r = util.run([util.client_bin(build), '-o', 'resume=-1', 'h:/x',
                  str(mnt)], timeout=30)
    assert r.returncode != 0 and 'invalid resume' in r.stderr, r.stderr


@pytest.mark.deadline(120)
def test_unmount_while_resuming(link, mounter, served, home):
    """fusermount3 -u while the session is being resumed (link cut, the
    loss noticed) returns at once, and the client exits within seconds
    instead of waiting for the grace."""
    m = ssh_mount(mounter, link, home, served,
                  opts=['timeout=%d' % DEADLINE, 'keepalive=2', 'resume=30'])
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(b'x' * MiB)
    link.cut()
    wait_for(lambda: RESUMING in m.log(), 3 * DEADLINE,
             'the loss to be noticed')
    t0 = time.monotonic()
    rc, out = run_bounded(['fusermount3', '-u', m.mnt], m, 10)
    took = time.monotonic() - t0
    assert rc == 0, 'fusermount3 -u: %s %s' % (rc, out)
    assert util.find_mount(m.mnt) is None
    try:
        m.proc.wait(timeout=10 * util.timeout_scale())
    except subprocess.TimeoutExpired:
        pytest.fail('qftfs still running 10 s after the unmount while '
                    'resuming', pytrace=False)
    done = time.monotonic() - t0
    assert done < 8, 'qftfs took %.1fs to exit after the unmount' % done
    print('unmount took %.1fs; qftfs exited after %.1fs' % (took, done))


# ---------------------------------------------------------------------------
# Attaching over ssh (qftfs-server --attach; docs/protocol.md, "Attaching
# over ssh"): where the session cannot be reached over TCP -- the tunnel,
# or a direct port that stopped answering -- the client logs in again and
# attaches to the running server instead of starting a new one.

ADEADLINE = 3
ACUT = 7                      # seconds: two deadlines and a bit
AOPTS = ['timeout=%d' % ADEADLINE, 'keepalive=1', 'resume=%d' % GRACE]
TUNNEL = AOPTS + ['transport=ssh']
ATTACHED = 'attached to the session on'


def the_server(served):
    pids = server_pids(served)
    assert len(pids) == 1, 'servers of %s: %s' % (served, pids)
    return pids[0]


def listening(lab, pid, kind):
    """The listening sockets of process `pid` in the lab's namespace, as
    `ss -l -p` shows them (`kind`: '-t' TCP, '-x' Unix); servers of
    earlier tests may still be waiting out their grace there."""
    r = util.run(lab.ns.nsenter() + ['ss', kind, '-l', '-n', '-p', '-H'],
                 timeout=10)
    return [line.split() for line in r.stdout.splitlines()
            if 'pid=%d,' % pid in line]


def session_id(lab, pid):
    """The attach socket's id, from `ss` in the server's namespace (an
    abstract name anybody there can see: knowing it must be no key)."""
    ids = [m.group(1) for words in listening(lab, pid, '-x') for w in words
           for m in [re.match(r'@qftfs-attach-([0-9a-f]{32})$', w)] if m]
    assert len(ids) == 1, 'attach sockets of %d: %s' % (
        pid, listening(lab, pid, '-x'))
    return ids[0]


def stop_and_check(m, served):
    problems = m.stop()
    assert not problems, '\n'.join(problems)
    left = wait_no_server(served, 10)
    assert not left, 'qftfs-server %s still running 10 s after the ' \
        'unmount' % left


@pytest.mark.deadline(120)
def test_tunnel_upload_across_cut(link, mounter, tmp_path, served, home):
    """-o transport=ssh: a cut longer than the deadline in the middle of a
    64 MiB upload, healed: the client logs in again, attaches to the same
    server, and cp exits 0 with every byte."""
    m = ssh_mount(mounter, link, home, served, opts=TUNNEL)
    pid = the_server(served)
    cp = upload_across(m, tmp_path, served, link.cut, link.heal, ACUT)
    assert cp.rc == 0, 'cp failed across a %d s cut: %s' % (ACUT, cp.output)
    assert digest(P(served, 'big')) == fed_digest(COPY_SIZE)
    assert_resumed(m)
    assert ATTACHED in m.log(), util.tail(m.log())
    assert server_pids(served) == [pid], 'another server was started'
    stop_and_check(m, served)


@pytest.mark.deadline(120)
@pytest.mark.parametrize('login', ['libssh2', 'openssh'])
def test_tunnel_upload_across_reset(link, mounter, tmp_path, served, home,
                                    login):
    """-o transport=ssh: every TCP connection of the server's host reset
    mid-upload (the ssh connection carrying the data): cp exits 0.  The
    attach logs in as the first login did: with libssh2, or with the
    OpenSSH client (-o ssh_command=ssh)."""
    opts = TUNNEL + (['ssh_command=ssh'] if login == 'openssh' else [])
    m = ssh_mount(mounter, link, home, served, opts=opts)
    pid = the_server(served)
    killed = []
    cp = upload_across(m, tmp_path, served,
                       lambda: killed.append(link.reset_tcp()))
    assert killed and killed[0], 'ss -K reset nothing'
    assert cp.rc == 0, 'cp failed across a reset: %s' % cp.output
    assert digest(P(served, 'big')) == fed_digest(COPY_SIZE)
    assert_resumed(m)
    assert ATTACHED in m.log(), util.tail(m.log())
    assert server_pids(served) == [pid], 'another server was started'
    stop_and_check(m, served)


def port_rule(lab, port, op):
    """op 'add': the server's host stops answering on `port` (its
    SYN-ACKs are dropped, as behind a firewall that appeared; ssh still
    works); 'del' takes that away again."""
    util.run(['ip', '-n', lab.ns.name, 'rule', op, 'pref', '10',
              'ipproto', 'tcp', 'sport', str(port), 'blackhole'],
             timeout=10, check=(op == 'add'))


def data_port(lab, pid):
    ports = [int(words[3].rsplit(':', 1)[1])
             for words in listening(lab, pid, '-t')]
    assert len(ports) == 1, 'listeners of %d: %s' % (
        pid, listening(lab, pid, '-t'))
    return ports[0]


@pytest.mark.deadline(120)
def test_direct_port_blocked_attaches_through_ssh(link, mounter, tmp_path,
                                                  served, home):
    """A direct data plane whose port stops answering mid-upload (a
    firewall appeared, and every connection was reset) while ssh still
    works: both lanes attach through ssh and cp exits 0."""
    m = ssh_mount(mounter, link, home, served, opts=AOPTS)
    pid = the_server(served)
    port = data_port(link, pid)

    def fault():
        port_rule(link, port, 'add')
        link.reset_tcp()
    try:
        cp = upload_across(m, tmp_path, served, fault)
    finally:
        port_rule(link, port, 'del')
    assert cp.rc == 0, 'cp failed across a blocked port: %s' % cp.output
    assert digest(P(served, 'big')) == fed_digest(COPY_SIZE)
    assert_resumed(m)
    assert m.log().count(ATTACHED) >= 2, util.tail(m.log())
    assert server_pids(served) == [pid], 'another server was started'
    stop_and_check(m, served)


@pytest.mark.deadline(120)
def test_attach_to_gone_session_starts_a_new_server(link, mounter, served,
                                                    home, build):
    """--attach of a session that is gone says so (line and exit status),
    and the client then starts a new server and serves on."""
    r = util.run(link.ns.nsenter() + [util.server_bin(build), '--attach',
                                      '0' * 32], timeout=10)
    assert r.returncode == 3 and r.stdout == 'QFTFS %d gone\n' % wire.VERSION, r
    m = ssh_mount(mounter, link, home, served, opts=TUNNEL)
    kill_servers(served)
    took, _ = until_works(['ls', '-la', m.mnt], m, 40,
                          'the mount after its server was killed')
    log = m.log()
    assert 'says the session is gone' in log, util.tail(log)
    assert 'cannot resume the session: the server is gone' in log, \
        util.tail(log)
    with open(P(m.mnt, 'after'), 'wb') as f:
        f.write(b'x' * MiB)
    assert file_size(P(served, 'after')) == MiB
    assert len(server_pids(served)) == 1
    print('served again %.1fs after the kill' % took)
    stop_and_check(m, served)


ATTACKER = r'''
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect('\0qftfs-attach-' + sys.argv[1])
try:
    s.sendall(b'QFTD' + bytes(12) + os.urandom(32))
    got = s.recv(100)
except OSError:
    got = b''
print(len(got))
'''


@pytest.mark.deadline(120)
def test_attach_by_stranger_or_wrong_proof_refused(link, mounter, served,
                                                   home, build, tmp_path):
    """Knowing the session id is no key: another user's connection to the
    attach socket is closed before any handshake; the session's own user
    with a wrong resume key is refused by the proof.  Neither changes
    anything: the same server serves on, nothing was resumed."""
    m = ssh_mount(mounter, link, home, served, opts=TUNNEL)
    pid = the_server(served)
    sid = session_id(link, pid)
    with open(P(m.mnt, 'before'), 'wb') as f:
        f.write(b'b' * 1000)

    # Another user: nothing comes back, not even the handshake's message 2.
    r = util.run(link.ns.nsenter() + [
        'setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
        sys.executable, '-c', ATTACKER, sid], timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == '0', r
    # The same user through --attach, with a key that is not K_r.
    a, b = socket.socketpair()
    p = subprocess.Popen(link.ns.nsenter() + [util.server_bin(build),
                                              '--attach', sid],
                         stdin=b, stdout=b, stderr=subprocess.PIPE)
    b.close()
    try:
        a.settimeout(10)
        line = b''
        while not line.endswith(b'\n'):
            c = a.recv(1)
            assert c, 'no line from --attach'
            line += c
        assert line == b'QFTFS %d attached\n' % wire.VERSION, line
        with pytest.raises((wire.AuthFailed, ConnectionResetError)):
            wire.Sealed(0, os.urandom(32), sock=a)
        assert p.wait(10) == 0
    finally:
        a.close()
        if p.poll() is None:
            p.kill()
        p.wait()
    # The server said why (its stderr reaches the client's log).
    wait_for(lambda: 'refused an attach from uid 65534' in m.log() and
             'rejected a connection resuming the session from the attach '
             'socket: wrong proof' in m.log(), 10,
             'the server to log both refusals')
    # Nothing changed.
    with open(P(m.mnt, 'before'), 'rb') as f:
        assert f.read() == b'b' * 1000
    with open(P(m.mnt, 'after'), 'wb') as f:
        f.write(b'a' * 1000)
    assert file_size(P(served, 'after')) == 1000
    assert server_pids(served) == [pid]
    assert RESUMING not in m.log(), util.tail(m.log())
    assert session_id(link, pid) == sid
    stop_and_check(m, served)


@pytest.mark.deadline(120)
def test_tunnel_unmount_while_resuming(link, mounter, served, home):
    """-o transport=ssh with the link cut and the loss noticed: the ssh
    attempts do not hold the unmount up; fusermount3 -u returns at once
    and the client exits within seconds."""
    m = ssh_mount(mounter, link, home, served, opts=TUNNEL)
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(b'x' * MiB)
    link.cut()
    wait_for(lambda: RESUMING in m.log(), 3 * ADEADLINE + 5,
             'the loss to be noticed')
    # Into the ssh attempts (each gives up on the cut link in 1.5 s).
    time.sleep(2)
    t0 = time.monotonic()
    rc, out = run_bounded(['fusermount3', '-u', m.mnt], m, 10)
    assert rc == 0, 'fusermount3 -u: %s %s' % (rc, out)
    try:
        m.proc.wait(timeout=10 * util.timeout_scale())
    except subprocess.TimeoutExpired:
        pytest.fail('qftfs still running 10 s after the unmount while '
                    'resuming through ssh', pytrace=False)
    done = time.monotonic() - t0
    assert done < 8, 'qftfs took %.1fs to exit after the unmount' % done
    assert 'cannot connect' not in m.log(), \
        'each failed attempt was logged: ' + util.tail(m.log())
