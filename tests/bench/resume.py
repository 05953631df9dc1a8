#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The resume scenario of the qftfs benchmark: an upload through a mount
whose link is cut in the middle and healed, beside the same upload with no
cut, for qftfs and sshfs (-o reconnect) on one emulated link.

    bash tests/bench/run.sh resume [--link 100m-40ms] [--cut SECS] [--at FRACTION]
                                   [--tools qftfs,sshfs] [--out DIR]

For every tool: mount, copy the 256 MiB random file onto the mount once
without a cut (the baseline), then again with the link cut once
FRACTION of the file has reached the server's disk, for SECS seconds.
Measured: the copy's exit status and wall time, the time from the heal to
the first new byte on the server's disk (polled every 10 ms on the
server's file system, which this machine shares), and whether the copy is
byte for byte the source.  docs/benchmarks.md ("Resuming after a cut")
keeps the latest figures.  Needs the same link emulator as the main
harness (a command with `up`, `down`, `cut` and `heal`).
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (beside this file)

POLL_S = 0.01


def server_size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def one_copy(ctx, tool, src, size, cut_s, at):
    """One copy onto the mount; with cut_s, the link is cut once `at` of
    the file is on the server's disk.  Returns the record."""
    name = f"resume.{tool}.{'cut' if cut_s else 'base'}"
    dst_mnt = os.path.join(ctx.mnt, "up", name)
    dst_srv = os.path.join(ctx.srv, "up", name)
    bench.rm_rf(dst_srv)
    rec = {"tool": tool, "cut_s": cut_s, "at": at, "bytes": size}
    log = open(os.path.join(ctx.outdir, f"{name}.log"), "w")
    t0 = time.monotonic()
    p = subprocess.Popen(["cp", src, dst_mnt], stdout=log, stderr=subprocess.STDOUT)
    t_cut = t_heal = t_first = None
    at_heal = -1
    deadline = t0 + ctx.timeout
    while p.poll() is None and time.monotonic() < deadline:
        now = time.monotonic()
        got = server_size(dst_srv)
        if cut_s and t_cut is None and got >= at * size:
            ctx.lab_cmd("cut")
            t_cut = time.monotonic()
            rec["cut_at_bytes"] = got
        elif t_cut is not None and t_heal is None and now - t_cut >= cut_s:
            ctx.lab_cmd("heal")
            t_heal = time.monotonic()
            at_heal = server_size(dst_srv)
        elif t_heal is not None and t_first is None and got > at_heal:
            t_first = now
        time.sleep(POLL_S)
    if p.poll() is None:
        p.kill()
        rec["status"] = "timeout"
    else:
        rec["status"] = "ok" if p.returncode == 0 else f"exit {p.returncode}"
    p.wait()
    if t_cut is not None and t_heal is None:
        ctx.lab_cmd("heal")
    rec["seconds"] = round(time.monotonic() - t0, 2)
    if t_heal is not None:
        rec["heal_to_first_byte_s"] = (round(t_first - t_heal, 3)
                                       if t_first is not None else None)
    log.close()
    with open(log.name) as f:
        rec["output"] = f.read()[-600:]
    if rec["status"] == "ok":
        rec["verified"] = bench.file_sha256(dst_srv) == bench.file_sha256(src)
    bench.rm_rf(dst_srv)
    return rec


def mount_argv(ctx, tool):
    argv = bench.mount_argv(ctx, tool)
    if tool == "sshfs":
        # sshfs's own answer to a lost link: reconnect, and notice the
        # loss within 15 s as qftfs's keepalive does
        argv += ["-o", "reconnect,ServerAliveInterval=5,ServerAliveCountMax=3"]
    return argv


