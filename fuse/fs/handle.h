/* SPDX-License-Identifier: MIT */
/*
 * The open-handle base of an open file or directory (the first fields of
 * struct qc_file, file.h): its lifetime (references through its node,
 * async calls, freeing after the last one), its handle on a link and
 * re-opening it after a reconnect, and the changes sent through it with
 * their sticky error.  Streams, commit, pipelined steps and directories
 * build on it; it calls none of them, only the hooks the file was made
 * with (qc_file_hooks), which is how their state goes with the handle.
 *
 * Features read the base's fields under the file's lock but write them
 * only through these functions.  "Lock held" means the file's lock; the
 * functions that say so check it (qc_file_assert_locked).
 *
 * Error convention: 0 or a negative errno, already what a user should
 * see (qc_conn_user_err) unless said otherwise.
 */
#ifndef QC_FS_HANDLE_H
#define QC_FS_HANDLE_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "thread.h"

struct qc_fs;
struct qc_file;
struct qc_reply;
struct qft_attr;
struct qft_msg;
struct qn_node;

/*
 * What the features above the base do with their part of a file when
 * the base changes it (file.c sets them for every file).
 */
struct qc_file_hooks {
	/* Lock held: f's handle is gone -- closed, or re-opened on a new
	 * link -- and with it what was asked for through it. */
	void (*handle_gone)(struct qc_file *f);
	/* f is freed: nothing refers to it any more, no lock needed. */
	void (*fini)(struct qc_file *f);
};

/* Requires f's lock held (thread.h). */
#define qc_file_assert_locked(f) qft_assert_locked(&(f)->lock)

/*
 * Every file of a mount from qc_file_init to qc_file_free (handle.c's
 * alone): what a session carried over to a new server binds again
 * (fs/rebind.h).  Lock order: this lock, then a file's.
 */
struct qc_file_reg {
	pthread_mutex_t lock;
	struct qc_file *head;   /* lock: through qc_file.reg_next */
	size_t n;               /* lock */
};
void qc_file_reg_init(struct qc_file_reg *reg);
void qc_file_reg_destroy(struct qc_file_reg *reg);

/*
 * Sets up the base of f (zeroed by the caller) for mount `fs`, opened
 * with open(2) flags `oflags`, with the features' `hooks` (immutable,
 * outliving f).  No handle yet: gen 0.
 */
void qc_file_init(struct qc_file *f, struct qc_fs *fs, bool dir, int oflags,
		  const struct qc_file_hooks *hooks);
/* Once no request can refer to f any more (f->async == 0): runs the fini
 * hook and frees f.  A sticky error nobody collected is logged. */
void qc_file_free(struct qc_file *f);

/* Binds f to handle number `handle` of link `gen` (the OPENDIR a lazily
 * opened directory skipped, or the start of an open). */
void qc_file_bind(struct qc_file *f, uint64_t gen, uint64_t handle);

/*
 * The OPEN or CREATE flags for host open flags `oflags` (from which the
 * caller removed what the request must not carry): with QFT_O_LAZY when
 * the file is opened for writing and close() will not wait for its data
 * to be durable (commit=async, commit=none), so that the server does not
 * pace its WRITEs to its disk.  fsync() still syncs (FSYNC).
 */
uint32_t qc_file_oflags(const struct qc_fs *fs, int oflags);

/* Lock held: one more async call (or reader, or deferred close) that
 * refers to f; qc_file_async_done ends it. */
void qc_file_hold(struct qc_file *f);
/*
 * Completes one async call of f: wakes whoever waits for it, releases the
 * lock (held on entry), and frees f if it was released and this was its
 * last call.  f must not be touched after this.
 */
void qc_file_async_done(struct qc_file *f);

/* After the last reference: CLOSE the handle, free f once its calls are
 * done. */
void qc_file_close(struct qc_fs *fs, struct qc_file *f);
/* Drops a borrower's reference (f may be NULL), or the kernel's. */
void qc_file_put(struct qc_fs *fs, struct qc_file *f);
/* The kernel's reference now, whatever commit=async would defer. */
void qc_file_release_now(struct qc_fs *fs, struct qc_file *f);

/*
 * The handle (and its link) to send a request of f on, re-opening f on a
 * new link after its own is gone, when nothing written through it can
 * have been lost (else f fails for good with EIO).
 */
int qc_file_handle(struct qc_fs *fs, struct qc_file *f, uint64_t *gen,
		   uint64_t *handle);
