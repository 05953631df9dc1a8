#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes SIZE bytes of JSON-like text (one object per line, like a log or
telemetry export) to OUT.  The output depends only on SIZE: the generator is
seeded with a constant, so two machines produce byte-identical files and the
compression ratio is the same everywhere (`lz4 -1` shrinks it about 4.5x).

    gen_json.py SIZE_BYTES OUT
"""
import random
import sys

SEED = 0x9f7f5  # fixed: the file must be reproducible

HOSTS = [f"node-{i:03d}.lab.example" for i in range(64)]
LEVELS = ["DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"]
UNITS = ["rauc", "systemd-networkd", "kernel", "sshd", "app-sensor",
         "app-uploader", "watchdog", "ntpd"]
WORDS = ("bundle slot rootfs boot verify mount update install checksum "
         "partition download image firmware sensor reading temperature "
         "voltage current link carrier timeout retry session client server "
         "write read block device sector queue flush sync complete failed "
         "started stopped ready waiting").split()


def records(rng):
    # Repetitive keys, a few hosts/units, templated messages and low-entropy
    # numbers, as in real telemetry exports; random hex ids and long floats
    # would make it barely compressible.
    seq = 0
    ts = 1_700_000_000_000
    msgs = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 9)))
            for _ in range(48)]
    while True:
        seq += 1
        ts += rng.randrange(1, 200)
        vals = ",".join(str(rng.randrange(200, 260) / 10)
                        for _ in range(rng.randrange(1, 4)))
        yield (f'{{"seq":{seq},"ts":{ts},"host":"{rng.choice(HOSTS)}",'
               f'"unit":"{rng.choice(UNITS)}","level":"{rng.choice(LEVELS)}",'
               f'"msg":"{rng.choice(msgs)}","values":[{vals}],'
               f'"session":"s-{rng.randrange(16):02d}"}}\n')


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gen_json.py SIZE_BYTES OUT")
    size = int(sys.argv[1])
    rng = random.Random(SEED)
    left = size
    with open(sys.argv[2], "wb") as out:
        buf = []
        held = 0
        for rec in records(rng):
            b = rec.encode()
            if len(b) >= left - held:
                buf.append(b[:left - held])
                break
            buf.append(b)
            held += len(b)
            if held >= 1 << 20:
                out.write(b"".join(buf))
                left -= held
                buf, held = [], 0
        out.write(b"".join(buf))


if __name__ == "__main__":
    main()
