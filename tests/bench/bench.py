#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The qftfs benchmark harness.  Run it through tests/bench/run.sh (which
checks for root and installs the chart package); docs/benchmarks.md says
what every figure means and how it is measured.

For every link in --links the harness brings up a two-host lab (client =
this namespace, server = a network namespace behind an emulated link),
measures the link with iperf3, then for every data set, tool and direction
copies the data cold (caches dropped, fresh mount) and warm (second pass),
checks every copy against the source, and writes results.json,
results.md and chart.png under tests/bench/results/<timestamp>/.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import report  # noqa: E402  (beside this file)

MiB = 1 << 20
GiB = 1 << 30

# name: (round trip ms, rate Mbit/s; 0 = unlimited)
LINKS = {
    "veth": (0, 0),
    "1g-1ms": (1, 1000),
    "100m-2ms": (2, 100),
    "100m-40ms": (40, 100),
    "50m-100ms": (100, 50),
    # the loss column (issue 21): each way, this per cent of packets is
    # dropped (LINK_LOSS), and both hosts' default congestion control is
    # cubic for the run (LOSS_CC), as on Debian, Ubuntu and Raspberry Pi OS
    "100m-40ms-1%": (40, 100),
    "100m-40ms-0.1%": (40, 100),
    "1g-10ms-0.1%": (10, 1000),
    # ... and its clean reference: cubic on both hosts, nothing dropped
    # (what striping costs where it is not needed)
    "100m-40ms-cubic": (40, 100),
}
LINK_LOSS = {"100m-40ms-1%": 1, "100m-40ms-0.1%": 0.1, "1g-10ms-0.1%": 0.1}
LOSS_CC = "cubic"
CUBIC_LINKS = set(LINK_LOSS) | {"100m-40ms-cubic"}
DATA = ["big", "json", "tree", "bigtree", "repo"]
PASSES = ["cold", "warm"]
DIRECTIONS = ["up", "down"]
# What is done with a data set.  copy-up / copy-down: every tool copies it
# onto / off the server (cp [-r] through a mount, scp [-r], rsync [-a] -e
# ssh); the others exist for trees only and for the mount tools only:
# rsync-up = `rsync -a SRC/ MNT/DST/`, tar-x = `tar x` of a tarball of the
# tree onto the mount, find / du = `find` / `du -s` of the server's copy
# of the tree through the mount.  Reading the server's copy of a tree off
# the mount (walk-ahead, docs/benchmarks.md): rsync-down = `rsync -a
# MNT/SRC/ DST/`, tar-c = `tar cf - SRC | wc -c`, grep-r = `grep -r -l
# '#include' SRC`; copy-down of a tree is `cp -r` off the mount.  In a
# clone of a real repository on the server, through the mount: git-status
# = `git status --porcelain`, git-log-p = `git log -p -20 | wc -c`.
WORKLOADS = ["copy-up", "copy-down", "rsync-up", "tar-x", "find", "du", "randread",
             "rsync-down", "tar-c", "grep-r", "git-status", "git-log-p"]
WORKLOAD_DIRECTION = {"copy-up": "up", "copy-down": "down", "rsync-up": "up",
                      "tar-x": "up", "find": "down", "du": "down", "randread": "down",
                      "rsync-down": "down", "tar-c": "down", "grep-r": "down",
                      "git-status": "down", "git-log-p": "down"}
# randread: 4 KiB reads at random offsets of the big file through the
# mount, one at a time, for this long (randread.py: fio's randread at
# iodepth 1, every block checked); cold pass only
RANDREAD_SECONDS = 20
# which workloads each data set gets (bigtree's copy-up only on an
# unlimited link: see plan_workloads)
DATA_WORKLOADS = {"big": ["copy-up", "copy-down", "randread"],
                  "json": ["copy-up", "copy-down"],
                  "tree": ["copy-up", "copy-down", "rsync-up", "tar-x",
                           "rsync-down", "tar-c", "grep-r"],
                  "bigtree": ["copy-up", "find", "du", "copy-down", "tar-c",
                              "rsync-down", "grep-r"],
                  "repo": ["git-status", "git-log-p"]}
# the two tree data sets: a small-files tree and a big one (scans, and the
# copy on an unlimited link)
TREE_SOURCES = {"tree": "/usr/include/openssl", "bigtree": "/usr/include"}
# ... and the repository: a clone of this one (its history, sources, docs)
GIT = ["git", "-c", "safe.directory=*"]
# "qftfs" expands to every variant the binaries support (probed, see
# probe_qftfs); a variant can also be named on its own.
# qftfs-lz4-auto (-o compress=auto) is named on its own: it answers whether
# auto costs nothing on the big random file and still gains on json.
# qftfs-buffered (the server with --direct=off: the page cache path that
# direct I/O replaced) is named on its own too.
# qftfs-async (-o commit=async: close() returns once the data is queued)
# runs the workloads that write (copy-up, rsync-up, tar-x); while the client
# refuses the option its records say "not available: <the client's message>".
QFTFS_VARIANTS = ["qftfs", "qftfs-cipher-none", "qftfs-lz4", "qftfs-uring",
                  "qftfs-chacha20", "qftfs-lz4-auto", "qftfs-async",
                  "qftfs-buffered", "qftfs-system-cc", "qftfs-system-cc-1",
                  "qftfs-system-cc-8"]
QFTFS_DEFAULT_VARIANTS = ["qftfs", "qftfs-cipher-none", "qftfs-lz4", "qftfs-uring",
                          "qftfs-async"]
# the variants that run the tree workloads (the others are about bulk data)
TREE_VARIANTS = ["qftfs", "qftfs-async"]
TOOLS = ["iperf3", "sshfs", "scp", "rsync", "qftfs"]
# --profile: the tools whose big-file copies get a "prof" pass (perf
# record of the whole machine during the copy; see Profiler)
PROFILE_TOOLS = ["qftfs", "sshfs"]
SSH_CIPHER = "aes128-gcm@openssh.com"
IPERF_SECONDS = 10


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


LOGF = None


def log(msg):
    line = f"bench: {msg}"
    print(line, flush=True)
    if LOGF:
        LOGF.write(f"{time.strftime('%H:%M:%S')} {line}\n")
        LOGF.flush()


def sh(argv, timeout=120, check=True, **kw):
    """Runs a helper command (not a measured one); returns CompletedProcess."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: exit {r.returncode}: "
                           f"{r.stderr.strip()[-500:]}")
    return r


# --- cgroups: CPU seconds of a whole process tree, including processes
# that already exited (sshd session children, scp's ssh, ...) -------------

def cgroup_root():
    """(kind, path) of the hierarchy used for CPU accounting: a cgroup2
    mount (cpu.stat is there without any controller), else a v1 cpuacct
    one; (None, None) if neither can be used."""
    v2 = v1 = None
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype, opts = line.split()[:4]
            if fstype == "cgroup2" and not v2:
                v2 = mnt
            elif fstype == "cgroup" and "cpuacct" in opts.split(",") and not v1:
                v1 = mnt
    for kind, root in (("v2", v2), ("v1", v1)):
        if not root:
            continue
        probe = os.path.join(root, f"qftfs-bench-probe-{os.getpid()}")
        try:
            os.mkdir(probe)
            os.rmdir(probe)
            return kind, root
        except OSError:
            continue
    return None, None


class CGroup:
    def __init__(self, kind, root, name):
        self.kind, self.root = kind, root
        self.path = os.path.join(root, name) if root else None
        if self.path:
            os.makedirs(self.path, exist_ok=True)

    def procs(self):
        if not self.path:
            return []
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def add(self, pid):
        if self.path:
            try:
                with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            except OSError:
                pass  # already gone

    def enter(self):
        """For preexec_fn: the child joins before it execs."""
        self.add(os.getpid())

    def cpu_s(self):
        if not self.path:
            return None
        try:
            if self.kind == "v2":
                with open(os.path.join(self.path, "cpu.stat")) as f:
                    for line in f:
                        k, v = line.split()
                        if k == "usage_usec":
                            return int(v) / 1e6
            else:
                with open(os.path.join(self.path, "cpuacct.usage")) as f:
                    return int(f.read()) / 1e9
        except OSError:
            return None
        return None

    def kill(self):
        if not self.path:
            return
        killf = os.path.join(self.path, "cgroup.kill")
        if os.path.exists(killf):
            try:
                with open(killf, "w") as f:
                    f.write("1")
            except OSError:
                pass
        for pid in self.procs():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def wait_empty(self, timeout, ignore=()):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not [p for p in self.procs() if p not in ignore]:
                return True
            time.sleep(0.05)
        return False

    def remove(self):
        if not self.path:
            return
        # processes we adopted (an external lab's sshd) go back to the root
        for pid in self.procs():
            try:
                with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            except OSError:
                pass
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


def read_hwm(pid):
    """(comm, VmHWM in KiB) of a process, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            comm, hwm = None, None
            for line in f:
                if line.startswith("Name:"):
                    comm = line.split(None, 1)[1].strip()
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                    break
            return (comm, hwm) if hwm is not None else None
    except OSError:
        return None