/*
 * The files of link `gen` not closing, each held (qc_file_hold) so that
 * none is freed while the caller works on it; give each hold back with
 * qc_file_async_done (lock taken), then free the array.  NULL when out
 * of memory: every such file failed with EIO instead.
 */
struct qc_file **qc_file_hold_gen(struct qc_fs *fs, uint64_t gen, size_t *n);
/*
 * Lock held: something written through f may not be on the server's
 * disk (data no FLUSH or FSYNC covered, changes in flight, a sticky
 * error).
 */
bool qc_file_unsynced(struct qc_file *f);

/* qc_call on the handle of f, re-opened first if its link was replaced. */
int qc_file_call(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
		 struct qc_reply *rep);

/*
 * After a failed OPEN or OPENDIR of `path` for node `n` with error `r`:
 * ESTALE when the name now leads to another type of object, else `r` as
 * a user sees it.
 */
int qc_file_open_error(struct qc_fs *fs, struct qn_node *n,
		       const char *path, int r);

/* Whether WRITEs sent through f on the live link are still unanswered. */
bool qc_file_writes_in_flight(struct qc_fs *fs, struct qc_file *f);
/*
 * An open file of `n` with WRITEs or steps in flight, borrowed (give it
 * back with qc_file_put), or NULL: what a request about n must queue
 * behind on the bulk stream to see their effects (conn.h, "Two
 * streams").
 */
struct qc_file *qc_file_borrow_busy(struct qc_fs *fs, struct qn_node *n);
/*
 * For an FSTAT of `n` that must see the WRITEs in flight of any of its
 * open files: an open file of n on the live link, borrowed (qc_file_put),
 * when one of them has WRITEs or steps in flight; else NULL.  Not for a
 * request whose outcome counts against the handle (a SETATTR step):
 * the file may be another than the one writing, opened read-only.
 */
struct qc_file *qc_file_borrow_behind(struct qc_fs *fs, struct qn_node *n);

/*
 * The attributes of `n` as an FSTAT through an open handle of it with
 * WRITEs in flight sees them (false when there is none, or it fails or
 * names another object than `a`).
 */
bool qc_file_attr_behind_writes(struct qc_fs *fs, struct qn_node *n,
				const struct qft_attr *a,
				struct qft_attr *out);

/*
 * What a request of f that failed with `r` reports: the error of a
 * pipelined OPEN or CREATE that failed f, if one did (the request was
 * sent behind it and met a handle the server never bound), else `r`.
 */
int qc_file_error(struct qc_file *f, int r);
/* Lock held: f fails for good with `err` (< 0), unless it failed already. */
void qc_file_fail(struct qc_file *f, int err);

/* A change through f (truncation; with `written`, data) that the next
 * FLUSH must make durable. */
void qc_file_changed(struct qc_file *f, bool written);

/*
 * Changes in flight.  Lock held: begin counts one about to be sent (with
 * `data`, a change of the file's data the next FLUSH must cover, which
 * also marks f written) and holds f for its completion, or returns the
 * sticky error that forbids it; done counts it answered with `err` (0 or
 * -errno), the first error staying sticky.
 */
int qc_file_change_begin(struct qc_file *f, bool data);
void qc_file_change_done(struct qc_file *f, int err);
/* Lock held: the sticky error, now reported (cleared). */
int qc_file_take_err(struct qc_file *f);
/* Lock held: f is not written since the FLUSH just sent. */
void qc_file_clear_written(struct qc_file *f);
/* Lock held: a FLUSH or FSYNC sent when f had made `mods` changes
 * succeeded. */
void qc_file_note_durable(struct qc_file *f, uint64_t mods);

/* What a FLUSH or FSYNC sent now covers, read at once. */
struct qc_file_mark {
	uint64_t issued;        /* changes sent so far: collect those */
	uint64_t mods;          /* data changes counted so far */
	int err;                /* the sticky error */
	int failed;             /* f failed for good (or 0) */
	bool written;           /* data not covered by a FLUSH or FSYNC yet */
	bool pending;           /* changes not answered yet */
};
/* Takes the lock; with `flush`, f counts as not written since. */
void qc_file_mark(struct qc_file *f, bool flush, struct qc_file_mark *mk);
/*
 * Waits until the changes among the first `issued` are answered and
 * returns the sticky error (cleared with `clear`).  No lock held.
 */
int qc_file_collect(struct qc_file *f, uint64_t issued, bool clear);

#endif /* QC_FS_HANDLE_H */
