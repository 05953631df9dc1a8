# SPDX-License-Identifier: MIT
"""sshfs compatibility: every option of the real `sshfs -h` is accepted
(mapped, or noted with the reason), the mapped ones take effect, owner
and mode mapping (idmap=, uid=, gid=, umask=) are real, and option
combinations that cannot work exit non-zero before going to the
background."""

import os
import re
import shutil
import subprocess

import pytest

import util

P = os.path.join

# Options qftfs acts on (mapped or native): they need no note.  Every
# other option sshfs lists must be named in a note on stderr.
EFFECTIVE = {
    'reconnect', 'no_readahead', 'dir_cache', 'dcache_max_size',
    'idmap', 'uidfile', 'gidfile', 'nomap', 'password_stdin', '-C',
    'compression', 'port', '-p', '-F', '-f', '-s', '-d', '--debug',
    'umask', 'uid', 'gid', 'entry_timeout', 'negative_timeout',
    'attr_timeout', 'allow_other', 'allow_root', 'auto_unmount', 'subdir',
    'ssh_command', 'follow_symlinks',
}
# Options that cannot work with qftfs: exit 2 with the reason.
REFUSED = {'-1', 'passive'}


def _client(build):
    c = util.client_bin(build)
    if not os.access(c, os.X_OK):
        pytest.fail('not built: %s' % c, pytrace=False)
    return c


def sshfs_help():
    exe = shutil.which('sshfs')
    if not exe:
        pytest.skip('sshfs is not installed (scripts/install-deps.sh test '
                    'installs it): cannot read its option list')
    r = util.run([exe, '-h'], timeout=30)
    text = r.stdout + r.stderr
    assert 'reconnect' in text, text
    return text


def sshfs_options(text):
    """(name, argument) for every option in sshfs's help: -o name[=ARG]
    (with [no]x and {a,b} forms expanded) and the single-dash flags."""
    out = []
    for line in text.splitlines():
        m = re.match(r'\s+-o\s+(\S+)', line)
        if m:
            spec = m.group(1)
            if spec.startswith('opt,') or spec.startswith('SSHOPT'):
                continue
            name, _, arg = spec.partition('=')
            names = [name]
            b = re.match(r'(.*)\{(.*)\}(.*)', name)
            if b:
                names = [b.group(1) + x + b.group(3)
                         for x in b.group(2).split(',')]
            if name.startswith('[no]'):
                names = [name[4:], 'no' + name[4:]]
            out += [(n, arg) for n in names]
            continue
        m = re.match(r'\s+(-[a-zA-Z0-9])[\s,]+(?:(--[a-z]+)\s)?'
                     r'(?:([A-Za-z_]+)\s)?', line)
        if m:
            flag, longf, arg = m.groups()
            if flag in ('-h', '-V', '-o'):
                continue
            out.append((flag, arg if arg and arg.isupper() or
                        arg == 'ssh_configfile' else ''))
            if longf and longf not in ('--help', '--version'):
                out.append((longf, ''))
    return out


def sample(name, arg, tmp):
    """A command-line fragment giving option `name` a sensible value."""
    values = {
        'PORT': '22', 'ssh_configfile': P(tmp, 'ssh_config'), 'N': '1',
        'BOOL': 'yes', 'T': '1', 'M': '022', 'LIST': 'none',
        'TYPE': 'user', 'FILE': P(tmp, 'idfile'), 'CMD': 'ssh',
        'SERV': 'sftp', 'DIR': 'sub', 'CHARSET': 'UTF-8',
        'M1[:M2...]': 'subdir',
    }
    if name == 'nomap':
        return ['-o', 'nomap=ignore']
    if name == 'ssh_protocol':
        return ['-o', 'ssh_protocol=2']
    if name.startswith('-'):
        return [name] + ([values.get(arg, arg)] if arg else [])
    if not arg:
        return ['-o', name]
    assert arg in values, 'no sample value for %s=%s' % (name, arg)
    return ['-o', '%s=%s' % (name, values[arg])]


def dry_run(client, args, tmp, remote=False):
    """qftfs with `args`, stopped at the mount point check (a regular
    file), which comes before any connection: exit 1 with that message
    means every option was accepted."""
    src = 'nobody@host.invalid:/dir' if remote else P(tmp, 'src')
    notdir = P(tmp, 'notdir')
    cmd = [client] + args + [src, notdir]
    return util.run(cmd, timeout=30, input='')


