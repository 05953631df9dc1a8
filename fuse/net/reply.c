// SPDX-License-Identifier: MIT
/*
 * Replies: decoding and checking one against its request, and giving its
 * frame back (call.h, qc_reply).
 */
#include <errno.h>
#include <string.h>

#include "errmap.h"
#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"

/* Frees a reply frame, or gives its buffer back to the pool it is from. */
void qc_reply_frame_free(struct qbuf *frame, struct qft_pool **pool)
{
	if (*pool) {
		qft_pool_put(*pool, frame->data);
		memset(frame, 0, sizeof(*frame));
		*pool = NULL;
	} else {
		qbuf_free(frame);
	}
}

void qc_reply_free(struct qc_reply *rep)
{
	qc_reply_frame_free(&rep->frame, &rep->pool);
}

int qc_reply_check(uint16_t op, struct qc_reply *rep)
{
	struct qft_msg *m = &rep->msg;
	int r;

	r = qft_msg_decode(m, rep->frame.data, rep->frame.len);
	if (r < 0) {
		qft_err("malformed %s reply from the server: %s",
			qft_op_name(op), strerror(-r));
		return -EIO;
	}
	if (m->op != op) {
		qft_err("server answered a %s request with %s",
			qft_op_name(op), qft_op_name(m->op));
		return -EIO;
	}
	if (m->status != QFT_OK) {
		r = qft_errno_from_status(m->status);
		if (m->errmsg.len)
			qft_debug("%s: %s (%s)", qft_op_name(op),
				  strerror(r), m->errmsg.s);
		return -r;
	}
	return 0;
}

int qc_readdir_check(const struct qft_blob *data, bool plus)
{
	struct qft_dirent d;
	struct qcur c;
	int n = 0, r;

	qcur_init(&c, data->p, data->len);
	while (c.left) {
		r = qft_dirent_decode(&c, &d, plus);
		if (r < 0) {
			qft_err("malformed READDIR reply from the server: %s",
				strerror(-r));
			return -EIO;
		}
		n++;
	}
	return n;
}