def machine_cpu_s():
    """Busy CPU seconds of the whole machine so far (every CPU, every
    process, interrupts included): /proc/stat's cpu line without idle and
    iowait.  Other users of the machine are in it too."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal (guest is in user)
    busy = sum(v[:8]) - v[3] - v[4]
    return busy / os.sysconf("SC_CLK_TCK")


def procs_cpu_s(pids):
    """CPU seconds (user+system, all threads) the processes used so far."""
    tck, total = os.sysconf("SC_CLK_TCK"), 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            pass
    return total / tck


class RssSampler(threading.Thread):
    """Samples VmHWM of every process in some cgroups every 100 ms, so that
    processes which exit during a run are still counted at their peak.
    reset() also clears the kernel's own high-water marks (clear_refs 5),
    so a long-lived daemon reports the peak of this pass, not of its life."""

    def __init__(self, groups, exclude):
        super().__init__(daemon=True)
        self.groups, self.exclude = groups, exclude
        self.lock = threading.Lock()
        self.peak = {name: {} for name in groups}
        self.stopping = False

    def sample(self):
        for name, cg in self.groups.items():
            for pid in cg.procs():
                if pid in self.exclude:
                    continue
                r = read_hwm(pid)
                if not r:
                    continue
                with self.lock:
                    old = self.peak[name].get(pid)
                    if not old or r[1] > old[1]:
                        self.peak[name][pid] = r

    def run(self):
        while not self.stopping:
            self.sample()
            time.sleep(0.1)

    def reset(self):
        for cg in self.groups.values():
            for pid in cg.procs():
                if pid in self.exclude:
                    continue
                try:
                    with open(f"/proc/{pid}/clear_refs", "w") as f:
                        f.write("5")
                except OSError:
                    pass
        with self.lock:
            self.peak = {name: {} for name in self.groups}

    def result(self, name):
        """(sum of per-process peaks in KiB, [{comm, hwm_kib}])"""
        self.sample()
        with self.lock:
            procs = sorted(self.peak[name].values(), key=lambda r: -r[1])
        if not procs:
            return None, []
        return (sum(r[1] for r in procs),
                [{"comm": c, "hwm_kib": h} for c, h in procs])


# --- the lab ----------------------------------------------------------------

def netem_available():
    r = subprocess.run(["bash", os.path.join(HERE, "netem-link.sh"), "probe"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


class Lab:
    """A link emulator with the interface `CMD up RTT_MS RATE_MBIT` / `CMD
    down`; after `up`, root logs in by key to HOST:PORT, which lives in
    network namespace NETNS and shares this machine's file systems."""

    def __init__(self, backend):
        self.backend = backend
        if backend == "netem":
            state = os.environ.get("QFTFS_BENCH_STATE", "/run/qftfs-bench-netem")
            os.environ["QFTFS_BENCH_STATE"] = state
            self.cmd = ["bash", os.path.join(HERE, "netem-link.sh")]
            self.netns, self.host, self.port = "qftbench", "10.78.0.2", 22
            self.identity = os.path.join(state, "id_ed25519")
        else:
            self.cmd = shlex.split(os.environ["QFTFS_BENCH_LINK_CMD"])
            self.netns = os.environ.get("QFTFS_BENCH_NETNS", "qa")
            self.host = os.environ.get("QFTFS_BENCH_HOST", "10.77.0.2")
            self.port = int(os.environ.get("QFTFS_BENCH_SSH_PORT", "22"))
            self.identity = os.environ.get(
                "QFTFS_BENCH_IDENTITY",
                os.path.expanduser("~root/.ssh/id_ed25519"))
        # where an external emulator runs its forwarding process (netlab.sh:
        # linkem in netns "emu"); netem is the kernel's, charged to whoever
        # sends
        self.emu_netns = (None if backend == "netem" else
                          os.environ.get("QFTFS_BENCH_EMU_NETNS", "emu") or None)
        self.is_up = False

    def up(self, rtt, rate, loss=0, cc=None):
        """With `loss`, that per cent of packets dropped each way; with
        `cc`, both hosts' default TCP congestion control set to it until
        down() (the client's for the machine, the server's namespace's
        once made), and the machine's allowed list put back after."""
        argv = self.cmd + ["up", str(rtt), str(rate)] + ([f"{loss:g}"] if loss else [])
        log(f"link up: {shlex.join(argv)}")
        self.is_up = True
        if cc:
            self.saved_cc = (read_sysctl("tcp_congestion_control"),
                             read_sysctl("tcp_allowed_congestion_control"))
            # the machine's first: that also allows it in other namespaces
            sh(["sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}"])
        sh(argv, timeout=180)
        if cc:
            sh(["ip", "netns", "exec", self.netns, "sysctl", "-q", "-w",
                f"net.ipv4.tcp_congestion_control={cc}"])
            log(f"default congestion control {cc} on both hosts")

    def down(self):
        if self.is_up:
            log(f"link down: {shlex.join(self.cmd)} down")
            sh(self.cmd + ["down"], timeout=60, check=False)
            self.is_up = False
        if getattr(self, "saved_cc", None):
            cc, allowed = self.saved_cc
            sh(["sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}"], check=False)
            sh(["sysctl", "-q", "-w", f"net.ipv4.tcp_allowed_congestion_control={allowed}"],
               check=False)
            log(f"default congestion control {cc} again (allowed: {allowed})")
            self.saved_cc = None

    def netns_pids(self, netns=None):
        r = sh(["ip", "netns", "pids", netns or self.netns], check=False)
        return [int(x) for x in r.stdout.split()]

    def emu_pids(self):
        return self.netns_pids(self.emu_netns) if self.emu_netns else []


# --- data -------------------------------------------------------------------

def sha256_file(path):
    r = sh(["sha256sum", path], timeout=1800)
    return r.stdout.split()[0]


def tree_stats(path):
    """(regular files, their bytes, directories including the top one)"""
    files = nbytes = dirs = 0
    for dirpath, _dirs, names in os.walk(path):
        dirs += 1
        for n in names:
            p = os.path.join(dirpath, n)
            if os.path.isfile(p) and not os.path.islink(p):
                files += 1
                nbytes += os.path.getsize(p)
    return files, nbytes, dirs


def source_entries(src):
    """Entries under a tree's source (not following links): the cached
    copy is stale when this changes (a package installed headers, say)."""
    return sum(len(dirs) + len(names) for _p, dirs, names in os.walk(src))


def read_sysctl(name):
    with open("/proc/sys/net/ipv4/" + name) as f:
        return f.read().strip()


