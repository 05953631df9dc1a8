# SPDX-License-Identifier: MIT
"""The self-contained servers for the boards (issue 11): built by
scripts/cross-server.sh, run under qemu-user behind real ssh mounts.

1. Each of aarch64, armhf, armel and x86_64 builds; `file` and the ELF
   header say the right class, machine and float ABI, statically linked;
   the armel build's own code targets ARMv5TE (it must run on the ARMv6 of
   a Raspberry Pi Zero).
2. Each ARM server, run by qemu-user with a CPU of its boards (Cortex-A53,
   Cortex-A7, ARM1176) as the remote command of the loopback sshd, serves a
   mount: a tree and a 16 MiB file copied onto it and off it compare byte
   for byte, and no server process is left after the unmount.  qemu-user
   implements neither io_uring nor (7.2) openat2, so these mounts also run
   the server's fallbacks, each said once in the log.

Skips loudly, with the reason, when the toolchain cannot be installed
(cross-server.sh exit 77), or sshd, qemu-user or FUSE is missing.
"""

import os
import struct

import pytest

import test_ssh
import util

P = os.path.join
MiB = 1024 * 1024

# e_machine, ELF class, float ABI bits of e_flags (ARM only), `file` words.
ELF = {
    'aarch64': (183, 2, None, ('ELF 64-bit LSB executable', 'ARM aarch64')),
    'armhf': (40, 1, 0x400, ('ELF 32-bit LSB executable', 'ARM, EABI5')),
    'armel': (40, 1, 0x200, ('ELF 32-bit LSB executable', 'ARM, EABI5')),
    'x86_64': (62, 2, None, ('ELF 64-bit LSB executable', 'x86-64')),
}
EF_ARM_ABI_FLOAT = 0x600


def built(arch):
    path, why = util.cross_server(arch)
    if why:
        pytest.skip('cross build for %s SKIPPED: %s' % (arch, why))
    return path


# The loopback OpenSSH server of the ssh tests, one for this module.
sshd = test_ssh.sshd


