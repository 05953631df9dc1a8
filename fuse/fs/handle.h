/* SPDX-License-Identifier: MIT */
/*
 * The open-handle base of an open file or directory (struct qc_file,
 * file.h): its lifetime, its handle on a link and re-opening it after a
 * reconnect.
 */
#ifndef QC_HANDLE_H
#define QC_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

struct qc_fs;
struct qc_file;
struct qc_reply;
struct qft_attr;
struct qft_msg;
struct qn_node;

/* Once no request can refer to f any more (f->async == 0). */
void qc_file_free(struct qc_file *f);

/*
 * The OPEN or CREATE flags for host open flags `oflags` (from which the
 * caller removed what the request must not carry): with QFT_O_LAZY when
 * the file is opened for writing and close() will not wait for its data
 * to be durable (commit=async, commit=none), so that the server does not
 * pace its WRITEs to its disk.  fsync() still syncs (FSYNC).
 */
uint32_t qc_file_oflags(const struct qc_fs *fs, int oflags);

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

/* A change through f (truncation; with `written`, data) that the next
 * FLUSH must make durable. */
void qc_file_changed(struct qc_file *f, bool written);

#endif /* QC_HANDLE_H */
