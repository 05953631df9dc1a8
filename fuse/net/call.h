/* SPDX-License-Identifier: MIT */
/*
 * Calls on the connection (net/conn.h, which includes this): sending a
 * request and getting its reply, waited for, completed by a callback, or
 * dropped; and the replies they hand out.  conn.h says which link and
 * which stream a request goes on.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_CALL_H
#define QC_CALL_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "msg.h"
#include "pool.h"

struct qc_conn;

/* A decoded reply.  `msg`'s strings and data point into `frame`, which the
 * reply owns until qc_reply_free: a large one is a buffer of the
 * connection's receive pool (`pool`), which qc_reply_free gives back, so
 * a reply must be freed with it (it may outlive the connection). */
struct qc_reply {
	struct qft_msg msg;
	struct qbuf frame;
	struct qft_pool *pool;  /* the pool frame.data goes back to, or NULL */
};

void qc_reply_free(struct qc_reply *rep);

/*
 * The caller the requests this thread sends act for (QFT_F_CRED), where
 * the link agreed on QFT_FEAT_CRED (qc_conn_opts.want_cred): like a
 * thread's credentials in the kernel, set by the FUSE callback it serves
 * for as long as it runs (fuse/ops/caller.c), NULL otherwise.  `c` must
 * stay valid until it is replaced.  A request that names its own caller
 * (QFT_F_CRED set in qft_msg.flags: a reopen for the file's opener)
 * keeps it; on a link that did not agree, nothing is sent either way.
 */
void qc_call_act_as(const struct qft_cred *c);
/* The caller set on this thread, or NULL. */
const struct qft_cred *qc_call_caller(void);

/*
 * Checks every entry of a READDIR reply's data before any is used: each
 * must decode (a valid name, or "." or ".."; attributes only when `plus`
 * asked for them).  Returns the number of entries, or -EIO after logging
 * the first malformed one.  Pure: tests/fuzz/fuzz_client.c calls it.
 */
int qc_readdir_check(const struct qft_blob *data, bool plus);

/*
 * Sends `req` (its id is assigned here) on the live link, waiting for one
 * as qc_conn_wait does, and waits for the reply.  Returns 0 with *rep
 * filled (free it with qc_reply_free), or a negative errno: the server's
 * status as an errno, -EIO if there is no link, the link died before the
 * reply, or the reply is malformed.  On error *rep holds nothing to free.
 * For requests that name no handle.
 */
int qc_call(struct qc_conn *c, struct qft_msg *req, struct qc_reply *rep);

/*
 * The same on link `gen` only: -ENOTCONN, without sending, when that is
 * not the live link.  For requests that name a handle of that link.
 */
int qc_call_gen(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		struct qc_reply *rep);

/*
 * qc_call_gen on link `gen`'s bulk stream, whatever `req` is: behind
 * everything sent there before it (the WRITEs, pipelined steps and
 * FLUSHes of open files), which the server completes before it acts on a
 * request that is neither READ nor WRITE.  For a path request that must
 * find their effects, or must not be undone by them.
 */
int qc_call_behind(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		   struct qc_reply *rep);

/*
 * Completion of an asynchronous call: err is 0 with `rep` the decoded
 * successful reply, or a negative errno (the server's status, -EIO when
 * the reply is malformed, -ENOTCONN when the link was lost before the
 * reply came or was not the live one, -ENOMEM) with `rep` NULL.
 *
 * It runs on a link's reader thread, which no other reply gets past while
 * it runs, so it must be short and must never wait: no qc_call (its reply
 * could never be read), no sleeping on a condition that another reply
 * would satisfy, and no lock that anyone holds while sending (a sender
 * blocked on a full socket waits for the server, which waits for us to
 * read).  It may also run on the thread that failed the link (a sender or
 * the watchdog), and before qc_call_async returns when the request cannot
 * be sent.
 *
 * `rep` is freed after done returns; to keep it, move it out:
 * `mine = *rep; memset(rep, 0, sizeof(*rep));` then qc_reply_free(&mine)
 * later.
 */
typedef void qc_done_fn(void *ctx, int err, struct qc_reply *rep);

/*
 * Sends `req` (its id is assigned here) on link `gen` and returns without
 * waiting for the reply; `done` is called exactly once with the outcome,
 * including when the link dies or is shut down.  Returns 0 when the
 * request went out, or the negative errno it was completed with (done has
 * then already run, on this thread).  So the caller must not hold any lock
 * that `done` takes.  Only after qc_conn_start.  Requests keep their order
 * on the wire with those of qc_call, so the server executes a WRITE sent
 * here before any request sent after this returns.
 */
int qc_call_async(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		  qc_done_fn *done, void *ctx);

/*
 * qc_call_async on link `gen`'s bulk stream (a request that names a path
 * and no handle), in order with everything sent there before it -- the
 * pipelined CREATEs, WRITEs and FLUSHes of open files -- and ahead of
 * every synchronous request on the meta stream sent after it returns:
 * those wait until it is completed.  For path requests answered before
 * the server did (commit=async, commit.h).
 */
int qc_call_ordered(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		    qc_done_fn *done, void *ctx);

/*
 * Sends `req` on link `gen` without waiting; the reader discards its reply
 * (logging a failure at debug level).  For CLOSE of handles the kernel
 * released, whose outcome nobody could be told about.  -ENOTCONN when that
 * link is gone (and with it the handle).
 */
int qc_send_noreply(struct qc_conn *c, uint64_t gen, struct qft_msg *req);

#endif /* QC_CALL_H */
