// SPDX-License-Identifier: MIT
/* Request loop (see loop.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "cred.h"
#include "log.h"
#include "loop.h"
#include "ops.h"
#include "pulse.h"
#include "replay.h"
#include "resume.h"
#include "xfer.h"

/* A poll timeout, as insurance: should the ring ever hold an operation
 * back without signalling, the loop looks again after this long. */
#define POLL_RECHECK_MS 1000

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

/*
 * Returns once the socket has something to read (or has ended), sending
 * the replies of operations that complete meanwhile.  With nothing queued
 * it returns at once, and the receive itself blocks.  The caller has just
 * reaped.
 */
static int wait_input(struct srv *s)
{
	for (;;) {
		struct pollfd p[QFT_CHAN_MAX_STRIPES + 1];
		int fds[QFT_CHAN_MAX_STRIPES], n, r;
		bool input = false;

		if (!srv_xfer_pending(s))
			return 0;
		/* The socket the next frame comes on: the stripe that holds
		 * it, when striped (chan.h). */
		n = qft_chan_rx_fds(&s->chan, fds, QFT_CHAN_MAX_STRIPES);
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		p[n] = (struct pollfd){ .fd = srv_xfer_fd(s), .events = POLLIN };
		if (poll(p, (nfds_t)n + 1, POLL_RECHECK_MS) < 0 &&
		    errno != EINTR) {
			r = -errno;
			qft_err("closing connection: poll failed: %s",
				strerror(-r));
			return r;
		}
		/* Hang-ups and errors too: the receive reports them. */
		for (int i = 0; i < n; i++)
			input |= p[i].revents != 0;
		if (input)
			return 0;
		if ((r = srv_xfer_reap(s, false)) < 0)
			return r;
	}
}

/* Logs why a receive failed and returns what the loop returns. */
static int recv_failed(struct srv *s, const struct qft_hdr *h, int r)
{
	if (r == -EBADMSG && s->chan.rx && s->chan.rx->failed) {
		/* Nothing of it was applied; no word to the peer. */
		qft_err("closing connection: a record failed "
			"authentication (corrupted, replayed or forged)");
		return r;
	}
	if (r == -EBADMSG || r == -ENOSYS) {
		/* The header was read, so op and id are there to log. */
		log_malformed(h);
		return -EBADMSG;
	}
	if (r == -EIO) {
		qft_err("closing connection: stream ended inside a frame");
		return r;
	}
	if (r == -ETIMEDOUT || r == -EHOSTUNREACH || r == -ENETUNREACH ||
	    r == -EHOSTDOWN) {
		/* TCP keepalive or user timeout (session.c): the client's
		 * host is gone or unreachable (the errno is the last ICMP
		 * error, if any, else ETIMEDOUT). */
		qft_err("closing connection: the client stopped answering "
			"(%s)", strerror(-r));
		return r;
	}
	qft_err("closing connection: receive failed: %s", strerror(-r));
	return r;
}

static int numbered(struct srv *s, const struct qft_hdr *h);

/* srv_cred_enter with the identity of the handle `req` names, if any. */
static int enter_as(struct srv *s, const struct qft_msg *req)
{
	struct srv_handle *h;

	if (!s->cred_on)
		return 0;
	if (req->handle &&
	    srv_handle_get(&s->handles, req->handle, SRV_H_ANY, &h) == 0)
		return srv_cred_enter(s, req, h->cred);
	return srv_cred_enter(s, req, NULL);
}