def prepare_data(work, which, quick, big_mib=None):
    """Creates (or reuses) the source data under WORK/data and returns
    {name: {path, name, kind, bytes, files, sha256, origin}} (trees: also
    dirs, and for "tree" the tarball `tar` for the tar-x workload)."""
    ddir = os.path.join(work, "data")
    os.makedirs(ddir, exist_ok=True)
    out = {}
    for d in which:
        if d == "big":
            size = big_mib * MiB if big_mib else 256 * MiB if quick else GiB
            name = f"big-{size // MiB}M"
            origin = f"/dev/urandom, {size} bytes"
        elif d == "json":
            size = 128 * MiB if quick else 512 * MiB
            name = f"json-{size // MiB}M.json"
            origin = f"tests/bench/gen_json.py {size} (deterministic)"
        elif d == "repo":
            src = None
            name = "repo-qftfs"
            origin = f"git clone {REPO}"
        else:
            src = TREE_SOURCES[d]
            name = f"{d}-" + os.path.basename(src)
            origin = f"cp -rL {src} (symlinks dereferenced)"
        path = os.path.join(ddir, name)
        meta = path + ".meta.json"
        if os.path.exists(meta) and os.path.exists(path):
            with open(meta) as f:
                out[d] = json.load(f)
            out[d]["set"] = d
            stale = None
            if out[d].get("tar") and not os.path.exists(out[d]["tar"]):
                stale = "its tarball is missing"
            elif out[d].get("source_entries") is not None:
                now = source_entries(TREE_SOURCES[d])
                if now != out[d]["source_entries"]:
                    stale = (f"{TREE_SOURCES[d]} has {now} entries now, "
                             f"{out[d]['source_entries']} when it was copied")
            if not stale:
                continue
            log(f"data {name}: {stale}; copying it again")
        log(f"preparing data {name} ({origin})")
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)
        if d == "big":
            sh(["dd", "if=/dev/urandom", f"of={path}", "bs=1M",
                f"count={size // MiB}", "status=none"], timeout=1800)
        elif d == "json":
            sh([sys.executable, os.path.join(HERE, "gen_json.py"), str(size), path],
               timeout=1800)
        elif d == "repo":
            sh(GIT + ["clone", "-q", "--no-hardlinks", REPO, path], timeout=1800)
        else:
            # dangling links fail to copy: not part of the data set.  Under
            # umask 022 so that modes are the same on every machine.
            old = os.umask(0o022)
            try:
                sh(["cp", "-rL", src, path], timeout=1800, check=False)
            finally:
                os.umask(old)
        rec = {"name": name, "path": path, "kind": "file" if d in ("big", "json") else "tree",
               "origin": origin, "set": d}
        if rec["kind"] == "tree":
            rec["files"], rec["bytes"], rec["dirs"] = tree_stats(path)
            rec["source_entries"] = source_entries(src) if src else None
            rec["sha256"] = None
            if d == "tree":
                # the tarball for tar-x: sorted, numeric owners, the tree's
                # own modes and mtimes (tar x restores them)
                tar = path + ".tar"
                sh(["tar", "--sort=name", "--numeric-owner", "--format=gnu", "-cf", tar,
                    "-C", ddir, name], timeout=1800)
                rec["tar"] = tar
                rec["origin"] += f"; tar-x unpacks {os.path.basename(tar)} (tar --sort=name -c)"
        else:
            rec["files"], rec["bytes"] = 1, os.path.getsize(path)
            rec["sha256"] = sha256_file(path)
        with open(meta, "w") as f:
            json.dump(rec, f)
        out[d] = rec
    return out


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def tree_manifest(root, contents=True):
    """{relative path: (type, mode bits, size, mtime s, sha256 or link
    target)} of a tree, the top directory as "."."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        for n in ["."] + dirs + names if dirpath == root else dirs + names:
            p = os.path.normpath(os.path.join(dirpath, n))
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            mode = st.st_mode & 0o7777
            if os.path.islink(p):
                out[rel] = ("link", mode, None, None, os.readlink(p))
            elif os.path.isdir(p):
                out.setdefault(rel, ("dir", mode, None, None, None))
            else:
                out[rel] = ("file", mode, st.st_size, int(st.st_mtime),
                            file_sha256(p) if contents else None)
    return out


def compare_trees(src, copy, mtimes):
    """Differences between two manifests: names, types, sizes, contents,
    modes, and (if mtimes) the modification times of files, in seconds."""
    diffs = []
    for rel in sorted(set(src) - set(copy)):
        diffs.append(f"missing: {rel}")
    for rel in sorted(set(copy) - set(src)):
        diffs.append(f"extra: {rel}")
    for rel in sorted(set(src) & set(copy)):
        a, b = src[rel], copy[rel]
        if a[0] != b[0]:
            diffs.append(f"{rel}: {b[0]}, expected {a[0]}")
            continue
        if a[2] != b[2]:
            diffs.append(f"{rel}: size {b[2]}, expected {a[2]}")
        elif a[4] != b[4]:
            diffs.append(f"{rel}: contents differ")
        if a[1] != b[1]:
            diffs.append(f"{rel}: mode {b[1]:o}, expected {a[1]:o}")
        if mtimes and a[0] == "file" and a[3] != b[3]:
            diffs.append(f"{rel}: mtime {b[3]}, expected {a[3]}")
    return diffs


def drop_caches():
    # the server namespace shares this kernel: one drop serves both sides
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def rm_rf(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def source_manifest(data):
    if "_manifest" not in data:
        data["_manifest"] = tree_manifest(data["path"])
    return data["_manifest"]


def verify(data, copy, mtimes=False):
    """Compares a copy with its source: (ok, details).  A tree: names,
    types, sizes, contents (sha256), modes, and with mtimes the files'
    modification times (whole seconds: sshfs sets no finer ones)."""
    if not os.path.lexists(copy):
        return False, {"method": "exists", "error": f"{copy} missing"}
    if data["kind"] == "file":
        got = sha256_file(copy)
        return got == data["sha256"], {"method": "sha256", "expected": data["sha256"],
                                       "got": got}
    try:
        diffs = compare_trees(source_manifest(data), tree_manifest(copy), mtimes)
    except OSError as e:
        return False, {"method": "tree", "error": str(e)}
    what = "names, types, sizes, sha256, modes" + (", mtimes" if mtimes else "")
    return not diffs, {"method": f"tree ({what})", "differences": len(diffs),
                       "first": diffs[:5]}


def randread_result(out_path):
    """What randread.py printed (None when it printed nothing usable)."""
    try:
        with open(out_path, errors="replace") as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def verify_scan(data, workload, out_path, mnt_root):
    """find: the names it printed are the tree's; du: it printed a size;
    randread: every block it read was the file's."""
    if workload == "randread":
        got = randread_result(out_path)
        ok = bool(got) and got.get("reads", 0) > 0 and got.get("mismatches") == 0
        return ok, {"method": "randread: each 4 KiB block against the local copy",
                    "result": got}
    try:
        with open(out_path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return False, {"method": workload, "error": str(e)}
    if workload in ("git-status", "git-log-p"):
        # what the same command prints in the local clone
        args = ["status", "--porcelain"] if workload == "git-status" else \
            ["log", "-p", "-20"]
        want = subprocess.run(GIT + ["-C", data["path"]] + args, check=True,
                              stdout=subprocess.PIPE, timeout=300).stdout
        want = want.decode(errors="replace").splitlines() \
            if workload == "git-status" else [str(len(want))]
        got = [x.strip() for x in lines] if workload == "git-log-p" else lines
        return got == want, {"method": f"{workload}: the same as in the local clone",
                             "lines": len(got), "first": got[:3]}
    if workload == "tar-c":
        m = re.match(r"^(\d+)$", lines[0].strip()) if lines else None
        n = int(m.group(1)) if m else 0
        return n >= data["bytes"], {"method": "tar c | wc -c: at least the tree's bytes",
                                    "bytes": n, "tree_bytes": data["bytes"]}
    if workload == "grep-r":
        got = {os.path.normpath(os.path.relpath(x, mnt_root)) for x in lines}
        want = set(source_manifest(data))
        return bool(got) and got <= want, {
            "method": "grep -r -l: printed names are files of the tree",
            "files": len(got)}
    if workload == "find":
        got = {os.path.normpath(os.path.relpath(x, mnt_root)) for x in lines}
        want = set(source_manifest(data))
        missing, extra = sorted(want - got), sorted(got - want)
        return not missing and not extra, {
            "method": "find: printed names against the tree's", "names": len(got),
            "missing": len(missing), "extra": len(extra),
            "first": [f"missing: {x}" for x in missing[:3]] + [f"extra: {x}" for x in extra[:3]]}
    m = re.match(r"^(\d+)\s", lines[0]) if lines else None
    return bool(m), {"method": "du: printed a size", "output": lines[:1],
                     "kib": int(m.group(1)) if m else None}


# --- tools ------------------------------------------------------------------

def probe_mount_option(client, work, opt):
    """Mounts an empty local directory with -o OPT and unmounts it: None if
    the client accepts the option, else what it said."""
    base = os.path.join(work, "probe")
    src, mnt = os.path.join(base, "src"), os.path.join(base, "mnt")
    os.makedirs(src, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    try:
        r = sh([client, "-o", opt, src, mnt], timeout=30, check=False)
    except subprocess.TimeoutExpired:
        r = None
    mounted = is_mounted(mnt)
    if mounted:
        sh(["fusermount3", "-u", mnt], timeout=60, check=False)
        if is_mounted(mnt):
            sh(["fusermount3", "-uz", mnt], timeout=60, check=False)
    shutil.rmtree(base, ignore_errors=True)
    if r is not None and r.returncode == 0 and mounted:
        return None
    if r is None:
        return f"qftfs -o {opt}: no answer in 30 s"
    msg = " ".join((r.stderr + r.stdout).split())[-300:]
    return msg or f"qftfs -o {opt} exited {r.returncode} without a message"


def probe_qftfs(build):
    """Which qftfs variants these binaries accept: {variant: None or reason
    it is skipped}, plus (client, server) paths.  qftfs-async is probed
    apart, by a test mount (probe_mount_option)."""
    client = os.path.join(build, "fuse", "qftfs")
    server = os.path.join(build, "server", "qftfs-server")
    res = {}
    if not (os.access(client, os.X_OK) and os.access(server, os.X_OK)):
        why = f"no binaries in {build} (build with: meson setup build && ninja -C build)"
        return {v: why for v in QFTFS_VARIANTS}, client, server
    chelp = sh([client, "-h"], check=False)
    chelp = chelp.stdout + chelp.stderr
    shelp = sh([server, "--help"], check=False)
    shelp = shelp.stdout + shelp.stderr
    res["qftfs"] = None
    res["qftfs-cipher-none"] = None if "cipher=" in chelp else "qftfs -h has no -o cipher="
    res["qftfs-chacha20"] = (None if "chacha20" in chelp
                             else "qftfs -h does not mention cipher=chacha20")
    res["qftfs-lz4"] = None if "compress=" in chelp else "qftfs -h has no -o compress="
    res["qftfs-lz4-auto"] = (None if "compress=none|lz4|auto" in chelp
                             else "qftfs -h has no -o compress=auto")
    res["qftfs-uring"] = (None if "--io" in shelp
                          else "qftfs-server --help has no --io=uring|posix")
    res["qftfs-async"] = None
    res["qftfs-buffered"] = (None if "--direct" in shelp
                             else "qftfs-server --help has no --direct=auto|off")
    res["qftfs-system-cc"] = (None if "congestion=" in chelp
                              else "qftfs -h has no -o congestion=")
    for n in ("1", "8"):
        res["qftfs-system-cc-" + n] = (None if "streams=" in chelp
                                       else "qftfs -h has no -o streams=")
    return res, client, server


class Ctx:
    """Everything a run needs: the lab, paths, cgroups, the sampler."""


def ssh_opts(ctx):
    return ["-o", f"Port={ctx.lab.port}", "-o", f"Ciphers={SSH_CIPHER}",
            "-o", f"IdentityFile={ctx.lab.identity}", "-o", "IdentitiesOnly=yes",
            "-o", f"UserKnownHostsFile={ctx.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"]


def remote(ctx, path):
    return f"root@{ctx.lab.host}:{path}"


def mount_argv(ctx, tool):
    target = remote(ctx, ctx.srv)
    if tool == "sshfs":
        opts = [o for o in ssh_opts(ctx) if o != "-o"]
        return ["sshfs", target, ctx.mnt, "-o", ",".join(opts)]
    server = ctx.qftfs_server
    opts = []
    if tool == "qftfs-uring":
        # pread/pwrite is the server's default (measured faster here);
        # this row keeps io_uring honest.
        server += " --io=uring"
    elif tool == "qftfs-buffered":
        # Direct I/O is the server's default where the file system has
        # it; this row is the page cache path it replaced.
        server += " --direct=off"
    opts.append(f"server={server}")
    opts += [f"IdentityFile={ctx.lab.identity}",
             f"UserKnownHostsFile={ctx.known_hosts}", "StrictHostKeyChecking=yes"]
    if tool == "qftfs-cipher-none":
        opts.append("cipher=none")
    elif tool == "qftfs-chacha20":
        opts.append("cipher=chacha20")
    elif tool == "qftfs-lz4":
        opts.append("compress=lz4")
    elif tool == "qftfs-lz4-auto":
        opts.append("compress=auto")
    elif tool == "qftfs-async":
        opts.append("commit=async")
    elif tool.startswith("qftfs-system-cc"):
        # what qftfs sends with when the hosts forbid it bbr: their
        # default congestion control (-o congestion=system), striped as
        # auto chooses, on one connection (-1) or on eight (-8)
        opts.append("congestion=system")
        if tool != "qftfs-system-cc":
            opts.append("streams=" + tool.rsplit("-", 1)[1])
    return [ctx.qftfs_client, "-p", str(ctx.lab.port), "-o", ",".join(opts),
            target, ctx.mnt]


def is_mount_tool(tool):
    return tool == "sshfs" or tool.startswith("qftfs")


def workload_argv(ctx, tool, data, workload, dst_name):
    """What one pass runs: {argv, dst (the copy to verify, None for a
    scan), stdout (a file for the command's output, else the log), mtimes
    (the copy keeps modification times: verify them)}."""
    name, tree = data["name"], data["kind"] == "tree"
    up = WORKLOAD_DIRECTION[workload] == "up"
    if up:
        src = data["path"]
        dst_local = os.path.join(ctx.srv, "up", dst_name)  # same file system
        dst_remote = remote(ctx, dst_local)
        dst_mnt = os.path.join(ctx.mnt, "up", dst_name)
    else:
        src_srv = os.path.join(ctx.srv, "data", name)
        src_mnt = os.path.join(ctx.mnt, "data", name)
        dst_local = os.path.join(ctx.cli, dst_name)
    res = {"dst": dst_local, "stdout": None, "mtimes": False}
    if workload in ("find", "du"):
        res.update(argv=["find", src_mnt] if workload == "find" else ["du", "-s", src_mnt],
                   dst=None, stdout=os.path.join(ctx.work, f"{workload}.out"),
                   scan_root=src_mnt)
        return res
    if workload == "rsync-down":
        res.update(argv=["rsync", "-a", src_mnt + "/", dst_local + "/"], mtimes=True)
        return res
    if workload in ("tar-c", "grep-r"):
        cmd = (f"tar cf - -C {shlex.quote(os.path.dirname(src_mnt))} "
               f"{shlex.quote(os.path.basename(src_mnt))} | wc -c"
               if workload == "tar-c" else
               f"grep -r -l -e '#include' {shlex.quote(src_mnt)}")
        res.update(argv=["bash", "-o", "pipefail", "-c", cmd], dst=None,
                   stdout=os.path.join(ctx.work, f"{workload}.out"),
                   scan_root=src_mnt)
        return res
    if workload in ("git-status", "git-log-p"):
        cmd = shlex.join(GIT + ["-C", src_mnt] + (
            ["status", "--porcelain"] if workload == "git-status" else
            ["log", "-p", "-20"]))
        if workload == "git-log-p":
            cmd += " | wc -c"
        res.update(argv=["bash", "-o", "pipefail", "-c", cmd], dst=None,
                   stdout=os.path.join(ctx.work, f"{workload}.out"),
                   scan_root=src_mnt)
        return res
    if workload == "randread":
        res.update(argv=[sys.executable, os.path.join(HERE, "randread.py"), src_mnt,
                         data["path"], str(RANDREAD_SECONDS)],
                   dst=None, stdout=os.path.join(ctx.work, "randread.out"),
                   scan_root=None)
        return res
    if workload == "rsync-up":
        res.update(argv=["rsync", "-a", src + "/", dst_mnt + "/"], mtimes=True)
        return res
    if workload == "tar-x":
        # the tarball's top directory becomes DST
        res.update(argv=["tar", "-xf", data["tar"], "-C", os.path.join(ctx.mnt, "up"),
                         "--strip-components=1", f"--one-top-level={dst_name}"],
                   mtimes=True)
        return res
    if is_mount_tool(tool):
        res["argv"] = ["cp"] + (["-r"] if tree else []) + (
            [src, dst_mnt] if up else [src_mnt, dst_local])
        return res
    if tool == "scp":
        base = ["scp", "-q"] + (["-r"] if tree else []) + ssh_opts(ctx)
        res["argv"] = base + ([src, dst_remote] if up else [remote(ctx, src_srv), dst_local])
        return res
    if tool == "rsync":
        base = ["rsync"] + (["-a"] if tree else []) + ["-e", shlex.join(["ssh"] + ssh_opts(ctx))]
        slash = "/" if tree else ""
        res["argv"] = base + ([src + slash, dst_remote + slash] if up else
                              [remote(ctx, src_srv) + slash, dst_local + slash])
        res["mtimes"] = tree
        return res
    raise ValueError(tool)


def fuse_conn(path):
    """The fusectl connection number of a mount, read while it is healthy
    (stat on a hung mount would hang too)."""
    try:
        return os.minor(os.stat(path).st_dev)
    except OSError:
        return None


def fuse_abort(conn):
    if conn is None:
        return
    try:
        with open(f"/sys/fs/fuse/connections/{conn}/abort", "w") as f:
            f.write("1")
    except OSError:
        pass


def is_mounted(path):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


class Mount:
    def __init__(self, ctx, tool):
        self.ctx, self.tool = ctx, tool
        self.argv = mount_argv(ctx, tool)
        self.conn = None
        self.mounted = False

    def mount(self):
        ctx = self.ctx
        os.makedirs(ctx.mnt, exist_ok=True)
        t0 = time.monotonic()
        try:
            r = subprocess.run(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=60, preexec_fn=ctx.cg_client.enter)
        except subprocess.TimeoutExpired:
            ctx.cg_client.kill()
            return None, "mount command timed out after 60 s"
        if r.returncode != 0:
            return None, f"mount failed (exit {r.returncode}): {(r.stderr + r.stdout).strip()[-600:]}"
        end = time.monotonic() + 30
        while not is_mounted(ctx.mnt):
            if time.monotonic() > end:
                return None, "mount command succeeded but no mount appeared in 30 s"
            time.sleep(0.05)
        self.mounted = True
        self.conn = fuse_conn(ctx.mnt)
        return time.monotonic() - t0, None

    def umount(self):
        if not self.mounted:
            return
        ctx = self.ctx
        r = sh(["fusermount3", "-u", ctx.mnt], timeout=60, check=False)
        if r.returncode != 0:
            log(f"fusermount3 -u failed ({r.stderr.strip()}); aborting the connection")
            fuse_abort(self.conn)
            sh(["fusermount3", "-uz", ctx.mnt], timeout=60, check=False)
        self.mounted = False
        if not ctx.cg_client.wait_empty(10):
            log(f"{self.tool}: client processes still alive 10 s after unmount; killing them")
            ctx.cg_client.kill()
            ctx.cg_client.wait_empty(5)

    def abort(self):
        fuse_abort(self.conn)
        self.ctx.cg_client.kill()
        sh(["fusermount3", "-uz", self.ctx.mnt], timeout=60, check=False)
        self.mounted = False


# --- one measured pass --------------------------------------------------------

def run_measured(ctx, argv, cg, timeout, logpath, on_timeout=None, stdout_path=None):
    """Runs argv in cgroup cg: (status, seconds, exit code, output tail).
    Its stdout goes to stdout_path if given, else with stderr to the log."""
    with open(logpath, "ab") as lf, open(stdout_path or os.devnull, "wb") as of:
        lf.write(f"$ {shlex.join(argv)}" .encode() +
                 (f" > {stdout_path}" if stdout_path else "").encode() + b"\n")
        lf.flush()
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=of if stdout_path else lf, stderr=lf,
                             stdin=subprocess.DEVNULL, preexec_fn=cg.enter, cwd=ctx.work)
        try:
            rc = p.wait(timeout=timeout)
            secs = time.monotonic() - t0
            status = "ok" if rc == 0 else "FAILED"
        except subprocess.TimeoutExpired:
            secs = time.monotonic() - t0
            status, rc = "TIMEOUT", None
            if on_timeout:
                on_timeout()
            cg.kill()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log(f"process {p.pid} survives SIGKILL (stuck in the kernel)")
    with open(logpath, "rb") as lf:
        out = lf.read().decode(errors="replace")
    # what the command printed, without the "$ command" line written above
    tail = out.split("\n", 1)[1] if "\n" in out else ""
    return status, secs, rc, tail[-800:]


LSDIR = "lsdir"      # 1,000 empty files on the server, listed during copies
LS_FILES = 1000
LS_DELAY = 0.5       # seconds into the copy


class LsProbe(threading.Thread):
    """`ls -l` of a 1,000-entry directory on the mount, started LS_DELAY s
    into a copy of the big file (the "ls" pass, after cold and warm, with
    caches dropped again): does metadata queue behind bulk data?  It has a
    pass of its own because serving ls costs the mount CPU."""

    def __init__(self, path, timeout):
        super().__init__(daemon=True)
        self.path, self.timeout = path, timeout
        self.copy_done = None
        self.res = None

    def run(self):
        time.sleep(LS_DELAY)
        if self.copy_done is not None:
            return
        t0 = time.monotonic()
        try:
            r = subprocess.run(["ls", "-l", self.path], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=self.timeout)
            lines = r.stdout.count(b"\n") - 1  # the "total" line
            t1 = time.monotonic()
            self.res = {"command": f"ls -l {self.path}", "seconds": round(t1 - t0, 3),
                        "entries": lines, "exit_code": r.returncode,
                        "overlapped": self.copy_done is None or self.copy_done > t1}
        except subprocess.TimeoutExpired:
            self.res = {"command": f"ls -l {self.path}", "seconds": None,
                        "error": f"ls -l took more than {self.timeout} s"}

    def result(self):
        if self.res is None:
            return {"skipped": f"the copy ended within {LS_DELAY} s"}
        if not self.res.get("overlapped", True):
            self.res["note"] = "the copy ended before ls did"
        return self.res


# cgroup (as perf names it, below the cgroup2 root) -> what it holds
PROFILE_GROUPS = {"client": "client", "server": "server", "app": "cp (the application)"}
PROFILE_TOP = 12  # symbols kept per group


class Profiler:
    """`perf record -a -e cpu-clock -g --all-cgroups` around one pass (the
    "prof" pass, with --profile): hardware counters need not exist, and
    the cgroups tell the client's, the server's and cp's samples apart from
    the rest of the machine (the link emulator, kernel threads, other
    users).  stop() puts the top symbols by self time into rec["profile"];
    perf.data stays beside the logs."""

    def __init__(self, ctx, rec, logpath):
        self.ctx, self.rec = ctx, rec
        self.data = os.path.splitext(logpath)[0] + ".perf.data"
        self.log = logpath
        with open(logpath, "ab") as lf:
            self.p = subprocess.Popen(
                ["perf", "record", "-q", "-a", "--all-cgroups", "-e", "cpu-clock", "-g",
                 "-o", self.data], stdout=lf, stderr=lf, stdin=subprocess.DEVNULL,
                preexec_fn=ctx.cg_aux.enter)
        # perf opens its events before it samples: give it that long
        time.sleep(0.5)

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.rec["perf_data"] = os.path.relpath(self.data, self.ctx.outdir)
        try:
            r = sh(["perf", "report", "-i", self.data, "--stdio", "--no-children",
                    "-g", "none", "--sort", "cgroup,comm,dso,sym", "-t", "|"],
                   timeout=600, check=False)
        except subprocess.TimeoutExpired:
            self.rec["profile"] = {"error": "perf report took more than 600 s"}
            return
        self.rec["profile"] = profile_summary(r.stdout, self.ctx.cg_tag)


def profile_summary(text, tag):
    """perf report's lines (self %, cgroup, comm, dso, symbol) grouped by
    who ran them: {groups: [{group, pct, kernel_pct, top: [[pct, comm,
    symbol]]}], samples_pct}.  A symbol marked [k] ran in the kernel on
    that group's behalf (system calls, TCP, FUSE, page cache, softirqs it
    happened to run)."""
    groups = {}
    for line in text.splitlines():
        if line.startswith("#") or "|" not in line:
            continue
        parts = [x.strip() for x in line.split("|")]
        if len(parts) < 5 or not parts[0].endswith("%"):
            continue
        try:
            pct = float(parts[0].rstrip("%"))
        except ValueError:
            continue
        cg, comm, sym = parts[1], parts[2], parts[4]
        name = cg.rsplit("/", 1)[-1]
        group = "other (link emulator, kernel threads, the rest of the machine)"
        if name.startswith(tag + "-"):
            group = PROFILE_GROUPS.get(name[len(tag) + 1:], group)
        g = groups.setdefault(group, {"group": group, "pct": 0.0, "kernel_pct": 0.0,
                                      "syms": {}})
        g["pct"] += pct
        if sym.startswith("[k]"):
            g["kernel_pct"] += pct
        key = (comm, sym)
        g["syms"][key] = g["syms"].get(key, 0.0) + pct
    out = []
    for g in sorted(groups.values(), key=lambda g: -g["pct"]):
        top = sorted(g.pop("syms").items(), key=lambda kv: -kv[1])[:PROFILE_TOP]
        g["pct"], g["kernel_pct"] = round(g["pct"], 2), round(g["kernel_pct"], 2)
        g["top"] = [[round(p, 2), c, s] for (c, s), p in top]
        out.append(g)
    return {"groups": out}


def measure_pass(ctx, rec, tool, data, workload, pname, mount):
    direction = WORKLOAD_DIRECTION[workload]
    dst_name = f"{data['name']}.{tool}.{workload}.{pname}"
    w = workload_argv(ctx, tool, data, workload, dst_name)
    argv, dst = w["argv"], w["dst"]
    rec.update(command=shlex.join(argv), started_at=datetime.datetime.now().isoformat(
        timespec="seconds"))
    if dst:
        rm_rf(dst)
    app_cg = ctx.cg_app if mount else ctx.cg_client
    ctx.sampler.reset()
    emu = ctx.lab.emu_pids()
    m0, e0 = machine_cpu_s(), procs_cpu_s(emu)
    c0, s0, a0 = ctx.cg_client.cpu_s(), ctx.cg_server.cpu_s(), ctx.cg_app.cpu_s()
    logpath = os.path.join(ctx.logdir, f"{rec['id']:04d}-{rec['link']}-{data['name']}-"
                           f"{tool}-{workload}-{pname}.log")
    rec["log"] = os.path.relpath(logpath, ctx.outdir)
    probe = None
    if pname == "ls":
        probe = LsProbe(os.path.join(ctx.mnt, LSDIR), ctx.timeout)
        probe.start()
    perf = Profiler(ctx, rec, logpath) if pname == "prof" else None
    status, secs, rc, tail = run_measured(
        ctx, argv, app_cg, ctx.timeout, logpath,
        on_timeout=(mount.abort if mount else None), stdout_path=w["stdout"])
    if perf:
        perf.stop()
    if tool == "qftfs-async" and mount and status == "ok":
        # not part of the figure (close() returned once the data was
        # queued, which is what the user waits for): what the mount still
        # had to send, made durable and checked by `qftfs --sync`, which
        # must come before the copy is verified on the server
        t0 = time.monotonic()
        r = subprocess.run([ctx.qftfs_client, "--sync", ctx.mnt],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=ctx.timeout)
        rec["sync_after_s"] = round(time.monotonic() - t0, 3)
        if r.returncode != 0:
            status = "FAILED"
            tail = (tail or "") + "\nqftfs --sync: " + r.stdout.strip()[-500:]
    if status == "ok" and data["kind"] == "file" and direction == "up":
        # not part of the figure: what the copy left unflushed (qftfs
        # fdatasyncs at close, the others do not)
        t0 = time.monotonic()
        try:
            fd = os.open(dst, os.O_RDONLY)
            os.fdatasync(fd)
            os.close(fd)
            rec["fdatasync_after_s"] = round(time.monotonic() - t0, 3)
        except OSError as e:
            rec["fdatasync_after_s"] = None
            rec["fdatasync_error"] = str(e)
    if probe:
        probe.copy_done = time.monotonic()
        probe.join(timeout=ctx.timeout + 30)
        rec["ls_during_copy"] = probe.result()
    # let the server side of a finished ssh session exit (and be counted)
    if not mount:
        ctx.cg_server.wait_empty(5, ignore=ctx.server_baseline)
    else:
        time.sleep(0.2)
    c1, s1, a1 = ctx.cg_client.cpu_s(), ctx.cg_server.cpu_s(), ctx.cg_app.cpu_s()
    m1, e1 = machine_cpu_s(), procs_cpu_s(emu)
    if m0 is not None and m1 is not None:
        rec["machine_cpu_s"] = round(m1 - m0, 3)
    if emu:
        rec["emu_cpu_s"] = round(e1 - e0, 3)
    crss, cprocs = ctx.sampler.result("client")
    srss, sprocs = ctx.sampler.result("server")
    rec.update(status=status, exit_code=rc, seconds=round(secs, 3))
    if c0 is not None:
        rec["client_cpu_s"] = round(c1 - c0, 3)
        rec["server_cpu_s"] = round(s1 - s0, 3)
        if mount:
            rec["app_cpu_s"] = round(a1 - a0, 3)
    rec.update(client_rss_kib=crss, server_rss_kib=srss,
               client_procs=cprocs, server_procs=sprocs)
    if status == "ok":
        if dst:
            rec["mb_s"] = round(data["bytes"] / secs / 1e6, 3)
        if workload == "randread":
            got = randread_result(w["stdout"]) or {}
            for k in ("mb_s", "iops", "ms_per_read", "reads"):
                if k in got:
                    rec[k] = got[k]
        if data["kind"] == "tree":
            rec["files_s"] = round(data["files"] / secs, 1)
            if rec["rtt_ms"]:
                # the cost of a file in round trips of the link
                rec["rtt_per_file"] = round(secs / (rec["rtt_ms"] / 1000) / data["files"], 2)
    elif status == "TIMEOUT":
        rec["error"] = (f"killed after {ctx.timeout} s"
                        + (f"; output: {tail.strip()[-500:]}" if tail.strip() else ""))
    else:
        rec["error"] = tail.strip()[-600:] or f"exit code {rc}"
    if status != "TIMEOUT":
        if dst:
            ok, details = verify(data, dst, w["mtimes"])
        else:
            ok, details = verify_scan(data, workload, w["stdout"], w["scan_root"])
        rec["verify"] = details
        if not ok:
            rec["status"] = "FAILED"
            rec["error"] = (rec.get("error", "") + " | verification failed: " +
                            json.dumps(details))[-900:]
    if dst:
        rm_rf(dst)
    if w["stdout"] and os.path.exists(w["stdout"]):
        os.unlink(w["stdout"])
    if rec.get("files_s"):
        shown = f"{rec['files_s']:.0f} files/s"
        if rec.get("rtt_per_file") is not None:
            shown += f", {rec['rtt_per_file']:.2f} round trips/file"
        if rec.get("mb_s"):
            shown += f", {rec['mb_s']:.2f} MB/s"
    elif workload == "randread" and rec.get("iops"):
        shown = (f"{rec['mb_s']:.2f} MB/s, {rec['iops']:.0f} reads/s, "
                 f"{rec['ms_per_read']:.2f} ms/read")
    elif rec.get("mb_s"):
        shown = f"{rec['mb_s']:.1f} MB/s"
    else:
        shown = " ".join(rec.get("error", "").split())[:160]
    log(f"  {tool:<18} {workload:<9} {pname:<4} {rec['status']:<7} {secs:8.2f} s  {shown}")


# --- the matrix -------------------------------------------------------------

class Results:
    def __init__(self, path, meta):
        self.path, self.meta, self.runs, self.notes = path, meta, [], []
        self.next_id = 1

    def new(self, **kw):
        rec = {"id": self.next_id}
        self.next_id += 1
        rec.update(kw)
        self.runs.append(rec)
        return rec

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)
            log(f"note: {text}")

    def save(self):
        doc = dict(self.meta, notes=self.notes, runs=self.runs)
        report.add_ratios(doc)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, self.path)
        return doc


