// SPDX-License-Identifier: MIT
/* Request loop (see loop.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "loop.h"
#include "ops.h"

static void log_malformed(const struct qft_hdr *h)
{
	char op[16];
	const char *name = qft_op_name(h->op);

	if (strcmp(name, "?") == 0) {
		snprintf(op, sizeof(op), "%u", h->op);
		name = op;
	}
	qft_err("closing connection: malformed frame (op %s id %llu)", name,
		(unsigned long long)h->id);
}

int srv_loop_run(struct srv *s)
{
	for (;;) {
		struct qft_msg req;
		struct qft_hdr h;
		int r;

		memset(&h, 0, sizeof(h));
		r = qft_chan_recv(&s->chan, &s->in, &h);
		if (r == -EPIPE) {
			qft_debug("end of stream: client is done");
			return 0;
		}
		if (r == -EBADMSG && s->chan.rx && s->chan.rx->failed) {
			/* Nothing of it was applied; no word to the peer. */
			qft_err("closing connection: a record failed "
				"authentication (corrupted, replayed or forged)");
			return r;
		}
		if (r == -EBADMSG || r == -ENOSYS) {
			/* The header was read, so op and id are there to log. */
			log_malformed(&h);
			return -EBADMSG;
		}
		if (r == -EIO) {
			qft_err("closing connection: stream ended inside a frame");
			return r;
		}
		if (r < 0) {
			qft_err("closing connection: receive failed: %s",
				strerror(-r));
			return r;
		}
		/* A reply has no business travelling to the server. */
		if (h.flags & QFT_F_REPLY) {
			log_malformed(&h);
			return -EBADMSG;
		}

		r = qft_msg_decode(&req, s->in.data, s->in.len);
		if (r == -EINVAL && s->hello_done) {
			/* Well framed but invalid (a name with '/', unknown
			 * flags): refuse this request, keep the connection. */
			qft_debug("%s id %llu: invalid request",
				  qft_op_name(h.op), (unsigned long long)h.id);
			r = srv_op_reply_error(s, h.op, h.id, EINVAL,
					       "invalid request: bad name, "
					       "path, flags or value");
			if (r < 0)
				return r;
			continue;
		}
		if (r == -EINVAL) {
			qft_err("closing connection: invalid %s before HELLO",
				qft_op_name(h.op));
			return -EPROTO;
		}
		if (r < 0) {
			log_malformed(&h);
			return r;
		}
		if ((r = srv_op_dispatch(s, &req)) < 0)
			return r;
	}
}
