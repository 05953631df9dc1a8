/* SPDX-License-Identifier: MIT */
/*
 * Request handlers: one per opcode, dispatched through a table.  Each
 * validates its request completely before acting, returns 0 or a negative
 * errno, and the dispatcher turns that into the reply's status.
 */
#ifndef SRV_OPS_H
#define SRV_OPS_H

#include <stdint.h>

#include "msg.h"
#include "srv.h"

/*
 * Executes `req` and sends its reply.  Returns 0 to go on serving, or a
 * negative errno when the connection must close (send failure, a request
 * before HELLO, a version mismatch).
 */
int srv_op_dispatch(struct srv *s, const struct qft_msg *req);

/* Encodes and sends a reply built elsewhere (xfer.c's completions). */
int srv_op_reply(struct srv *s, const struct qft_msg *rep);

/* Sends an error reply to request (op, id) with an optional message. */
int srv_op_reply_error(struct srv *s, uint16_t op, uint64_t id, int err,
		       const char *msg);

/*
 * A resumable lane's connection is gone (a send failed, or a test drops
 * it): it is shut down, and replies are kept, not sent, until the lane
 * resumes (replay.h).
 */
void srv_op_link_down(struct srv *s);

#endif /* SRV_OPS_H */
