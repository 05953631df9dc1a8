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
