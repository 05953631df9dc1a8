#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""randread.py FILE REFERENCE SECONDS: 4 KiB reads at random block offsets
of FILE (through a mount), one at a time, for SECONDS; each block is
compared with the same block of REFERENCE (a local copy).  Prints one
JSON object: reads, bytes, seconds, mb_s, iops, ms_per_read, mismatches.

What fio --rw=randread --bs=4k --iodepth=1 --ioengine=psync measures, with
its default fadvise hint (POSIX_FADV_RANDOM: no kernel read-ahead), in a
form that needs nothing but Python and checks every byte it reads."""
import json
import os
import random
import sys
import time

BLOCK = 4096
SEED = 9


def main():
    path, ref, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    fd = os.open(path, os.O_RDONLY)
    rfd = os.open(ref, os.O_RDONLY)
    size = os.fstat(fd).st_size
    if size != os.fstat(rfd).st_size or size < BLOCK:
        print(json.dumps({"error": f"sizes differ or too small: {size}"}))
        return 1
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    rng = random.Random(SEED)
    blocks = size // BLOCK
    reads = mismatches = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        off = rng.randrange(blocks) * BLOCK
        got = os.pread(fd, BLOCK, off)
        reads += 1
        # The reference is a local file: its read is not part of what is
        # measured in any way that matters next to a network round trip,
        # but it is kept outside the timed read all the same.
        if got != os.pread(rfd, BLOCK, off):
            mismatches += 1
    secs = time.monotonic() - t0
    os.close(fd)
    os.close(rfd)
    print(json.dumps({"reads": reads, "bytes": reads * BLOCK,
                      "seconds": round(secs, 3),
                      "mb_s": round(reads * BLOCK / secs / 1e6, 3),
                      "iops": round(reads / secs, 1),
                      "ms_per_read": round(secs / reads * 1000, 3),
                      "mismatches": mismatches}))
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
