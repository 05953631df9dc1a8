#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The copy scenario of the qftfs benchmark (issue 19): copies the server
can do without the link, through a qftfs mount on one emulated link.

    bash tests/bench/run.sh copy [--link 100m-40ms] [--out DIR]

Measured, each as the wall time of one `cp`, with the bytes the mount's
own counters saw on the wire (user.qftfs.stats):

- within:  `cp` of a 256 MiB random file to another name on the mount
           (server-side copy; target <= 2 s at 100 Mbit/s 40 ms);
- sparse:  `cp --sparse=always` of a 1 GiB image holding 10 MiB of data
           in three extents off the mount (target <= 1.5x `plain`);
- plain:   `cp` of a 10 MiB random file off the mount: the link time of
           the image's data.

Every copy is checked byte for byte.  QFTFS_BUILD selects the build (the
main branch's build gives the figures before).  docs/benchmarks.md
("Server-side copy and holes") keeps the latest figures.  Needs the same
link emulator as the main harness.
"""
import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (beside this file)

MiB = 1 << 20
# A disk image: a boot area, a root file system's start, some data
# further in; 10 MiB in all.
SPARSE = [(0, 4 * MiB), (256 * MiB, 4 * MiB), (900 * MiB, 2 * MiB)]


def wire(mnt):
    try:
        text = os.getxattr(mnt, "user.qftfs.stats").decode()
    except OSError:
        return None
    s = dict(l.split() for l in text.splitlines())
    return int(s["wire_sent"]) + int(s["wire_received"])


def make_files(d):
    os.makedirs(d, exist_ok=True)
    rng = random.Random(19)
    big = os.path.join(d, "big.img")
    if not os.path.exists(big) or os.stat(big).st_size != 256 * MiB:
        with open(big, "wb") as f:
            for _ in range(256):
                f.write(rng.randbytes(MiB))
    image = os.path.join(d, "sparse.img")
    with open(image, "wb") as f:
        f.truncate(1 << 30)
        for off, n in SPARSE:
            f.seek(off)
            f.write(rng.randbytes(n))
    ten = os.path.join(d, "ten.img")
    with open(ten, "wb") as f:
        f.write(rng.randbytes(10 * MiB))
    return big, image, ten


def one(ctx, name, argv, src, dst):
    bench.rm_rf(dst)
    w0 = wire(ctx.mnt)
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=ctx.timeout)
    secs = time.monotonic() - t0
    w1 = wire(ctx.mnt)
    rec = {"name": name, "argv": argv, "seconds": round(secs, 3),
           "status": "ok" if r.returncode == 0 else f"exit {r.returncode}: {r.stderr[-300:]}",
           "wire_bytes": (w1 - w0) if w0 is not None and w1 is not None else None}
    if r.returncode == 0:
        rec["verified"] = bench.file_sha256(dst) == bench.file_sha256(src)
    bench.log(f"{name}: {rec['status']} in {rec['seconds']} s, wire {rec['wire_bytes']}")
    return rec


def main():
    ap = argparse.ArgumentParser(prog="run.sh copy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", default="100m-40ms", choices=sorted(bench.LINKS))
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out")
    ap.add_argument("--argv0", default="bash tests/bench/run.sh copy", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("copy: needs root (network namespaces, FUSE); skipped")
        sys.exit(77)
    if not os.environ.get("QFTFS_BENCH_LINK_CMD") and not bench.netem_available():
        print("copy: no link emulator (see run.sh); skipped")
        sys.exit(77)
    backend = "cmd" if os.environ.get("QFTFS_BENCH_LINK_CMD") else "netem"
    build = os.path.abspath(os.environ.get("QFTFS_BUILD", os.path.join(REPO, "build")))
    work = os.path.abspath(os.environ.get("QFTFS_BENCH_DIR", "/var/tmp/qftfs-bench-copy"))
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    ctx = bench.Ctx()
    ctx.outdir = os.path.abspath(args.out or os.path.join(HERE, "results", stamp + "-copy"))
    os.makedirs(ctx.outdir, exist_ok=True)
    bench.LOGF = open(os.path.join(ctx.outdir, "bench.log"), "a")
    ctx.work, ctx.timeout = work, args.timeout
    ctx.srv, ctx.mnt = os.path.join(work, "srv"), os.path.join(work, "mnt")
    ctx.lab = bench.Lab(backend)
    ctx.known_hosts = os.path.join(work, "known_hosts")
    _, ctx.qftfs_client, ctx.qftfs_server = bench.probe_qftfs(build)
    kind, croot = bench.cgroup_root()
    ctx.cg_client = bench.CGroup(kind, croot, f"qftfs-copy-{os.getpid()}")
    local = os.path.join(work, "local")
    os.makedirs(local, exist_ok=True)
    big, image, ten = make_files(os.path.join(ctx.srv, "copy"))
    rest = sys.argv[1:]
    if "--argv0" in rest:
        i = rest.index("--argv0")
        del rest[i:i + 2]
    command = " ".join(args.argv0.split() + rest)
    rtt, rate = bench.LINKS[args.link]
    records, rc = [], 0
    try:
        ctx.lab.up(rtt, rate)
        r = bench.sh(["ssh-keyscan", "-p", str(ctx.lab.port), ctx.lab.host], timeout=30)
        with open(ctx.known_hosts, "w") as f:
            f.write(r.stdout)
        m = bench.Mount(ctx, "qftfs")
        m.argv = bench.mount_argv(ctx, "qftfs")
        _, err = m.mount()
        if err:
            records.append({"name": "mount", "status": err})
            rc = 1
        else:
            try:
                M = lambda p: os.path.join(ctx.mnt, "copy", p)  # noqa: E731
                S = lambda p: os.path.join(ctx.srv, "copy", p)  # noqa: E731
                records.append(one(ctx, "within", ["cp", M("big.img"), M("big2.img")],
                                   big, S("big2.img")))
                records.append(one(ctx, "plain", ["cp", M("ten.img"),
                                   os.path.join(local, "ten.img")], ten,
                                   os.path.join(local, "ten.img")))
                records.append(one(ctx, "sparse", ["cp", "--sparse=always", M("sparse.img"),
                                   os.path.join(local, "sparse.img")], image,
                                   os.path.join(local, "sparse.img")))
            finally:
                m.umount()
    finally:
        ctx.lab.down()
        ctx.cg_client.remove()
        bench.rm_rf(os.path.join(ctx.srv, "copy", "big2.img"))
        bench.rm_rf(local)
    for r in records:
        if r["status"] != "ok" or not r.get("verified"):
            rc = 1
    out = {"command": command, "build": build,
           "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "link": args.link, "host": bench.host_info(), "records": records}
    with open(os.path.join(ctx.outdir, "results.json"), "w") as f:
        json.dump(out, f, indent=1)
    lines = [f"# Server-side copy and holes: {args.link}", "",
             f"Produced by `{command}` ({build}) on {out['date'][:10]}.", "",
             "| copy | status | verified | s | bytes on the wire |", "|---|---|---|---:|---:|"]
    for r in records:
        lines.append(f"| {r['name']} | {r['status']} | {'yes' if r.get('verified') else 'no'} "
                     f"| {r.get('seconds', '–')} | {r.get('wire_bytes', '–')} |")
    with open(os.path.join(ctx.outdir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(rc)


if __name__ == "__main__":
    main()