@pytest.fixture
def drytree(tmp_path):
    t = str(tmp_path)
    os.makedirs(P(t, 'src', 'sub'))
    open(P(t, 'notdir'), 'w').close()
    open(P(t, 'ssh_config'), 'w').close()
    with open(P(t, 'idfile'), 'w') as f:
        f.write('root:0\n')
    return t


def test_every_sshfs_option_accepted(build, drytree):
    """Each option of the installed sshfs's help, alone, is accepted
    (qftfs gets as far as the mount point); those without effect say so
    in a note naming them; the few that cannot work exit 2 with the
    reason."""
    client = _client(build)
    opts = sshfs_options(sshfs_help())
    assert len(opts) > 50, opts   # the parser still understands the help
    bad = []
    for name, arg in opts:
        args = sample(name, arg, drytree)
        if name in ('-F',):
            args = ['-F', P(drytree, 'ssh_config')]
        r = dry_run(client, args, drytree)
        out = r.stdout + r.stderr
        if name in REFUSED:
            if r.returncode != 2 or 'qftfs:' not in r.stderr:
                bad.append('%s: expected a refusal (exit 2), got %d: %s'
                           % (args, r.returncode, out))
            continue
        if r.returncode != 1 or 'not a directory' not in out:
            bad.append('%s: not accepted (exit %d): %s'
                       % (args, r.returncode, out.strip()))
            continue
        if name not in EFFECTIVE and 'note: %s:' % name not in out:
            bad.append('%s: accepted silently (no note): %r' % (args, out))
    assert not bad, '\n'.join(bad)


SSH_OPTS = [
    # (option, what must appear: a note naming it, or nothing for mapped)
    ('ServerAliveInterval=15', None), ('ServerAliveCountMax=3', None),
    ('serveraliveinterval=15', None),     # ssh ignores keyword case
    ('Compression=yes', None), ('BatchMode=yes', None), ('Port=2222', None),
    ('User=pi', None), ('StrictHostKeyChecking=accept-new', None),
    ('UserKnownHostsFile=/dev/null', None),
    ('Ciphers=aes128-ctr', 'Ciphers'), ('ConnectTimeout=5', 'ConnectTimeout'),
    ('ControlMaster=auto', 'ControlMaster'), ('MACs=hmac-sha2-256', 'MACs'),
    ('TCPKeepAlive=yes', 'TCPKeepAlive'), ('LogLevel=ERROR', 'LogLevel'),
    ('PasswordAuthentication=no', 'PasswordAuthentication'),
    ('ssh_command=ssh -x', None), ('ProxyJump=bastion', None),
    ('CertificateFile=/k-cert.pub', None), ('max_conns=4', 'max_conns'),
    ('directport=1234', 'directport'), ('sshfs_sync', 'sshfs_sync'),
    ('delay_connect', 'delay_connect'), ('kernel_cache', 'kernel_cache'),
    # fstab words: addressed to mount(8) and systemd
    ('_netdev', None), ('nofail', None), ('noauto', None), ('user', None),
    ('users', None), ('x-systemd.automount', None), ('defaults', None),
    ('comment=x-gvfs-show', None),
]


@pytest.mark.parametrize('opt,note', SSH_OPTS, ids=[o for o, _ in SSH_OPTS])
def test_ssh_and_fstab_options(build, drytree, opt, note):
    r = dry_run(_client(build), ['-o', opt], drytree, remote=True)
    assert r.returncode == 1 and 'not a directory' in r.stderr, \
        (opt, r.returncode, r.stderr)
    if note:
        notes = [ln for ln in r.stderr.splitlines() if 'note:' in ln]
        assert len(notes) == 1 and note in notes[0], r.stderr
    else:
        assert 'note:' not in r.stderr, r.stderr


def test_ssh_options_on_a_local_source_noted(build, drytree):
    r = dry_run(_client(build), ['-p', '22', '-o', 'IdentityFile=/k',
                                 '-o', 'ProxyJump=j'], drytree)
    assert r.returncode == 1, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if 'note:' in ln]
    assert len(notes) == 1, r.stderr
    for word in ('port', 'IdentityFile', 'ProxyJump', 'local directory'):
        assert word in notes[0], notes


def test_note_once(build, drytree):
    """An option given twice is noted once."""
    r = dry_run(_client(build), ['-o', 'max_conns=2,max_conns=3',
                                 '-o', 'max_conns=4'], drytree)
    assert r.stderr.count('note: max_conns') == 1, r.stderr