def program_header_types(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data[4] == 2:
        phoff, = struct.unpack_from('<Q', data, 32)
        phentsize, phnum = struct.unpack_from('<HH', data, 54)
    else:
        phoff, = struct.unpack_from('<I', data, 28)
        phentsize, phnum = struct.unpack_from('<HH', data, 42)
    return [struct.unpack_from('<I', data, phoff + i * phentsize)[0]
            for i in range(phnum)]


@pytest.mark.deadline(1800)
@pytest.mark.parametrize('arch', util.CROSS_ARCHES)
def test_elf(arch):
    path = built(arch)
    machine, klass, abi, words = ELF[arch]
    out = util.run(['file', '-b', path], timeout=60, check=True).stdout
    for w in words + ('statically linked',):
        assert w in out, '%s: `file` says %r, expected %r' % (path, out, w)
    with open(path, 'rb') as f:
        hdr = f.read(64)
    assert hdr[:4] == b'\x7fELF'
    assert hdr[4] == klass and hdr[5] == 1, 'class/endianness %r' % hdr[4:6]
    assert struct.unpack_from('<H', hdr, 18)[0] == machine
    if abi is not None:
        flags = struct.unpack_from('<I', hdr, 36)[0]
        assert flags & EF_ARM_ABI_FLOAT == abi, 'e_flags %#x' % flags
    # No PT_INTERP: nothing on the board is needed to start it.
    assert 3 not in program_header_types(path), 'dynamically linked'
    sha = P(os.path.dirname(path), 'qftfs-server.sha256')
    assert open(sha).read().split()[0] == util.sha256_file(path)


@pytest.mark.deadline(1800)
def test_armel_code_is_armv5te():
    """armel must run on ARMv6 (Pi Zero): our objects are ARMv5TE code
    (libcrypto's ARMv7 routines are chosen at run time, by CPU probe)."""
    built('armel')
    readelf = 'arm-linux-gnueabi-readelf'
    objs = P(util.cross_out(), 'armel', 'server', 'qftfs-server.p')
    main_o = P(objs, 'main.c.o')
    if not os.path.exists(main_o):
        pytest.fail('%s is missing' % main_o, pytrace=False)
    out = util.run([readelf, '-A', main_o], timeout=60, check=True).stdout
    assert 'Tag_CPU_arch: v5TE' in out, out


def make_tree(root, seed):
    """A small tree of files and directories, with an empty file, a
    symlink and a 16 MiB file."""
    os.makedirs(P(root, 'a', 'b', 'c'))
    for i in range(40):
        d = P(root, 'a', 'b') if i % 3 else P(root, 'a')
        util.write_random_file(P(d, 'f%02d' % i), 1 + i * 997, seed=seed + i)
    open(P(root, 'a', 'b', 'c', 'empty'), 'w').close()
    os.symlink('b/f01', P(root, 'a', 'link'))
    util.write_random_file(P(root, 'big'), 16 * MiB, seed=seed + 100)


def same_tree(a, b):
    util.run(['diff', '-r', '--no-dereference', a, b], timeout=300,
             check=True)


@pytest.mark.deadline(1800)
@pytest.mark.parametrize('arch', ['aarch64', 'armhf', 'armel'])
def test_qemu_mount(arch, sshd, mounter, tmp_path):
    path = built(arch)
    qemu = util.qemu_command(arch)
    if qemu is None:
        pytest.skip('%s is missing (install qemu-user-static): qemu mount '
                    'SKIPPED' % util.CROSS_QEMU[arch][0])
    served = str(tmp_path / 'served')
    os.makedirs(served)
    home = sshd.client_home(str(tmp_path / 'home'))
    # --io=auto: io_uring where the "kernel" (qemu-user) has it, which it
    # does not, so the fallback is what runs.
    server = ' '.join(qemu + [path, '--io=auto'])
    m = mounter(src=sshd.source(served), mnt=str(tmp_path / 'mnt'),
                server=server, env=sshd.client_env(home),
                extra_args=['-p', str(sshd.port)])

    # Onto the mount.
    up = str(tmp_path / 'up')
    make_tree(up, 1)
    util.run(['cp', '-a', up, P(m.mnt, 'up')], timeout=600, check=True)
    same_tree(up, P(served, 'up'))
    # Off it: a tree made on the board's side, read through the mount.
    make_tree(P(served, 'down'), 2)
    util.run(['cp', '-a', P(m.mnt, 'down'), str(tmp_path / 'down')],
             timeout=600, check=True)
    same_tree(P(served, 'down'), str(tmp_path / 'down'))
    assert (util.sha256_file(P(served, 'up', 'big')) ==
            util.sha256_file(P(up, 'big')))
    problems = m.stop()
    assert not problems, '\n'.join(problems)
    log = m.log()
    # What the emulated "kernel" lacks is said, once each.
    assert log.count('io_uring unavailable') == 1, util.tail(log)
    assert log.count('openat2 unavailable') <= 1, util.tail(log)
    left = [p for p in util.find_processes('--root ' + served)]
    assert not left, 'server left running: %s' % left


@pytest.mark.deadline(900)
@pytest.mark.parametrize('which', ['static-x86_64', 'build-tree'])
def test_old_kernel(which, mounter, tmp_path):
    """The server on a kernel without statx, io_uring, openat2, clone3,
    close_range and everything else after Linux 4.10 (a seccomp filter
    answers them ENOSYS: tests/tools/qftfs-oldkernel.c): it falls back,
    says so once each, and serves a mount byte for byte."""
    if os.uname().machine != 'x86_64':
        pytest.skip('qftfs-oldkernel filters x86_64 system call numbers')
    if which == 'static-x86_64':
        server = built('x86_64')
    else:
        server = util.server_bin(util.build_dir())
    wrapper = P(util.build_dir(), 'tests', 'tools', 'qftfs-oldkernel')
    r = util.run([wrapper, server, '--version'], timeout=60)
    if r.returncode == 77:
        pytest.skip('seccomp unavailable: ' + r.stderr.strip())
    assert r.returncode == 0, r.stderr
    m = mounter(server=server + ' --io=auto', server_wrapper=wrapper)
    src, mnt = m
    up = str(tmp_path / 'up')
    make_tree(up, 3)
    util.run(['cp', '-a', up, P(mnt, 'up')], timeout=600, check=True)
    same_tree(up, P(src, 'up'))
    make_tree(P(src, 'down'), 4)
    util.run(['cp', '-a', P(mnt, 'down'), str(tmp_path / 'down')],
             timeout=600, check=True)
    same_tree(P(src, 'down'), str(tmp_path / 'down'))
    os.rename(P(mnt, 'up', 'big'), P(mnt, 'up', 'big2'))
    assert os.path.exists(P(src, 'up', 'big2'))
    problems = m.stop()
    assert not problems, '\n'.join(problems)
    log = m.log()
    assert log.count('openat2 unavailable (Function not implemented)') == 1, \
        util.tail(log)
    assert log.count('io_uring unavailable (Function not implemented)') == 1, \
        util.tail(log)
