#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The locks scenario of the qftfs benchmark: sqlite inserts, one row per
transaction, from two writers at once, on two qftfs mounts of one
directory (locks forwarded to the server, -o locks=server), beside the
same on one mount and on the served directory itself.

    bash tests/bench/run.sh sqlite [--rows N] [--link NAME] [--out DIR]

Without --link, local mode (the server a child of each client, on a
socketpair): what the figures show is the cost of forwarding locks and
of sqlite's syncs through the mount, not of a link.  With --link (one
of bench.py's LINKS, emulated as for run.sh's other scenarios: netem
where the kernel has it, else QFTFS_BENCH_LINK_CMD), the mounts go over
ssh to the lab's host and every lock and sync pays the round trip.
Every configuration is checked: every row there, `PRAGMA
integrity_check` ok.  docs/benchmarks.md ("sqlite on two mounts") keeps
the latest figures.
"""
import argparse
import datetime
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (beside this file)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

WRITER = r'''
import sqlite3, sys
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = sqlite3.connect(path, timeout=600)
for i in range(n):
    with db:
        db.execute('insert into t(tag, i) values (?, ?)', (tag, i))
db.close()
'''


def mount(build, src, mnt, opts, log, lab=None, known_hosts=None):
    """A qftfs mount of `src` at `mnt`: the server its child (local
    mode), or over ssh to the lab's host when `lab` is given."""
    os.makedirs(mnt, exist_ok=True)
    argv = [os.path.join(build, 'fuse', 'qftfs'), '-f', '-o',
            'server=' + os.path.join(build, 'server', 'qftfs-server')]
    for o in opts:
        argv += ['-o', o]
    if lab:
        argv += ['-p', str(lab.port), '-o',
                 'IdentityFile=%s,UserKnownHostsFile=%s,'
                 'StrictHostKeyChecking=yes' % (lab.identity, known_hosts)]
        src = 'root@%s:%s' % (lab.host, src)
    p = subprocess.Popen(argv + [src, mnt], stdout=log,
                         stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.ismount(mnt):
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError('mount of %s failed' % mnt)
        time.sleep(0.05)
    return p


def umount(p, mnt):
    subprocess.run(['fusermount3', '-u', mnt], check=False)
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        # A mount namespace made meanwhile (ip netns exec) may hold a
        # copy of the mount, which keeps the daemon's session open.
        print('sqlite: %s: qftfs still running 60 s after the unmount; '
              'killed' % mnt, flush=True)
        p.kill()
        p.wait()


def run_writers(paths, rows):
    """Two writers at once (one per path); rows/s over both."""
    t0 = time.monotonic()
    ws = [subprocess.Popen([sys.executable, '-c', WRITER, p, 'w%d' % i,
                            str(rows)], stderr=subprocess.PIPE, text=True)
          for i, p in enumerate(paths)]
    errs = [w.communicate()[1] for w in ws]
    took = time.monotonic() - t0
    if any(w.returncode for w in ws):
        raise RuntimeError('a writer failed: %s' % errs)
    return took


def check(db, rows, writers):
    c = sqlite3.connect(db)
    counts = dict(c.execute('select tag, count(distinct i) from t group by tag'))
    ok = c.execute('pragma integrity_check').fetchone()[0]
    c.close()
    return ok == 'ok' and counts == {'w%d' % i: rows for i in range(writers)}


def main():
    ap = argparse.ArgumentParser(prog='run.sh sqlite',
                                 description=__doc__.split('\n\n')[0])
    ap.add_argument('--rows', type=int, default=300,
                    help='rows per writer (one transaction each)')
    ap.add_argument('--link', choices=sorted(bench.LINKS),
                    help='mount over ssh across this emulated link')
    ap.add_argument('--out')
    ap.add_argument('--argv0', default='bash tests/bench/run.sh sqlite',
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists('/dev/fuse'):
        print('sqlite: needs root and /dev/fuse; skipped')
        sys.exit(77)
    build = os.path.abspath(os.environ.get('QFTFS_BUILD',
                                           os.path.join(REPO, 'build')))
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
    outdir = os.path.abspath(args.out or os.path.join(HERE, 'results',
                                                      stamp + '-sqlite'))
    os.makedirs(outdir, exist_ok=True)
    base = os.environ.get('QFTFS_BENCH_DIR', '/var/tmp')
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix='qftfs-sqlite-', dir=base)
    log = open(os.path.join(outdir, 'mounts.log'), 'a')
    lab = known_hosts = None
    if args.link:
        if (not os.environ.get('QFTFS_BENCH_LINK_CMD') and
                not bench.netem_available()):
            print('sqlite: no link emulator (see run.sh); skipped')
            sys.exit(77)
        lab = bench.Lab('cmd' if os.environ.get('QFTFS_BENCH_LINK_CMD')
                        else 'netem')
        lab.up(*bench.LINKS[args.link])
        known_hosts = os.path.join(work, 'known_hosts')
        r = subprocess.run(['ssh-keyscan', '-p', str(lab.port), lab.host],
                           capture_output=True, text=True, timeout=30)
        with open(known_hosts, 'w') as f:
            f.write(r.stdout)
    src = os.path.join(work, 'srv')
    os.makedirs(src)
    configs = [
        ('served directory, no mount', [], 0),
        ('qftfs, two mounts, locks=server', [[], []], 2),
        ('qftfs, one mount, locks=server', [[]], 1),
        ('qftfs, one mount, locks=local', [['locks=local']], 1),
    ]
    records = []
    rc = 0
    try:
        for name, mounts, nm in configs:
            db = os.path.join(src, 'db')
            for f in (db, db + '-journal'):
                if os.path.exists(f):
                    os.unlink(f)
            c = sqlite3.connect(db)
            c.execute('create table t(id integer primary key, tag text, i int)')
            c.commit()
            c.close()
            procs = []
            try:
                mnts = []
                for i, opts in enumerate(mounts):
                    mnt = os.path.join(work, 'mnt%d' % i)
                    procs.append((mount(build, src, mnt, opts, log, lab,
                                        known_hosts), mnt))
                    mnts.append(mnt)
                if nm == 0:
                    paths = [db, db]
                elif nm == 1:
                    paths = [os.path.join(mnts[0], 'db')] * 2
                else:
                    paths = [os.path.join(m, 'db') for m in mnts]
                took = run_writers(paths, args.rows)
            finally:
                for p, mnt in procs:
                    umount(p, mnt)
            ok = check(db, args.rows, 2)
            rec = {'config': name, 'rows': 2 * args.rows,
                   'seconds': round(took, 2),
                   'rows_per_s': round(2 * args.rows / took, 1),
                   'verified': ok}
            print('%-34s %6d rows %7.2f s %8.1f rows/s %s' % (
                name, rec['rows'], took, rec['rows_per_s'],
                'ok' if ok else 'NOT VERIFIED'), flush=True)
            records.append(rec)
            if not ok:
                rc = 1
    finally:
        log.close()
        if lab:
            lab.down()
        shutil.rmtree(work, ignore_errors=True)
    command = ' '.join(args.argv0.split() + sys.argv[1:])
    out = {'command': command, 'date': datetime.datetime.now().astimezone()
           .isoformat(timespec='seconds'), 'link': args.link or 'local',
           'records': records}
    with open(os.path.join(outdir, 'results.json'), 'w') as f:
        json.dump(out, f, indent=1)
    lines = ['# sqlite, two writers, %d rows each, %s' % (
        args.rows, args.link or 'local mode'), '',
             'Produced by `%s` on %s.' % (command, out['date'][:10]), '',
             '| configuration | rows | s | rows/s | verified |',
             '|---|---:|---:|---:|---|']
    for r in records:
        lines.append('| %s | %d | %.2f | %.1f | %s |' % (
            r['config'], r['rows'], r['seconds'], r['rows_per_s'],
            'yes' if r['verified'] else 'no'))
    with open(os.path.join(outdir, 'results.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    sys.exit(rc)


if __name__ == '__main__':
    main()