@pytest.mark.parametrize('args,words', [
    (['-o', 'FooBar=1'], "unknown ssh option 'FooBar'"),
    (['-o', 'passive'], 'passive'),
    (['-1'], 'protocol 1'),
    (['-o', 'ssh_protocol=1'], 'protocol 2'),
    (['-o', 'to_code=ISO-8859-1'], 'UTF-8'),
    (['-o', 'ServerAliveInterval=soon'], 'ServerAliveInterval'),
    (['-o', 'compression=maybe'], 'compression'),
    (['-o', 'modules=zip'], "unknown module 'zip'"),
    (['-o', 'idmap=everyone'], 'idmap'),
    (['-o', 'umask=999'], 'umask'),
    (['-o', 'uid=alice'], 'uid'),
    (['-o', 'max_read=65536'], 'max_read'),
])
def test_refused_with_reason(build, drytree, args, words):
    r = dry_run(_client(build), args, drytree)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert words in r.stderr, r.stderr


def test_mapped_values(build, drytree):
    """The typical sshfs line's options reach the connection settings:
    ServerAliveInterval=15 and CountMax=3 are a keepalive of 15 s and a
    deadline of 45 s, -C is compress=auto, no_readahead turns read-ahead
    off, dir_cache=no the directory cache, BatchMode=yes prompts."""
    r = dry_run(_client(build), [
        '-d', '-C', '-o', 'reconnect,ServerAliveInterval=15',
        '-o', 'ServerAliveCountMax=3,no_readahead,dir_cache=no',
        '-o', 'BatchMode=yes'], drytree)
    # -d logs the settings just before the mount point is checked.
    assert r.returncode == 1, r.stderr
    line = [ln for ln in r.stderr.splitlines() if 'options:' in ln]
    assert line, r.stderr
    line = line[0]
    for want in ('timeout 45 s', 'keepalive 15 s', 'reconnect yes',
                 'compress auto', 'readahead 0', 'dircache 0', 'batch yes'):
        assert want in line, (want, line)
    r = dry_run(_client(build), ['-d', '-o', 'ServerAliveCountMax=2'],
                drytree)
    assert 'timeout 20 s' in r.stderr, r.stderr   # qftfs's 10 s probes


def test_help_lists_all_options(build):
    r = util.run([_client(build), '-h'], timeout=30)
    assert r.returncode == 0
    for word in ('allow_other', 'allow_root', 'default_permissions',
                 'auto_unmount', 'ro', 'noexec', 'fsname=', 'idmap=',
                 'uid=', 'umask=', 'reconnect', 'ServerAliveInterval',
                 'commit=', 'compress=', 'subdir='):
        assert word in r.stdout, word


# --- False successes: exit non-zero before going to the background ---


@pytest.mark.parametrize('case', ['max_read', 'regular_file', 'idmap_user',
                                  'missing_mnt', 'bad_uidfile'])
def test_false_success_cases(build, need_fuse, tmp_path, case):
    """Without -f, a mount that cannot work must make qftfs exit
    non-zero with the reason, and leave nothing mounted."""
    client = _client(build)
    src = tmp_path / 'src'
    src.mkdir()
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    opts = ['-o', 'server=' + util.server_bin(build)]
    if case == 'max_read':
        opts += ['-o', 'max_read=65536']
        words = 'max_read'
    elif case == 'regular_file':
        mnt = tmp_path / 'file'
        mnt.write_text('x')
        words = 'not a directory'
    elif case == 'missing_mnt':
        mnt = tmp_path / 'nowhere'
        words = 'nowhere'
    elif case == 'idmap_user':
        f = tmp_path / 'uids'
        f.write_text('no_such_user_qftfs:1000\n')
        opts += ['-o', 'idmap=file,uidfile=%s' % f]
        words = "unknown local user 'no_such_user_qftfs'"
    else:
        opts += ['-o', 'idmap=file,uidfile=%s' % (tmp_path / 'missing')]
        words = 'uidfile'
    r = util.run([client] + opts + [str(src), str(mnt)], timeout=60)
    try:
        assert r.returncode != 0, (case, r.stdout, r.stderr)
        assert words in r.stderr, r.stderr
        assert not util.mounts_under(str(tmp_path)), util.mounts_under(
            str(tmp_path))
    finally:
        for m in util.mounts_under(str(tmp_path)):
            subprocess.run(['fusermount3', '-uz', m['mountpoint']],
                           timeout=30)


