/* SPDX-License-Identifier: MIT */
/*
 * The FUSE low-level operations: each one turns a kernel request into
 * protocol requests on the connection and the reply into a kernel reply.
 * Every failure reaches the kernel as the errno the server reported (or
 * EIO when the connection is gone); nothing answers ENOSYS that a program
 * would see as a failed close() or fsync().
 *
 * Bulk data moves in streams (fs/writebehind.c, fs/readahead.c, in
 * struct qc_file of file.h):
 * writes are answered once their WRITE is sent, within a window of
 * unacknowledged bytes, and their errors are kept for the next write,
 * fsync or close; sequential reads are served from READs sent ahead of
 * the reader.  The filesystem's state is struct qc_fs (fs.h).
 *
 * The callbacks are grouped by kind in fuse/ops/: entries.c (names),
 * attrs.c, files.c, dirs.c and xattrs.c, which also answers the mount's
 * own attributes (stats.h, commit.h) and decides who may read them.
 */
#ifndef QC_OPS_H
#define QC_OPS_H

#include <fuse_lowlevel.h>

#include "fs/fs.h"

extern const struct fuse_lowlevel_ops qc_ops;

#endif /* QC_OPS_H */