static int serve(struct srv *s)
{
	for (;;) {
		struct qft_msg req;
		struct qft_hdr h;
		int r;

		/* Replies first: that also frees the buffers of finished
		 * writes, so a pread/pwrite server keeps reusing one. */
		if ((r = srv_xfer_reap(s, false)) < 0 ||
		    (r = srv_xfer_rx(s)) < 0 || (r = wait_input(s)) < 0)
			return r;
		memset(&h, 0, sizeof(h));
		r = qft_chan_recv(&s->chan, &s->in, &h);
		if (r == -EPIPE) {
			qft_debug("end of stream: client is done");
			return srv_xfer_drain(s);
		}
		if (r < 0)
			return recv_failed(s, &h, r);
		/* A reply or a notification has no business travelling to
		 * the server. */
		if (h.flags & (QFT_F_REPLY | QFT_F_NOTIFY | QFT_F_PROGRESS)) {
			log_malformed(&h);
			return -EBADMSG;
		}
		/* A caller's credentials only where HELLO agreed to act on
		 * them, as for any frame flag. */
		if ((h.flags & QFT_F_CRED) && !s->cred_on) {
			qft_err("closing connection: %s id %llu carries a "
				"caller's credentials, which HELLO did not agree "
				"on", qft_op_name(h.op),
				(unsigned long long)h.id);
			return -EBADMSG;
		}
		/* STRIPE belongs to this connection, not to the session. */
		if (s->replay && h.op != QFT_OP_STRIPE) {
			r = numbered(s, &h);
			if (r < 0)
				return r;
			if (r == SRV_REPLAY_CACHED)
				continue;
		}

		r = qft_msg_decode(&req, s->in.data, s->in.len);
		if (r == -EINVAL && s->hello_done) {
			/* Well framed but invalid (a name with '/', unknown
			 * flags): refuse this request, keep the connection.
			 * It has no effect, so it need not wait its turn. */
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
		/* Every request runs as whom it acts for (cred.h): the
		 * engine's READs and WRITEs too, which start here. */
		r = s->hello_done ? enter_as(s, &req) : 0;
		if (r < 0) {
			/* Refused before it did anything, like an invalid
			 * request: it need not wait its turn. */
			r = srv_op_reply_error(s, h.op, h.id, -r, r == -EACCES ?
					       "this request names no caller: "
					       "on a connection that acts as "
					       "its callers, every request "
					       "that names a path must" :
					       "the server could not act as "
					       "the caller");
			if (r < 0)
				return r;
			continue;
		}
		if (s->hello_done) {
			r = srv_xfer_submit(s, &req);
			if (r < 0)
				return r;
			if (r > 0)
				continue;
		}
		/* Everything else acts on the state earlier requests left. */
		if ((r = srv_xfer_drain(s)) < 0 ||
		    (r = srv_op_dispatch(s, &req)) < 0)
			return r;
		if (s->bye) {
			qft_info("the client ended the session (BYE)");
			return 0;
		}
	}
}

/*
 * A resumable lane's request (h) in its numbering: SRV_REPLAY_NEW or
 * _AGAIN to execute it, _CACHED once the kept reply went out again, or
 * -EPROTO to close the connection.
 */
static int numbered(struct srv *s, const struct qft_hdr *h)
{
	const uint8_t *frame = NULL;
	size_t len = 0;
	int r;

	r = srv_replay_check(s->replay, h->op, h->id, &frame, &len);
	if (r != SRV_REPLAY_CACHED)
		return r;
	qft_debug("%s id %llu: retransmitted; answered from the reply cache",
		  qft_op_name(h->op), (unsigned long long)h->id);
	/* In order behind what is queued, as any reply. */
	if ((r = srv_xfer_drain(s)) < 0)
		return r;
	if (!s->link_dead && qft_chan_send(&s->chan, frame, len) < 0)
		srv_op_link_down(s);
	return SRV_REPLAY_CACHED;
}

int srv_loop_run(struct srv *s)
{
	int r = srv_xfer_init(s);

	if (r < 0)
		return r;
	for (;;) {
		r = serve(s);
		if (!s->replay || s->bye)
			break;
		/*
		 * A resumable lane: whatever ended the connection, finish
		 * every request it brought (their replies are kept), so that
		 * the RESUME reply's seq is exact, then wait for the client.
		 */
		srv_op_link_down(s);
		r = srv_xfer_drain(s);
		if (r < 0)
			break;
		r = srv_resume_wait(s);
		if (r < 0) {
			/* The grace passed or the session ends: as a client
			 * that went away did. */
			r = 0;
			break;
		}
	}
	/* Waits for what the kernel still has before handles close. */
	srv_xfer_destroy(s);
	srv_pulse_free(s->pulse);
	s->pulse = NULL;
	return r;
}
