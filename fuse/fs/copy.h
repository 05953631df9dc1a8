/* SPDX-License-Identifier: MIT */
/*
 * Server-side copy and holes (qc_copy_): what copy_file_range(2) and
 * lseek(2) with SEEK_DATA / SEEK_HOLE do on a mount whose server granted
 * QFT_FEAT_COPY and QFT_FEAT_HOLES (docs/architecture.md, "What cp within
 * the mount does").
 *
 * A copy sends one COPY on the bulk stream, behind every WRITE sent
 * before it, after the source's and the destination's own changes in
 * flight were answered (so an error of theirs is reported instead of a
 * copy of what the server may not have); the server copies with its own
 * copy_file_range.  Afterwards the destination's read-ahead streams are
 * dropped and its size and mtime noted, so that the next read and the
 * next open see the new bytes (the kernel drops its own pages of the
 * range and updates the size after the reply).
 *
 * A seek needs nothing flushed: the SEEK goes behind the WRITEs already
 * sent on the same stream, which the server executes first.  Nothing is
 * cached.
 *
 * Without the feature (an older server) a copy is -EOPNOTSUPP, which the
 * kernel turns into its own copy through reads and writes, and a seek is
 * answered from the file's size as the server has it (data up to the
 * end, one hole there), which is what every file system without hole
 * tracking answers.
 *
 * Error convention: 0 or a negative errno, what the user should see.
 */
#ifndef QC_COPY_H
#define QC_COPY_H

#include <stdbool.h>
#include <stdint.h>

struct qc_fs;
struct qc_file;

/*
 * Copies up to `len` bytes (at most QFT_MAX_COPY) from `in` at `off_in`
 * to `out` at `off_out` on the server: *copied bytes, fewer at the
 * source's end (0 past it).
 */
int qc_copy_range(struct qc_fs *fs, struct qc_file *in, uint64_t off_in,
		  struct qc_file *out, uint64_t off_out, uint64_t len,
		  uint64_t *copied);

/* What SEEK_DATA (`hole` false) or SEEK_HOLE from `off` finds in a file
 * of `size` bytes without holes: *res, or -ENXIO past its end. */
int qc_copy_seek_solid(uint64_t size, uint64_t off, bool hole,
		       uint64_t *res);

/* SEEK_DATA (`hole` false) or SEEK_HOLE from `off` in f: *res, or
 * -ENXIO when there is no such place at or after off. */
int qc_copy_seek(struct qc_fs *fs, struct qc_file *f, uint64_t off,
		 bool hole, uint64_t *res);

#endif /* QC_COPY_H */
