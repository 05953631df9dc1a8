/* SPDX-License-Identifier: MIT */
/*
 * Pipelined steps of an open file (struct qc_file, file.h): a CREATE,
 * OPEN or SETATTR sent through the handle and answered to the kernel
 * before the server did.  They count as changes in flight of the handle
 * base like WRITEs (handle.h), so the next flush or fsync waits for them
 * and reports their first error, which is sticky (a refused CREATE or
 * OPEN also fails the file).
 *
 * The one rule of this module: while `predicted` is set, `attr` is what
 * the kernel is told about the file -- the attributes the client
 * predicts, with a validity of 0 so that it asks again.  It holds while
 * a step is unanswered, and while a commit=async FLUSH is in flight
 * (commit.c tells through qc_step_flush_begin/done): WRITEs through the
 * file keep it current (qc_step_note_write), and nothing outside this
 * file sets or reads it but through these functions.
 *
 * Every function on a file takes or requires (where said) the file's
 * lock; the mount's count of CREATEs in flight has its own (struct
 * qc_steps), taken after a file's.
 */
#ifndef QC_STEPS_H
#define QC_STEPS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

struct qc_fs;
struct qc_file;
struct qft_msg;
struct qn_node;

/* A file's pipelined steps; every field: the file's lock. */
struct qc_steps_file {
	unsigned steps;         /* steps not answered yet */
	bool creating;          /* a pipelined CREATE not answered yet */
	unsigned flushes;       /* commit=async FLUSHes in flight, during
				 * which `attr` holds as well */
	bool predicted;         /* `attr` is what the kernel is told */
	struct qft_attr attr;   /* valid while `predicted` */
	uint64_t wend;          /* furthest end of a WRITE through the file */
	/* a pipelined SETATTR set the mtime after the file's last WRITE,
	 * so `attr` holds with WRITEs in flight too: they execute before
	 * it, and their sizes are counted in `attr` already */
	bool mtime_set;
};

/* The mount's (struct qc_fs.steps): pipelined CREATEs not answered yet,
 * all files (qc_step_settle). */
struct qc_steps {
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* lock: creates fell to 0 */
	uint64_t creates;       /* lock */
};

void qc_step_init(struct qc_steps *sm);
void qc_step_destroy(struct qc_steps *sm);

/*
 * Lock held: a WRITE through f ending at `end` is about to be sent: the
 * predicted attributes, if any, grow to it and take its mtime.
 */
void qc_step_note_write(struct qc_file *f, uint64_t end);
/*
 * Lock held: the largest size the WRITEs and pipelined steps through f
 * can have given the file (0 when none did): what a file it is still
 * writing may be, at most, on a new server (fs/rebind.c).
 */
uint64_t qc_step_size_bound(struct qc_file *f);
/*
 * Lock held: a commit=async FLUSH of f is sent; until qc_step_flush_done
 * the kernel is told the size the WRITEs make, starting from `last` (the
 * node's last known attributes, or NULL) when nothing is predicted yet.
 */
void qc_step_flush_begin(struct qc_file *f, const struct qft_attr *last);
void qc_step_flush_done(struct qc_file *f);
/* Lock held: the commit=async FLUSHes of f in flight (between the two
 * calls above). */
unsigned qc_step_flushes(struct qc_file *f);

/*
 * Sends `m` (a CREATE that binds f's handle, or a SETATTR) through f
 * without waiting, with `a` as the attributes f has once the server
 * executed it; the kernel is answered with `a` (validity 0) until every
 * step is answered.  0, or the -errno it failed with at once (f is then
 * unchanged, or for a CREATE failed).
 */
int qc_step_send(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
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
void qc_step_settle(struct qc_fs *fs);

/*
 * The attributes the client predicts for `n` through one of its open
 * files with pipelined steps unanswered and no WRITE in flight (or only
 * WRITEs before a SETATTR of the mtime: tar's futimens, then the fchown
 * whose suid check makes the kernel ask); false when there is none (ask
 * the server).
 */
bool qc_step_predicted(struct qc_fs *fs, struct qn_node *n,
		       struct qft_attr *out);

/*
 * f is released (detached from its node) with steps maybe unanswered:
 * what they make the file stays the node's attributes (qn_note_fresh)
 * until their answers or a later change replace it, as it was while f
 * was open -- rsync's open of the file it just wrote and set the times
 * of, by path, waits for nothing whether the RELEASE came before the
 * SETATTR's answer or after.  No lock held.
 */
void qc_step_release(struct qc_fs *fs, struct qc_file *f);

/*
 * The attributes `n` will have once SETATTR `m` is executed, predicted
 * from f: its pipelined attributes, else the node's last known ones when
 * nothing is in flight through f.  False when they cannot be known (a
 * truncation, or nothing known): the SETATTR must wait for the server.
 */
bool qc_step_predict_setattr(struct qc_fs *fs, struct qc_file *f,
			     const struct qft_msg *m, struct qft_attr *out);

/*
 * A change the server answered outside the steps (an ACL written through
 * system.posix_acl_access sets the mode) made the object's mode, owner
 * and ctime `a`'s: the predictions of n's open files take them, so that
 * what the kernel is told until their steps are answered is not the mode
 * from before.
 */
void qc_step_note_owner_mode(struct qc_fs *fs, struct qn_node *n,
			     const struct qft_attr *a);

/* What SETATTR `m` (no size) makes of attributes `a`. */
void qc_step_apply_setattr(const struct qft_msg *m, struct qft_attr *a);

#endif /* QC_STEPS_H */