def main():
    ap = argparse.ArgumentParser(prog="run.sh resume", description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", default="100m-40ms", choices=sorted(bench.LINKS))
    ap.add_argument("--cut", type=float, default=45.0, help="seconds the link stays cut")
    ap.add_argument("--at", type=float, default=0.4,
                    help="fraction of the file on the server when the cut starts")
    ap.add_argument("--tools", default="qftfs,sshfs")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--out")
    ap.add_argument("--argv0", default="bash tests/bench/run.sh resume",
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    tools = bench.parse_list(args.tools, ["qftfs", "sshfs"], "tool")
    if os.geteuid() != 0:
        print("resume: needs root (network namespaces, FUSE); skipped")
        sys.exit(77)
    if not os.environ.get("QFTFS_BENCH_LINK_CMD") and not bench.netem_available():
        print("resume: no link emulator (see run.sh); skipped")
        sys.exit(77)
    backend = "cmd" if os.environ.get("QFTFS_BENCH_LINK_CMD") else "netem"

    build = os.path.abspath(os.environ.get("QFTFS_BUILD", os.path.join(REPO, "build")))
    work = os.path.abspath(os.environ.get("QFTFS_BENCH_DIR", "/var/tmp/qftfs-bench"))
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    ctx = bench.Ctx()
    ctx.outdir = os.path.abspath(args.out or os.path.join(HERE, "results", stamp + "-resume"))
    os.makedirs(ctx.outdir, exist_ok=True)
    bench.LOGF = open(os.path.join(ctx.outdir, "bench.log"), "a")
    ctx.work, ctx.timeout = work, args.timeout
    ctx.srv, ctx.mnt = os.path.join(work, "srv"), os.path.join(work, "mnt")
    ctx.lab = bench.Lab(backend)
    ctx.lab_cmd = lambda what: bench.sh(ctx.lab.cmd + [what], timeout=30)
    ctx.known_hosts = os.path.join(work, "known_hosts")
    _, ctx.qftfs_client, ctx.qftfs_server = bench.probe_qftfs(build)
    kind, croot = bench.cgroup_root()
    ctx.cg_client = bench.CGroup(kind, croot, f"qftfs-resume-{os.getpid()}")

    rtt, rate = bench.LINKS[args.link]
    data = bench.prepare_data(work, ["big"], True)["big"]
    os.makedirs(os.path.join(ctx.srv, "up"), exist_ok=True)
    command = shlex.join(args.argv0.split() + sys.argv[1:])
    records = []
    rc = 0
    try:
        ctx.lab.up(rtt, rate)
        r = bench.sh(["ssh-keyscan", "-p", str(ctx.lab.port), ctx.lab.host], timeout=30)
        with open(ctx.known_hosts, "w") as f:
            f.write(r.stdout)
        for tool in tools:
            m = bench.Mount(ctx, tool)
            m.argv = mount_argv(ctx, tool)
            _, err = m.mount()
            if err:
                records.append({"tool": tool, "status": err})
                rc = 1
                continue
            try:
                for cut in (0, args.cut):
                    bench.log(f"{tool}: copy, cut {cut} s")
                    rec = one_copy(ctx, tool, data["path"], data["bytes"], cut, args.at)
                    bench.log(f"{tool}: {rec['status']} in {rec['seconds']} s, "
                              f"heal to first byte {rec.get('heal_to_first_byte_s')}")
                    records.append(rec)
                    if rec["status"] != "ok" or not rec.get("verified"):
                        rc = 1
            finally:
                m.umount()
    finally:
        ctx.lab.down()
        ctx.cg_client.remove()

    out = {"command": command, "date": datetime.datetime.now().astimezone().isoformat(
        timespec="seconds"), "link": args.link, "host": bench.host_info(),
        "records": records}
    with open(os.path.join(ctx.outdir, "results.json"), "w") as f:
        json.dump(out, f, indent=1)
    lines = [f"# Resume after a cut: {args.link}, {data['bytes'] >> 20} MiB up, "
             f"cut {args.cut:g} s at {args.at:.0%}", "",
             f"Produced by `{command}` on {out['date'][:10]}.", "",
             "| tool | cut s | status | verified | s | heal to first byte s |",
             "|---|---:|---|---|---:|---:|"]
    for r in records:
        lines.append(f"| {r['tool']} | {r.get('cut_s', '–'):g} | {r['status']} | "
                     f"{'yes' if r.get('verified') else 'no'} | {r.get('seconds', '–')} | "
                     f"{r.get('heal_to_first_byte_s', '–')} |"
                     if "cut_s" in r else f"| {r['tool']} | – | {r['status']} | – | – | – |")
    with open(os.path.join(ctx.outdir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(rc)


if __name__ == "__main__":
    main()