def run_iperf(ctx, res, link):
    # on a lossy link, four connections too: what striping could reach
    streams = [1, 4] if link in CUBIC_LINKS else [1]
    for direction, n in [(d, n) for n in streams for d in DIRECTIONS]:
        argv = ["iperf3", "-c", ctx.lab.host, "-t", str(IPERF_SECONDS), "-J"]
        if direction == "down":
            argv.append("-R")
        if n > 1:
            argv += ["-P", str(n)]
        rec = res.new(link=link, rtt_ms=LINKS[link][0], rate_mbit=LINKS[link][1],
                      data=None, tool="iperf3" if n == 1 else f"iperf3-P{n}",
                      direction=direction, **{"pass": None},
                      command=shlex.join(argv))
        try:
            r = sh(argv, timeout=IPERF_SECONDS + 60, check=False)
            j = json.loads(r.stdout)
            if "error" in j:
                raise RuntimeError(j["error"])
            end = j["end"]
            rec.update(status="ok", seconds=round(end["sum_received"]["seconds"], 3),
                       goodput_mbit=round(end["sum_received"]["bits_per_second"] / 1e6, 1),
                       retransmits=end["sum_sent"].get("retransmits"))
            rec["mb_s"] = round(rec["goodput_mbit"] / 8, 3)
            log(f"  {rec['tool']} {direction:<4} {rec['goodput_mbit']:.0f} Mbit/s "
                f"({rec['retransmits']} retransmits)")
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            rec.update(status="FAILED", error=str(e)[-500:])
            log(f"  iperf3 {direction} FAILED: {e}")
        res.save()


