/* SPDX-License-Identifier: MIT */
/*
 * Pipelined steps of an open file (struct qc_file, file.h): a CREATE,
 * OPEN or SETATTR answered to the kernel before the server did.
 */
#ifndef QC_STEPS_H
#define QC_STEPS_H

#include <stdbool.h>

struct qc_fs;
struct qc_file;
struct qft_attr;
struct qft_msg;
struct qn_node;

/*
 * Sends `m` (a CREATE that binds f's handle, or a SETATTR) through f
 * without waiting, with `a` as the attributes f has once the server
 * executed it; the kernel is answered with `a` (validity 0) until every
 * step is answered.  0, or the -errno it failed with at once (f is then
 * unchanged, or for a CREATE failed).
 */
int qc_file_step(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
		 const struct qft_attr *a);

/*
 * Waits until every pipelined CREATE of the mount is answered.  Requests
 * on the meta stream that name a path (unlink, rename, link, xattrs)
 * call it first: the server might otherwise run them before a CREATE
 * queued on the bulk stream and not find the name.  Free when none is
 * in flight, which is the rule: creates are answered within a round
 * trip, and a tree copy closes each file before the next rename.
 * A fetch that feeds the directory cache (qc_dir_fetch_begin) begins
 * before it settles, never after: a create counted after the settle
 * then spoils the fetch, which may overtake that CREATE.
 */
void qc_file_settle(struct qc_fs *fs);

/*
 * The attributes the client predicts for `n` through one of its open
 * files with pipelined steps unanswered and no WRITE in flight (or only
 * WRITEs before a SETATTR of the mtime: tar's futimens, then the fchown
 * whose suid check makes the kernel ask); false when there is none (ask
 * the server).
 */
bool qc_file_predicted(struct qc_fs *fs, struct qn_node *n,
		       struct qft_attr *out);

/*
 * The attributes `n` will have once SETATTR `m` is executed, predicted
 * from f: its pipelined attributes, else the node's last known ones when
 * nothing is in flight through f.  False when they cannot be known (a
 * truncation, or nothing known): the SETATTR must wait for the server.
 */
bool qc_file_predict_setattr(struct qc_fs *fs, struct qc_file *f,
			     const struct qft_msg *m, struct qft_attr *out);

/* What SETATTR `m` (no size) makes of attributes `a`. */
void qc_file_apply_setattr(const struct qft_msg *m, struct qft_attr *a);

#endif /* QC_STEPS_H */
