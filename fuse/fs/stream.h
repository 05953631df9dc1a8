/* SPDX-License-Identifier: MIT */
/*
 * The mount's streams (qc_stream_): the estimates of the bulk stream's
 * two directions, shared by every open file because they all share the
 * mount's link, and whether the write-behind window (writebehind.h) and
 * the read-ahead (readahead.h) are sized from them.
 */
#ifndef QC_STREAM_H
#define QC_STREAM_H

#include <stdbool.h>

#include "fs/bdp.h"

struct qc_fs;

/*
 * The mount's streams (struct qc_fs.streams), owned by this module: the
 * link-measured estimates of WRITE (up) and read-ahead READ (down) calls,
 * and whether the window and read-ahead are sized from them.
 */
struct qc_streams {
	struct qc_bdp up;
	struct qc_bdp down;
	bool window_auto;       /* set once before the mount serves */
	bool ra_auto;           /* ... (qc_stream_set_auto) */
};

/* The estimates' locks, nothing measured; leaves the auto settings (which
 * the options may have made already). */
void qc_stream_init(struct qc_streams *sm);
void qc_stream_destroy(struct qc_streams *sm);

/*
 * Whether the mount sizes its write-behind window and read-ahead from the
 * measured products (the size was not given with -o window= / -o
 * readahead=); fs->window / fs->readahead are then the ceiling.
 */
void qc_stream_set_auto(struct qc_fs *fs, bool window, bool readahead);

#endif /* QC_STREAM_H */