def plan_workloads(ctx, res, link, data, tool):
    """The workloads this tool runs on this data set and link, in order."""
    out = []
    for wl in DATA_WORKLOADS[data["set"]]:
        if wl not in ctx.workloads or WORKLOAD_DIRECTION[wl] not in ctx.directions:
            continue
        if wl not in ("copy-up", "copy-down") and not is_mount_tool(tool):
            continue  # rsync-up, tar-x, find, du: through a mount
        if wl == "randread" and not LINKS[link][0] and not LINKS[link][1]:
            res.note("randread runs on emulated links only: on the unlimited one it "
                     "measures the machine, not the round trip")
            continue
        if tool == "qftfs-async" and WORKLOAD_DIRECTION[wl] != "up":
            res.note("qftfs-async runs only the workloads that write (copy-up, rsync-up, "
                     "tar-x): -o commit=async changes nothing on reads")
            continue
        if data["set"] == "bigtree" and wl == "copy-up" and (LINKS[link][0] or LINKS[link][1]):
            res.note(f"{data['name']} is copied (copy-up) only on the unlimited link (veth); "
                     "on the others it is scanned (find, du)")
            continue
        out.append(wl)
    return out


def run_tool(ctx, res, link, data, tool):
    is_mount = is_mount_tool(tool)
    tree = data["kind"] == "tree"
    for workload in plan_workloads(ctx, res, link, data, tool):
        direction = WORKLOAD_DIRECTION[workload]
        passes = ctx.passes[direction]
        if workload == "randread":
            # a warm pass would be a page-cache read of whatever the cold
            # one happened to fetch
            passes = passes[:1]
        elif ctx.quick_passes and (not is_mount or tree):
            # scp and rsync keep no cache of their own: a warm pass would
            # only repeat the cold one; trees in --quick: cold only (time)
            passes = passes[:1]
        if is_mount and ctx.ls_probe and data["name"].startswith("big-") and \
                workload != "randread":
            passes = passes + ["ls"]
        if ctx.profile and tool in PROFILE_TOOLS and data["kind"] == "file" and \
                workload in ("copy-up", "copy-down"):
            passes = passes + ["prof"]
        mount = None
        # why the remaining passes of this workload cannot run
        broken = None
        unavailable = ctx.unavailable.get(tool)
        for pname in passes:
            rec = res.new(link=link, rtt_ms=LINKS[link][0], rate_mbit=LINKS[link][1],
                          data=data["name"], data_set=data["set"], data_kind=data["kind"],
                          data_bytes=data["bytes"], data_files=data["files"],
                          data_dirs=data.get("dirs"), tool=tool, workload=workload,
                          direction=direction, **{"pass": pname})
            if unavailable:
                rec.update(status="N/A", error=f"not available: {unavailable}")
                log(f"  {tool:<18} {workload:<9} {pname:<4} N/A      not available: "
                    f"{unavailable[:200]}")
                res.save()
                continue
            if broken:
                rec.update(status="SKIPPED", error=broken)
                log(f"  {tool:<18} {workload:<9} {pname:<4} SKIPPED  {broken}")
                res.save()
                continue
            if pname == "cold":
                if mount:
                    mount.umount()
                    mount = None
                drop_caches()
            elif pname in ("ls", "prof"):
                # the data cold again (else a download is a page-cache
                # read that ends before ls starts), the mount as it is
                drop_caches()
            if is_mount and mount is None:
                mount = Mount(ctx, tool)
                rec["mount_command"] = shlex.join(mount.argv)
                secs, err = mount.mount()
                if err:
                    rec.update(status="FAILED", error=err)
                    log(f"  {tool:<18} {workload:<9} {pname:<4} FAILED   {err[:300]}")
                    broken = f"mount failed in the {pname} pass"
                    mount = None
                    res.save()
                    continue
                rec["mount_s"] = round(secs, 3)
            elif mount:
                rec["mount_command"] = shlex.join(mount.argv)
            measure_pass(ctx, rec, tool, data, workload, pname, mount)
            if rec["status"] == "TIMEOUT":
                broken = f"the {pname} pass timed out after {ctx.timeout} s"
                mount = None  # aborted by the timeout handler
            res.save()
        if mount:
            mount.umount()
        # leave nothing behind on the server for the next tool
        for p in os.listdir(os.path.join(ctx.srv, "up")):
            rm_rf(os.path.join(ctx.srv, "up", p))