# --- Owner and mode mapping on real mounts ---


def test_uid_gid_umask(mounter):
    m = mounter(opts=['uid=1234', 'gid=4321', 'umask=027'])
    src, mnt = m
    with open(P(src, 'f'), 'w') as f:
        f.write('x')
    os.chmod(P(src, 'f'), 0o600)
    st = os.stat(P(mnt, 'f'))
    assert (st.st_uid, st.st_gid) == (1234, 4321)
    assert st.st_mode & 0o7777 == 0o750
    # The server's own modes are untouched.
    assert os.stat(P(src, 'f')).st_mode & 0o7777 == 0o600


def test_idmap_file(mounter, need_root, tmp_path):
    """idmap=file: remote 65534 appears as root and chown to root
    becomes chown to 65534 on the server; an unmapped id shows as nobody
    and chown to it is refused (nomap=error)."""
    uids = tmp_path / 'uids'
    uids.write_text('# local:remote\nroot:65534\n')
    gids = tmp_path / 'gids'
    gids.write_text('root:65534\n')
    m = mounter(opts=['idmap=file', 'uidfile=%s' % uids,
                      'gidfile=%s' % gids])
    src, mnt = m
    with open(P(src, 'a'), 'w') as f:
        f.write('a')
    os.chown(P(src, 'a'), 65534, 65534)
    with open(P(src, 'b'), 'w') as f:
        f.write('b')
    os.chown(P(src, 'b'), 4242, 4242)
    st = os.stat(P(mnt, 'a'))
    assert (st.st_uid, st.st_gid) == (0, 0)
    st = os.stat(P(mnt, 'b'))
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    os.chown(P(mnt, 'b'), 0, 0)
    st = os.stat(P(src, 'b'))
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    util.expect_errno(1, os.chown, P(mnt, 'a'), 4242, -1)   # EPERM


def test_idmap_user(mounter, need_root, wtmp):
    """idmap=user with the server running as another user (nobody):
    what it owns appears as the mounting user (root), and chown to root
    through the mount becomes chown to that user on the server."""
    if not shutil.which('setpriv'):
        pytest.skip('setpriv is not installed')
    src = P(wtmp, 'src')
    os.mkdir(src)
    os.chmod(src, 0o777)
    m = mounter(src=src, mnt=P(wtmp, 'mnt'), opts=['idmap=user'],
                server_wrapper='setpriv --reuid=65534 --regid=65534 '
                               '--clear-groups')
    _, mnt = m
    with open(P(mnt, 'new'), 'w') as f:
        f.write('n')
    st = os.stat(P(src, 'new'))
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    st = os.stat(P(mnt, 'new'))
    assert (st.st_uid, st.st_gid) == (0, 0), (st.st_uid, st.st_gid)
    # Other owners stay as they are.
    with open(P(src, 'rootfile'), 'w') as f:
        f.write('r')
    st = os.stat(P(mnt, 'rootfile'))
    assert st.st_uid == 0    # root on the server is root here too
    os.chown(P(mnt, 'new'), 0, 0)   # a no-op for the server's user
    st = os.stat(P(src, 'new'))
    assert (st.st_uid, st.st_gid) == (65534, 65534)


def test_subdir(mounter, tmp_path):
    src = tmp_path / 'src'
    (src / 'a' / 'b').mkdir(parents=True)
    (src / 'a' / 'b' / 'f').write_text('deep')
    m = mounter(src=str(src), opts=['subdir=a/b'])
    assert os.listdir(m.mnt) == ['f']


def test_man_page_lists_every_sshfs_option():
    """qftfs(1)'s SSHFS COMPATIBILITY table names each option of the
    installed sshfs's help."""
    text = open(P(util.REPO, 'docs', 'qftfs.1')).read()
    sec = text[text.index('.SH "SSHFS COMPATIBILITY"'):
               text.index('.SH', text.index('.SH "SSHFS COMPATIBILITY"') + 4)]
    for esc in ('\\-', '\\fB', '\\fP', '\\fI', '\\fR'):
        sec = sec.replace(esc, '-' if esc == '\\-' else '')
    missing = [n for n, _ in sshfs_options(sshfs_help())
               if not re.search(r'(?<![\w-])%s(?!\w)' % re.escape(n), sec)]
    assert not missing, 'not in the man page table: %s' % missing
