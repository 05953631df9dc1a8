# SPDX-License-Identifier: MIT
"""Live statistics: `qftfs --stats [--json|--watch] MOUNTPOINT`, the -d
request log and its summary, SIGUSR1.

1. --stats --json counts the bytes and files of a known copy exactly,
   both ways, and errors by errno; the JSON has the keys scripts use.
2. --watch in a terminal (tmux) shows a file while it is being written.
3. The counters are the mounting user's: another user gets EACCES.
4. SIGUSR1 logs the counters and the mount lives on; -d logs each
   request with its size and latency, and a summary at the end.
"""

import json
import os
import shutil
import subprocess
import threading
import time

import pytest

import util

P = os.path.join


def stats_json(build, mnt):
    r = util.run([util.client_bin(build), '--stats', '--json', mnt],
                 timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_json_counts_a_copy_exactly(mount, build, tmp_path):
    src, mnt = mount
    size = 3 * util.MiB + 12345
    local = str(tmp_path / 'local.bin')
    util.write_random_file(local, size)

    before = stats_json(build, mnt)
    for key in ('bytes_read', 'bytes_written', 'files_created', 'rtt_ms',
                'reconnects', 'errors', 'transfers', 'in_flight',
                'server_in_flight', 'writes_unacked', 'async_backlog',
                'read_rate', 'write_rate', 'compression_ratio'):
        assert key in before, key
    # Idle: nothing owed by the server, only the stats request itself
    # in the kernel's.
    assert before['server_in_flight'] == 0 and before['in_flight'] == 1
    subprocess.run(['cp', local, P(mnt, 'copy.bin')], check=True,
                   timeout=120)
    after = stats_json(build, mnt)
    assert after['bytes_written'] - before['bytes_written'] == size
    assert after['files_created'] - before['files_created'] == 1
    assert after['files_written'] - before['files_written'] == 1
    assert util.sha256_file(P(src, 'copy.bin')) == util.sha256_file(local)

    # Read a file the kernel has never seen: every byte crosses FUSE.
    shutil.copyfile(local, P(src, 'server.bin'))
    util.until_visible(P(mnt, 'server.bin'))
    before = after
    subprocess.run(['cp', P(mnt, 'server.bin'), str(tmp_path / 'back')],
                   check=True, timeout=120)
    after = stats_json(build, mnt)
    assert after['bytes_read'] - before['bytes_read'] == size
    assert after['files_read'] - before['files_read'] == 1
    assert after['bytes_written'] == before['bytes_written']

    # Errors by errno; a missing name is an answer, not an error.
    assert not os.path.exists(P(mnt, 'nothing-here'))
    os.mkdir(P(mnt, 'full'))
    with open(P(mnt, 'full', 'f'), 'w'):
        pass
    util.expect_errno(39, os.rmdir, P(mnt, 'full'))      # ENOTEMPTY
    after2 = stats_json(build, mnt)
    assert after2['errors'].get('ENOTEMPTY', 0) - \
        after['errors'].get('ENOTEMPTY', 0) == 1, after2['errors']
    assert 'ENOENT' not in after2['errors'], after2['errors']
    assert after2['rtt_ms'] > 0
    assert after2['reconnects'] == 0
    assert after2['connected'] == 1

    r = util.run([util.client_bin(build), '--stats', mnt], timeout=30)
    assert r.returncode == 0, r.stderr
    for word in ('read', 'written', 'round trip', 'errors', 'ENOTEMPTY'):
        assert word in r.stdout, (word, r.stdout)


def test_transfers_kept_are_bounded(mount, build):
    """A tree walk closes thousands of files a second: the transfers the
    mount keeps to show are its open files and the last 64 closed ones,
    not every file read lately (each read looks its file up among those
    kept, so a walk of 100,000 files slowed down as it went, and what was
    kept was freed only when someone asked for the statistics)."""
    src, mnt = mount
    n = 2000
    os.mkdir(P(src, 'tree'))
    for i in range(n):
        with open(P(src, 'tree', 'f%04d' % i), 'wb') as f:
            f.write(b'%d\n' % i)
    r = subprocess.run(['tar', 'cf', '-', '-C', mnt, 'tree'],
                       stdout=subprocess.PIPE, timeout=300, check=True)
    assert len(r.stdout) >= n * 512
    st = stats_json(build, mnt)
    assert st['files_read'] >= n, st['files_read']
    # Closed ones only: the kernel sends a file's RELEASE after close()
    # returned, so a few may still count as open.
    assert st['transfers_closed'] <= 64, \
        '%d closed transfers kept after reading %d files' % (
            st['transfers_closed'], n)
    assert all(x['path'].startswith('tree/f') and not x['open']
               for x in st['transfers']), st['transfers']


def test_stats_not_a_mount(build, tmp_path):
    r = util.run([util.client_bin(build), '--stats', str(tmp_path)],
                 timeout=30)
    assert r.returncode == 1
    assert 'not the root of a qftfs mount' in r.stderr, r.stderr
    r = util.run([util.client_bin(build), '--stats'], timeout=30)
    assert r.returncode == 2


def test_watch_shows_a_transfer(mount, build, tmp_path):
    """--watch in tmux: while a file is being written slowly, the screen
    names it with what was written so far."""
    if not shutil.which('tmux'):
        pytest.skip('tmux is not installed (scripts/install-deps.sh test '
                    'installs it)')
    src, mnt = mount
    session = 'qftfs-watch-%d' % os.getpid()
    sock = str(tmp_path / 'tmux.sock')
    stop = threading.Event()

    def writer():
        with open(P(mnt, 'slow-transfer.bin'), 'wb') as f:
            chunk = os.urandom(256 * 1024)
            while not stop.is_set():
                f.write(chunk)
                f.flush()
                time.sleep(0.1)

    t = threading.Thread(target=writer)
    started = time.monotonic()
    t.start()
    tmux = ['tmux', '-S', sock]
    screen = ''
    live = None
    try:
        r = util.run(tmux + ['new-session', '-d', '-s', session, '-x', '160',
                             '-y', '40', util.client_bin(build), '--stats',
                             '--watch', mnt], timeout=30)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 15 * util.timeout_scale()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            screen = util.run(tmux + ['capture-pane', '-p', '-t', session],
                              timeout=30).stdout
            if 'slow-transfer.bin' in screen and 'MiB' in screen:
                break
        # The rate covers the last full seconds: give it some.
        time.sleep(max(0.0, started + 3.5 - time.monotonic()))
        live = stats_json(build, mnt)
    finally:
        stop.set()
        t.join(timeout=60)
        util.run(tmux + ['kill-server'], timeout=30)
    assert 'slow-transfer.bin' in screen, screen
    assert 'FILE' in screen and 'written' in screen, screen
    line = [ln for ln in screen.splitlines() if 'slow-transfer.bin' in ln][0]
    assert 'MiB' in line, line            # bytes written so far
    assert live['write_rate'] > 0, live
    assert live['transfers'] and any(
        x['path'] == 'slow-transfer.bin' and x['open'] and
        x['bytes_written'] > 0 for x in live['transfers']), live


def test_stats_private_to_the_mounting_user(mounter, need_root):
    """With allow_other, another user may use the mount but not read what
    the mounting user does."""
    if not shutil.which('setpriv'):
        pytest.skip('setpriv is not installed')
    m = mounter(opts=['allow_other'])
    src, mnt = m
    os.chmod(src, 0o755)
    code = ('import os,sys\n'
            'try:\n'
            '    os.getxattr(sys.argv[1], "user.qftfs.stats")\n'
            '    print("READ")\n'
            'except OSError as e:\n'
            '    print(e.errno)\n')
    r = util.run(['setpriv', '--reuid=65534', '--regid=65534',
                  '--clear-groups', '/usr/bin/python3', '-c', code, mnt],
                 timeout=30)
    assert r.stdout.strip() == '13', (r.stdout, r.stderr)   # EACCES
    os.getxattr(mnt, 'user.qftfs.stats')     # the owner (root) may


def test_sigusr1_logs_stats(mount):
    src, mnt = mount
    with open(P(mnt, 'f'), 'wb') as f:
        f.write(b'x' * 1000)
    mount.proc.send_signal(10)   # SIGUSR1
    deadline = time.monotonic() + 10
    while 'stats:' not in mount.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 'stats:' in mount.log()
    assert 'bytes_written 1000' in mount.log(), util.tail(mount.log())
    assert mount.proc.poll() is None       # still serving
    assert os.path.getsize(P(mnt, 'f')) == 1000


def test_debug_logs_requests_and_summary(mounter):
    m = mounter(extra_args=['-d'])
    src, mnt = m
    with open(P(mnt, 'g'), 'wb') as f:
        f.write(b'y' * 4096)
    assert os.path.getsize(P(src, 'g')) == 4096
    problems = m.stop()
    assert not problems, problems
    log = m.log()
    writes = [ln for ln in log.splitlines() if 'request write' in ln]
    assert writes and 'size 4096' in writes[0] and ' ms' in writes[0], \
        util.tail(log)
    assert 'summary:' in log and 'write' in log.split('summary:', 1)[1]


def test_every_reply_passes_through_reqlog():
    """fuse/ops/reqlog.c counts answers on their way to the kernel through
    the linker's --wrap of each fuse_reply_* the client calls: a reply
    function used without its wrap would leave its requests in flight
    for ever.  Source check: every one used is wrapped (fuse/ops/meson.build
    lists the wrapped ones by their short names)."""
    import glob
    import re
    repo = util.REPO
    used = set()
    for path in glob.glob(P(repo, 'fuse', '**', '*.c'), recursive=True):
        with open(path) as f:
            used |= set(re.findall(r'\b(fuse_reply_[a-z_]+)\s*\(', f.read()))
    with open(P(repo, 'fuse', 'ops', 'meson.build')) as f:
        m = re.search(r"foreach f : \[(.*?)\]\s*\n\s*qc_reqlog_wrap_args \+= "
                      r"'-Wl,--wrap=fuse_reply_' \+ f", f.read(), re.S)
    assert m, 'no wrap list in fuse/ops/meson.build'
    wrapped = {'fuse_reply_' + w for w in re.findall(r"'([a-z_]+)'", m.group(1))}
    assert used and used <= wrapped, sorted(used - wrapped)


SYSLOG_PROBE = r'''
import os, socket, subprocess, sys, time
client, src, mnt, ov = sys.argv[1:5]
# A /dev of our own (this mount namespace only) with a /dev/log we read.
subprocess.run(['mount', '-t', 'tmpfs', 'tmpfs', ov], check=True)
os.makedirs(ov + '/u'); os.makedirs(ov + '/w')
subprocess.run(['mount', '-t', 'overlay', 'overlay', '-o',
                'lowerdir=/dev,upperdir=%s/u,workdir=%s/w' % (ov, ov), '/dev'],
               check=True)
log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
log.bind('/dev/log')
log.settimeout(10)
pid = None
try:
    r = subprocess.run([client, src, mnt], capture_output=True, text=True)
    print('exit', r.returncode, r.stderr.strip().replace('\n', ' | '))
    for p in os.listdir('/proc'):
        try:
            cmd = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\0')
        except OSError:
            continue
        if cmd[:3] == [client.encode(), src.encode(), mnt.encode()]:
            pid = int(p)
    print('pid', pid)
    os.kill(pid, 10)            # SIGUSR1
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        line = log.recv(65536).decode(errors='replace')
        print('syslog', line)
        if 'stats:' in line:
            break
    time.sleep(0.2)
    print('alive', os.path.exists('/proc/%d' % pid))
finally:
    subprocess.run(['fusermount3', '-u', mnt])
    if pid:
        for _ in range(100):
            if not os.path.exists('/proc/%d' % pid):
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
'''


def test_background_syslog_names_the_mount(build, need_root, need_fuse,
                                           tmp_path):
    """A background mount logs to syslog, each line starting with its
    mount point; SIGUSR1 logs the counters there and the daemon lives
    on.  /dev/log is a socket of the test's, in a mount namespace of its
    own."""
    if not shutil.which('unshare'):
        pytest.skip('unshare is not installed (util-linux)')
    src = tmp_path / 'src'
    src.mkdir()
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    ov = tmp_path / 'ov'
    ov.mkdir()
    r = util.run(['unshare', '--mount', '--propagation', 'private',
                  '/usr/bin/python3', '-c', SYSLOG_PROBE,
                  util.client_bin(build), str(src), str(mnt), str(ov)],
                 timeout=120)
    out = r.stdout
    if 'overlay' in r.stderr and r.returncode != 0:
        pytest.skip('cannot lay a /dev of its own over /dev: %s'
                    % r.stderr.strip()[-200:])
    assert r.returncode == 0, out + r.stderr
    assert 'exit 0' in out, out
    line = [ln for ln in out.splitlines() if 'stats:' in ln]
    assert line, out
    assert '%s: stats: ' % mnt in line[0], line[0]
    assert 'bytes_written 0' in line[0]
    assert 'alive True' in out, out