def damon_pageout_note():
    """A DAMON scheme that pages out idle page cache (as on some VMs) makes
    a warm pass partly cold when the cold one took longer than its idle
    age: say so in the results.  None when there is no such scheme."""
    base = "/sys/kernel/mm/damon/admin/kdamonds"

    def rd(p):
        try:
            with open(p) as f:
                return f.read().strip()
        except OSError:
            return None
    try:
        kds = [k for k in os.listdir(base) if k.isdigit()]
    except OSError:
        return None
    for k in kds:
        if rd(f"{base}/{k}/state") != "on":
            continue
        cdir = f"{base}/{k}/contexts"
        for c in (x for x in os.listdir(cdir) if x.isdigit()):
            aggr = rd(f"{cdir}/{c}/monitoring_attrs/intervals/aggr_us")
            sdir = f"{cdir}/{c}/schemes"
            for sc in (x for x in os.listdir(sdir) if x.isdigit()):
                if rd(f"{sdir}/{sc}/action") != "pageout":
                    continue
                age = rd(f"{sdir}/{sc}/access_pattern/age/min")
                idle = (int(age) * int(aggr) / 1e6) if age and aggr else None
                return ("this kernel runs a DAMON pageout scheme (kdamond "
                        f"{k}): page cache it finds idle for about {idle:.0f} s may be "
                        "paged out, so a warm pass that follows a long cold pass "
                        "can find part of the data evicted, on either side")
    return None


