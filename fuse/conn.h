/* SPDX-License-Identifier: MIT */
/*
 * The client's connection to one server.
 *
 * Any number of threads call qc_call() at once; each request goes out as
 * soon as it is encoded and the caller sleeps until the reader thread hands
 * it the reply carrying its request id.  That is what keeps many requests in
 * flight on one stream.  The server executes requests in the order they
 * arrive, which the handle allocator relies on (see qc_handle_free).
 *
 * Once the connection fails, every waiter wakes with -EIO and every later
 * call fails at once with -EIO; one line is logged.
 *
 * Lifecycle: qc_conn_new, qc_conn_hello (before mounting, still single
 * threaded), qc_conn_start (after fuse_daemonize, which forks: the reader
 * thread must be created in the process that keeps running), then calls,
 * then qc_conn_shutdown and qc_conn_free.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_CONN_H
#define QC_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "buf.h"
#include "msg.h"

struct qc_conn;

/* A decoded reply.  `msg`'s strings and data point into `frame`, which the
 * reply owns until qc_reply_free. */
struct qc_reply {
	struct qft_msg msg;
	struct qbuf frame;
};

void qc_reply_free(struct qc_reply *rep);

/* Takes ownership of `fd` (a connected stream). */
int qc_conn_new(struct qc_conn **out, int fd);
void qc_conn_free(struct qc_conn *c);

/*
 * Seals the connection with the data plane's keys (auth.h), after the
 * handshake on its descriptor and before qc_conn_hello.  The caller still
 * wipes `keys`.
 */
int qc_conn_set_keys(struct qc_conn *c, enum qft_cipher cipher,
		     const struct qft_session_keys *keys);

/*
 * Version handshake, before qc_conn_start.  Returns 0, -EPROTO with a
 * message for the user in `msg` (the server's own, on a mismatch),
 * -EPIPE when the server closed the stream without answering (it did not
 * start), -ETIMEDOUT, or another error.
 */
int qc_conn_hello(struct qc_conn *c, int timeout_s, char *msg, size_t size);

/* Starts the reader thread. */
int qc_conn_start(struct qc_conn *c);

/*
 * Ends the connection cleanly: no more requests are sent, the server sees
 * end of stream, and this waits (at most `timeout_ms`) for it to close its
 * side, which it does after answering everything.  Wakes all waiters.
 */
void qc_conn_shutdown(struct qc_conn *c, int timeout_ms);

/* True once the connection failed other than by qc_conn_shutdown. */
bool qc_conn_lost(struct qc_conn *c);

/*
 * Sends `req` (its id is assigned here) and waits for the reply.  Returns
 * 0 with *rep filled (free it with qc_reply_free), or a negative errno:
 * the server's status as an errno, -EIO if the connection is gone or the
 * reply is malformed.  On error *rep holds nothing to free.
 */
int qc_call(struct qc_conn *c, struct qft_msg *req, struct qc_reply *rep);

/*
 * Completion of an asynchronous call: err is 0 with `rep` the decoded
 * successful reply, or a negative errno (the server's status, -EIO when the
 * connection is gone or the reply malformed, -ENOMEM) with `rep` NULL.
 *
 * It runs on the reader thread, which no other reply gets past while it
 * runs, so it must be short and must never wait: no qc_call (its reply
 * could never be read), no sleeping on a condition that another reply
 * would satisfy, and no lock that anyone holds while sending (a sender
 * blocked on a full socket waits for the server, which waits for us to
 * read).  It may also run on a sending thread when the connection fails
 * there, and before qc_call_async returns when the request cannot be sent.
 *
 * `rep` is freed after done returns; to keep it, move it out:
 * `mine = *rep; memset(rep, 0, sizeof(*rep));` then qc_reply_free(&mine)
 * later.
 */
typedef void qc_done_fn(void *ctx, int err, struct qc_reply *rep);

/*
 * Sends `req` (its id is assigned here) and returns without waiting for
 * the reply; `done` is called exactly once with the outcome, including
 * when the connection dies or is shut down (-EIO).  Returns 0 when the
 * request went out, or the negative errno it was completed with (done has
 * then already run, on this thread).  So the caller must not hold any lock
 * that `done` takes.  Only after qc_conn_start.  Requests keep their order
 * on the wire with those of qc_call, so the server executes a WRITE sent
 * here before any request sent after this returns.
 */
int qc_call_async(struct qc_conn *c, struct qft_msg *req, qc_done_fn *done,
		  void *ctx);

/*
 * Sends `req` without waiting; the reader discards its reply (logging a
 * failure at debug level).  For CLOSE of handles the kernel released, whose
 * outcome nobody could be told about.
 */
int qc_send_noreply(struct qc_conn *c, struct qft_msg *req);

/*
 * Client-chosen handles, 1..QFT_MAX_HANDLES.  A handle may be reused as soon
 * as its CLOSE (or the failed OPEN that tried to bind it) has been sent: the
 * server executes requests in order, so it sees the CLOSE before any later
 * request that binds the number again.  -EMFILE when all are in use.
 */
int qc_handle_alloc(struct qc_conn *c, uint64_t *handle);
void qc_handle_free(struct qc_conn *c, uint64_t handle);

#endif /* QC_CONN_H */
