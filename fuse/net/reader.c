// SPDX-License-Identifier: MIT
/*
 * A link's reader threads, one per stream: the only receivers.  Each
 * routes what its stream brings: a reply to its waiter, a NOTIFY to the
 * owner's hook, a PROGRESS to the deadlines it restarts.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "errmap.h"
#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"
#include "thread.h"

/* Replies up to this size are copied out of the reader's buffer; larger
 * ones (READ data) take the buffer itself, so bulk data is never copied. */
#define COPY_LIMIT      (64u * 1024u)
/* How often a reader waiting for a buffer looks whether its link died. */
#define RPOOL_POLL_MS   100

/* A reply nobody waits for: the answer to a fire-and-forget CLOSE or
 * UNWATCH (qc_send_noreply). */
static void drop_unclaimed(struct qc_conn *c, const struct qft_hdr *h,
			   const struct qbuf *in)
{
	uint32_t status = 0;

	if (in->len >= QFT_HDR_SIZE + 4)
		status = qft_load32(in->data + QFT_HDR_SIZE);
	if (h->op == QFT_OP_CLOSE || h->op == QFT_OP_UNWATCH) {
		if (status != QFT_OK)
			qft_debug("%s without a waiter failed: %s",
				  qft_op_name(h->op),
				  strerror(qft_errno_from_status(status)));
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (!c->warned_stray) {
		c->warned_stray = true;
		pthread_mutex_unlock(&c->lock);
		qft_warn("ignoring a %s reply to unknown request %llu",
			 qft_op_name(h->op), (unsigned long long)h->id);
		return;
	}
	pthread_mutex_unlock(&c->lock);
}

/*
 * A NOTIFY frame on a stream that was granted the feature: decoded and
 * checked as strictly as a reply (anything off is a protocol violation
 * that ends the link), then handed to the owner's callback.  A dead
 * link's late ones are dropped: its ALL was delivered already.
 */
static int deliver_notify(struct link *l, const struct qbuf *in)
{
	struct qc_conn *c = l->c;
	struct qft_msg m;
	bool dead;
	int r;

	r = qft_msg_decode(&m, in->data, in->len);
	if (r < 0 || m.op != QFT_OP_NOTIFY) {
		qft_err("malformed NOTIFY frame from the server: %s",
			strerror(r < 0 ? -r : EPROTO));
		return -EPROTO;
	}
	pthread_mutex_lock(&c->lock);
	dead = l->dead;
	pthread_mutex_unlock(&c->lock);
	if (!dead && c->o.notify)
		c->o.notify(c->o.notify_ctx, m.ino, m.kind, m.name.s,
			    m.name.len);
	return 0;
}

/* The table key of the request a frame of lane `ln` names: on a
 * resumable lane its id counts that lane's requests (resume.c).  An id
 * no request of ours can have gives a key that matches nothing. */
static uint64_t frame_key(const struct link *l, const struct lane *ln,
			  uint64_t id)
{
	if (!ln->resume)
		return id;
	if (id == 0 || id > QC_RSEQ_MAX)
		return 0;
	return QC_RKEY(ln - l->lane, id);
}

/* Whether a reader waiting for a receive buffer should stop waiting. */
static bool reader_stop(void *arg)
{
	struct link *l = arg;
	bool stop;

	pthread_mutex_lock(&l->c->lock);
	stop = l->dead;
	pthread_mutex_unlock(&l->c->lock);
	return stop;
}

/* Makes `in` a view of the pool buffer `buf`: a qbuf whose limit is its
 * capacity never reallocates, so the channel fills the buffer in place. */
static void in_view(struct qbuf *in, uint8_t *buf)
{
	in->data = buf;
	in->len = 0;
	in->cap = FRAME_LIMIT;
	in->limit = FRAME_LIMIT;
}

/*
 * A PROGRESS frame: the server is still working on request `id` (a sync
 * on slow storage).  That request's deadline restarts now, and so does
 * that of every request sent after it, which may wait behind it on the
 * same stream: the deadline measures the server's silence, not its work.
 * (Requests sent meanwhile on the other stream gain as much, for as long
 * as the work lasts.)  An id no longer waiting is no error: its caller may
 * have given up.  Anything malformed ends the link, as in a reply.
 */
static int link_progress(struct link *l, const struct lane *ln,
			 const struct qbuf *in)
{
	struct qc_conn *c = l->c;
	struct pending *p;
	struct qft_msg m;
	int64_t now, since;

	if (qft_msg_decode(&m, in->data, in->len) < 0 ||
	    m.op != QFT_OP_PROGRESS) {
		qft_err("malformed PROGRESS frame from the server");
		return -EPROTO;
	}
	pthread_mutex_lock(&c->lock);
	p = l->dead ? NULL : qc_pending_find(c, frame_key(l, ln, m.id));
	if (p && p->sent_ns) {
		now = now_ns();
		since = p->sent_ns;
		for (unsigned b = 0; b < PENDING_BUCKETS; b++)
			for (p = c->pending[b]; p; p = p->next)
				if (p->sent_ns >= since)
					p->sent_ns = now;
	}
	pthread_mutex_unlock(&c->lock);
	qft_debug("PROGRESS id %llu: the server is still working on it",
		  (unsigned long long)m.id);
	return 0;
}

/*
 * Routes one received frame from lane `ln`: a reply to a waiting request,
 * or a NOTIFY where that lane was granted them.  This is where stream
 * frames (read-ahead data, write acknowledgements) will be told apart
 * and routed to their streams.
 */
static int link_dispatch(struct link *l, const struct lane *ln,
			 const struct qft_hdr *h, struct qbuf *in)
{
	uint8_t *next;

	struct qc_conn *c = l->c;
	struct pending *p = NULL;

	if ((h->flags & QFT_F_NOTIFY) && ln->notify)
		return deliver_notify(l, in);
	if ((h->flags & QFT_F_PROGRESS) && ln->progress)
		return link_progress(l, ln, in);
	if (h->op == QFT_OP_STRIPE && (h->flags & QFT_F_REPLY) &&
	    ln == &l->lane[LANE_BULK])
		/* Not a request's: the switch of a resumed link's stream. */
		return qc_stripe_taken(l, in);
	if (!(h->flags & QFT_F_REPLY)) {
		qft_err("server sent a %s %s frame", qft_op_name(h->op),
			h->flags & QFT_F_NOTIFY ? "notification (not agreed "
			"on)" : "request");
		return -EPROTO;
	}
	pthread_mutex_lock(&c->lock);
	/* A dead link's table entries are gone; its late frames are noise. */
	if (!l->dead) {
		p = qc_pending_take(c, frame_key(l, ln, h->id));
		if (p)
			l->npending--;
	}
	pthread_mutex_unlock(&c->lock);
	if (!p) {
		drop_unclaimed(c, h, in);
		return 0;
	}

	/* Out of the table, p is ours alone until we set done. */
	if (in->len <= COPY_LIMIT) {
		if (qbuf_put_bytes(&p->frame, in->data, in->len) < 0)
			p->err = -ENOMEM;
	} else if ((next = qft_pool_get(c->rpool, reader_stop, l,
					RPOOL_POLL_MS)) != NULL) {
		p->frame = *in;
		p->pool = c->rpool;
		in_view(in, next);
	} else if (reader_stop(l)) {
		/* The link died while we waited: this reply goes with it. */
		p->err = -ENOTCONN;
	} else if (qbuf_put_bytes(&p->frame, in->data, in->len) < 0) {
		p->err = -ENOMEM;
	}
	if (p->cb) {
		qc_pending_complete(p);
		return 0;
	}
	pthread_mutex_lock(&c->lock);
	p->done = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static void *reader_main(void *arg)
{
	struct lane *ln = arg;
	struct link *l = ln->l;
	struct qc_conn *c = l->c;
	struct qft_hdr h;
	struct qbuf in;
	uint8_t *buf;
	int r;

	buf = qft_pool_get(c->rpool, reader_stop, l, RPOOL_POLL_MS);
	if (!buf) {
		qc_link_fail(c, l, -ENOMEM, NULL);
		return NULL;
	}
	in_view(&in, buf);
	for (;;) {
		r = qft_chan_recv(&ln->chan, &in, &h);
		if (r < 0)
			break;
		atomic_store(&l->last_rx, now_ns());
		r = link_dispatch(l, ln, &h, &in);
		if (r < 0)
			break;
	}
	qft_pool_put(c->rpool, in.data);
	if (r == -EPIPE) {
		bool wait_other;

		/* While closing, the server ends each lane after answering
		 * it; the link ends cleanly once all have ended. */
		pthread_mutex_lock(&c->lock);
		wait_other = c->closing && !l->dead &&
			     ++l->ended < l->nlanes;
		pthread_mutex_unlock(&c->lock);
		if (wait_other)
			return NULL;
	}
	qc_link_fail(c, l, r, NULL);
	return NULL;
}

int qc_reader_start(struct link *l)
{
	int r = 0;

	/* Signals belong to libfuse's handlers in the loop threads; one
	 * delivered here would interrupt no one and leave the loop running. */
	for (unsigned i = 0; i < l->nlanes; i++) {
		r = -qft_thread_start(&l->lane[i].reader, reader_main,
				      &l->lane[i]);
		if (r)
			break;
		l->lane[i].reader_running = true;
	}
	if (r) {
		qc_link_shutdown(l);
		qc_link_join(l);
		return -r;
	}
	atomic_store(&l->last_rx, now_ns());
	return 0;
}