def quick_prune(quick, link, dname, tool, trees_only=False):
    """--quick keeps to ~15 minutes by running each qftfs variant only where
    it is what is being looked at; None = run it.  Trees, in every mode,
    only with the qftfs variants that matter for them."""
    if dname in ("tree", "bigtree", "repo") and tool.startswith("qftfs") and tool not in TREE_VARIANTS:
        return "the trees: only " + " and ".join(TREE_VARIANTS) + " run them"
    if not quick:
        return None
    if trees_only and dname not in ("tree", "bigtree"):
        return f"on {link} only the trees (--quick without --links)"
    if tool == "qftfs-lz4" and dname != "json":
        return "only on the json data"
    if tool == "qftfs-lz4-auto" and dname in ("tree", "bigtree"):
        return "only on the json data and the big file"
    if tool == "qftfs-async" and dname not in ("tree", "bigtree"):
        return "only on the trees"
    if tool in ("qftfs-uring", "qftfs-buffered") and dname != "big":
        return "only on the big file"
    if tool in ("qftfs-cipher-none", "qftfs-chacha20") and (dname != "big" or link != "veth"):
        return "only for the big file on veth (where the cipher's CPU cost shows)"
    return None


# --quick's default links; on QUICK_TREE_LINKS only the trees run (unless
# --links names the links)
QUICK_LINKS = ["veth", "100m-2ms", "100m-40ms"]
QUICK_TREE_LINKS = ["100m-40ms"]


def host_info():
    info = {"kernel": platform.release(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            info["cpu_model"] = m.group(1) if m else None
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
        info["loadavg_at_start"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    vers = {}
    for name, argv in [("ssh", ["ssh", "-V"]), ("sshfs", ["sshfs", "-V"]),
                       ("rsync", ["rsync", "--version"]), ("iperf3", ["iperf3", "-v"])]:
        try:
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=10)
            vers[name] = " / ".join(r.stdout.strip().splitlines()[:2])
        except (OSError, subprocess.TimeoutExpired):
            vers[name] = None
    try:
        head = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], check=False).stdout.strip()
        dirty = sh(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                   check=False).stdout.strip()
        vers["qftfs_git"] = head + ("+dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    info["versions"] = vers
    return info


def parse_list(s, allowed, what):
    items = [x.strip() for x in s.split(",") if x.strip()]
    for x in items:
        if x not in allowed:
            sys.exit(f"bench: unknown {what} '{x}' (known: {', '.join(allowed)})")
    return items


def main():
    ap = argparse.ArgumentParser(prog="run.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="256 MiB / 128 MiB files; links " + ",".join(QUICK_LINKS) +
                         " (" + ",".join(QUICK_TREE_LINKS) + ": trees only) unless --links "
                         "says otherwise; fewer passes and variants (docs/benchmarks.md)")
    ap.add_argument("--links", help="comma list of: " + ", ".join(LINKS))
    ap.add_argument("--tools", help="comma list of: " + ", ".join(TOOLS + QFTFS_VARIANTS[1:]))
    ap.add_argument("--data", help="comma list of: " + ", ".join(DATA))
    ap.add_argument("--workloads", help="comma list of: " + ", ".join(WORKLOADS) +
                    " (default all; each data set runs those that apply to it)")
    ap.add_argument("--passes", help="cold or cold,warm (default; with --quick: cold,warm "
                    "for downloads, cold for uploads)")
    ap.add_argument("--big-mib", type=int,
                    help="the big file's size in MiB (default 256 with --quick, else 1024): "
                    "smaller for the lossy links, where single-connection tools move "
                    "well under 1 MB/s")
    ap.add_argument("--directions", default="up,down", help="up, down or up,down (default)")
    ap.add_argument("--timeout", type=int, help="seconds per copy before it is recorded "
                    "as TIMEOUT (default 300 with --quick, else 3600)")
    ap.add_argument("--no-ls-probe", action="store_true",
                    help="skip the 'ls' pass (ls -l during a big copy on each mount)")
    ap.add_argument("--profile", action="store_true",
                    help="one more pass of each big-file copy of " + " and ".join(PROFILE_TOOLS) +
                    " under `perf record -a -e cpu-clock -g`: the top symbols by self time, "
                    "per client, server, cp and the rest, in the results")
    ap.add_argument("--out", help="results directory (default tests/bench/results/<timestamp>)")
    ap.add_argument("--argv0", default="bash tests/bench/run.sh", help=argparse.SUPPRESS)
    args = ap.parse_args()
    argv = sys.argv[1:]
    if "--argv0" in argv:
        i = argv.index("--argv0")
        del argv[i:i + 2]
    invocation = " ".join([args.argv0] + [shlex.quote(a) for a in argv])

    links = parse_list(args.links or (",".join(QUICK_LINKS) if args.quick else ",".join(LINKS)),
                       list(LINKS), "link")
    tools = parse_list(args.tools or ",".join(TOOLS), TOOLS + QFTFS_VARIANTS, "tool")
    datas = parse_list(args.data or ",".join(DATA), DATA, "data set")
    passes = parse_list(args.passes or "cold,warm", PASSES, "pass")
    if passes not in (["cold"], ["cold", "warm"]):
        sys.exit("bench: --passes must be cold or cold,warm (warm is the second pass)")
    passes = {"up": passes, "down": passes}
    if args.quick and not args.passes:
        # a warm upload mostly repeats the cold one; a warm download shows
        # whether re-reads come from the cache
        passes["up"] = ["cold"]
    directions = parse_list(args.directions, DIRECTIONS, "direction")
    workloads = parse_list(args.workloads or ",".join(WORKLOADS), WORKLOADS, "workload")
    timeout = args.timeout or int(os.environ.get("QFTFS_BENCH_TIMEOUT", 0)) or (
        300 if args.quick else 3600)

    if os.geteuid() != 0:
        print("bench: needs root (network namespaces, drop_caches, FUSE); skipped")
        sys.exit(77)

    # the link emulator
    forced = os.environ.get("QFTFS_BENCH_BACKEND")
    if forced == "netem" or (not forced and netem_available()):
        backend = "netem"
    elif os.environ.get("QFTFS_BENCH_LINK_CMD"):
        backend = "cmd"
    else:
        print("bench: this kernel has no sch_netem (tc qdisc ... netem fails) and\n"
              "QFTFS_BENCH_LINK_CMD is not set.  Give an emulator command with the\n"
              "interface `CMD up RTT_MS RATE_MBIT` / `CMD down` (RATE 0 = unlimited)\n"
              "that puts an sshd for root at QFTFS_BENCH_HOST (default 10.77.0.2)\n"
              "in network namespace QFTFS_BENCH_NETNS (default qa), reachable with\n"
              "QFTFS_BENCH_IDENTITY (default ~root/.ssh/id_ed25519), e.g.\n"
              "  QFTFS_BENCH_LINK_CMD=/path/to/netlab.sh bash tests/bench/run.sh --quick")
        sys.exit(77)

    build = os.path.abspath(os.environ.get("QFTFS_BUILD", os.path.join(REPO, "build")))
    work = os.path.abspath(os.environ.get("QFTFS_BENCH_DIR", "/var/tmp/qftfs-bench"))
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = os.path.abspath(args.out or os.path.join(HERE, "results", stamp))
    os.makedirs(os.path.join(outdir, "logs"), exist_ok=True)
    global LOGF
    LOGF = open(os.path.join(outdir, "bench.log"), "a")

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    ctx = Ctx()
    ctx.work, ctx.outdir, ctx.logdir = work, outdir, os.path.join(outdir, "logs")
    ctx.srv, ctx.cli, ctx.mnt = (os.path.join(work, "srv"), os.path.join(work, "cli"),
                                 os.path.join(work, "mnt"))
    ctx.timeout, ctx.directions, ctx.passes = timeout, directions, passes
    ctx.workloads = workloads
    ctx.quick_passes = args.quick and not args.passes
    ctx.ls_probe = not args.no_ls_probe
    ctx.profile = args.profile
    if args.profile and not shutil.which("perf"):
        sys.exit("bench: --profile needs perf (apt-get install linux-perf)")
    ctx.lab = Lab(backend)
    ctx.known_hosts = os.path.join(work, "known_hosts")

    # qftfs variants
    run_tools = []
    variant_skip, ctx.qftfs_client, ctx.qftfs_server = probe_qftfs(build)
    notes = []
    for t in tools:
        if t == "qftfs":
            for v in QFTFS_DEFAULT_VARIANTS:
                if variant_skip[v]:
                    notes.append(f"{v} skipped: {variant_skip[v]}")
                elif v not in run_tools:
                    run_tools.append(v)
        elif t in QFTFS_VARIANTS:
            if variant_skip[t]:
                notes.append(f"{t} skipped: {variant_skip[t]}")
            elif t not in run_tools:
                run_tools.append(t)
        elif t not in run_tools:
            if t != "iperf3" and not shutil.which(t):
                notes.append(f"{t} skipped: not installed")
                continue
            run_tools.append(t)
    # a variant the client refuses at mount time: every planned pass is
    # recorded as "not available: <what the client said>"
    ctx.unavailable = {}
    if "qftfs-async" in run_tools and os.access(ctx.qftfs_client, os.X_OK):
        why = probe_mount_option(ctx.qftfs_client, work, "commit=async")
        if why:
            ctx.unavailable["qftfs-async"] = why
            notes.append(f"qftfs-async (-o commit=async) not available: {why}")
    if "sshfs" not in run_tools:
        notes.append("sshfs is not in the run: no 'x sshfs' ratios")
    if "iperf3" not in run_tools:
        notes.append("iperf3 is not in the run: no '% of link' ratios")

    damon = damon_pageout_note()
    if damon:
        notes.append(damon)
    kind, croot = cgroup_root()
    if not kind:
        notes.append("no usable cgroup hierarchy: CPU seconds are not measured")
    tag = f"qftfs-bench-{os.getpid()}"
    ctx.cg_tag = tag
    ctx.cg_client = CGroup(kind, croot, tag + "-client")
    ctx.cg_server = CGroup(kind, croot, tag + "-server")
    ctx.cg_app = CGroup(kind, croot, tag + "-app")
    ctx.cg_aux = CGroup(kind, croot, tag + "-aux")

    meta = {"command": invocation, "date": datetime.datetime.now().astimezone().isoformat(
        timespec="seconds"), "host": host_info(), "backend": backend,
        "link_cmd": shlex.join(ctx.lab.cmd), "server_host": ctx.lab.host,
        "netns": ctx.lab.netns, "quick": args.quick, "links": links,
        "tools": run_tools, "data": datas, "passes": passes, "directions": directions,
        "workloads": workloads,
        "timeout_s": timeout, "cgroup": kind, "profile": args.profile,
        "emu_netns": ctx.lab.emu_netns, "ssh_cipher": SSH_CIPHER,
        "build": build, "workdir": work, "qftfs_binaries": {
            os.path.basename(p): {"sha256": sha256_file(p)[:16], "mtime": datetime.datetime.
                                  fromtimestamp(os.path.getmtime(p)).isoformat(timespec="seconds")}
            for p in (ctx.qftfs_client, ctx.qftfs_server) if os.path.exists(p)}}
    res = Results(os.path.join(outdir, "results.json"), meta)
    for n in notes:
        res.note(n)
    log(f"results in {outdir}")
    log(f"links {','.join(links)}; tools {','.join(run_tools)}; data {','.join(datas)}; "
        f"backend {backend}; timeout {timeout} s")

    rc = 0
    iperf_srv = None
    ctx.sampler = None
    try:
        data = prepare_data(work, datas, args.quick, args.big_mib)
        res.meta["data_sets"] = {k: {x: v.get(x) for x in ("name", "origin", "bytes", "files",
                                                          "dirs")}
                                 for k, v in data.items()}
        for d in (ctx.srv, ctx.cli):
            rm_rf(d)
        os.makedirs(os.path.join(ctx.srv, "data"))
        os.makedirs(os.path.join(ctx.srv, "up"))
        os.makedirs(os.path.join(ctx.srv, LSDIR))
        for i in range(LS_FILES):
            open(os.path.join(ctx.srv, LSDIR, f"entry-{i:04d}"), "w").close()
        os.makedirs(ctx.cli)
        # the server's sources: big files as hard links (same file system,
        # no extra space); trees as copies, since a tree whose every file
        # has a second name is not what users copy, and qftfs (rightly)
        # asks the server for a hard-linked file's attributes each time
        for d in data.values():
            dst = os.path.join(ctx.srv, "data", d["name"])
            if d["kind"] == "tree":
                sh(["cp", "-a", d["path"], dst], timeout=600)
            else:
                os.link(d["path"], dst)

        for link in links:
            rtt, rate = LINKS[link]
            loss = LINK_LOSS.get(link, 0)
            cc = LOSS_CC if link in CUBIC_LINKS else None
            log(f"=== link {link}: {rtt} ms round trip, "
                f"{str(rate) + ' Mbit/s' if rate else 'unlimited'}"
                + (f", {loss:g}% loss" if loss else "")
                + (f", {cc} on both hosts" if cc else ""))
            ctx.lab.up(rtt, rate, loss, cc)
            r = sh(["ssh-keyscan", "-p", str(ctx.lab.port), ctx.lab.host], timeout=30)
            with open(ctx.known_hosts, "w") as f:
                f.write(r.stdout)
            # every process of the server host (its sshd) and all it spawns
            # from now on are counted as server
            ctx.server_baseline = set(ctx.lab.netns_pids())
            for pid in ctx.server_baseline:
                ctx.cg_server.add(pid)
            ctx.sampler = RssSampler({"client": ctx.cg_client, "server": ctx.cg_server},
                                     ctx.server_baseline)
            ctx.sampler.start()
            if "iperf3" in run_tools:
                iperf_srv = subprocess.Popen(
                    ["ip", "netns", "exec", ctx.lab.netns, "iperf3", "-s", "-B", ctx.lab.host],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    preexec_fn=ctx.cg_aux.enter)
                time.sleep(1)
                run_iperf(ctx, res, link)
                ctx.cg_aux.kill()
                iperf_srv.wait(timeout=10)
                iperf_srv = None
            for dname in datas:
                for tool in run_tools:
                    if tool == "iperf3":
                        continue
                    why = quick_prune(args.quick, link, dname, tool,
                                      trees_only=(not args.links and link in QUICK_TREE_LINKS))
                    if why and why.startswith("the trees"):
                        res.note(f"{why}; {tool} does not")
                        continue
                    if why:
                        res.note(f"--quick: {tool} runs {why}")
                        continue
                    log(f"--- {link} / {data[dname]['name']} / {tool}")
                    run_tool(ctx, res, link, data[dname], tool)
            ctx.sampler.stopping = True
            ctx.sampler.join()
            ctx.sampler = None
            ctx.lab.down()
    except Interrupted as e:
        log(f"interrupted ({e}); tearing down")
        res.note(f"run interrupted ({e}): the matrix is incomplete")
        rc = 130
    except Exception as e:  # noqa: BLE001 - the teardown below must run
        log(f"harness error: {e!r}; tearing down")
        res.note(f"harness error: {e!r}: the matrix is incomplete")
        rc = 1
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        if ctx.sampler:
            ctx.sampler.stopping = True
        if is_mounted(ctx.mnt):
            sh(["fusermount3", "-u", ctx.mnt], timeout=60, check=False)
            if is_mounted(ctx.mnt):
                sh(["fusermount3", "-uz", ctx.mnt], timeout=60, check=False)
        for cg in (ctx.cg_app, ctx.cg_client, ctx.cg_aux):
            cg.kill()
        ctx.lab.down()
        for cg in (ctx.cg_app, ctx.cg_client, ctx.cg_aux, ctx.cg_server):
            cg.remove()
        for d in (ctx.srv, ctx.cli):
            rm_rf(d)
        doc = res.save()
        try:
            report.write_all(doc, outdir)
        except Exception as e:  # noqa: BLE001
            log(f"report failed: {e!r}")
            rc = rc or 1
        failed = [r for r in res.runs if r.get("status") in ("FAILED", "TIMEOUT")]
        if failed and rc == 0:
            rc = 1
        log(f"{len(res.runs)} runs, {len(failed)} failed or timed out; "
            f"results: {os.path.relpath(outdir, os.getcwd())}/results.md")
    sys.exit(rc)


if __name__ == "__main__":
    main()
