// SPDX-License-Identifier: MIT
/*
 * Calls: sending a request on the right stream of the right link, and
 * waiting for its reply (qc_call*) or leaving it to a callback
 * (qc_call_async, qc_call_ordered) or to nobody (qc_send_noreply).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"

/* A request's head (header and fields, not its data) usually fits here. */
#define HEAD_STACK      512u

/* -------------------------------------------------------------------------
 * Calls
 */

/* The caller of the FUSE request this thread serves (call.h). */
static __thread const struct qft_cred *thread_caller;

void qc_call_act_as(const struct qft_cred *c)
{
	thread_caller = c;
}

const struct qft_cred *qc_call_caller(void)
{
	return thread_caller;
}

/*
 * Sends on link l (a user reference held) and drops the reference.  On a
 * failed send the link is failed, which completes the request (`id`, if
 * any) unless it could not even be encoded.
 */
static int link_send(struct qc_conn *c, struct link *l, unsigned lane,
		     struct qft_msg *req, uint64_t id, struct pending *p)
{
	uint8_t stack[HEAD_STACK];
	struct qbuf out = { .data = stack, .cap = sizeof(stack),
			    .limit = sizeof(stack) };
	struct qft_blob tail;
	struct iovec iov[2];
	uint32_t opflags = req->opflags;
	uint16_t flags = req->flags;
	int r;

	if (lane >= l->nlanes)
		lane = LANE_BULK;
	/* The caller goes where the link acts on it, and nowhere else (a
	 * server that did not agree closes on the flag).  The caller's
	 * request is left as it was, for a resend on another link. */
	if (!l->lane[lane].cred)
		req->flags &= ~QFT_F_CRED;
	else if (!(req->flags & QFT_F_CRED) && thread_caller &&
		 req->op != QFT_OP_HELLO && req->op != QFT_OP_RESUME) {
		req->cred = *thread_caller;
		req->flags |= QFT_F_CRED;
	}
	/* A server that did not agree on FETCH (an older one, after a
	 * reconnect too) cannot decode it: refused here, unsent. */
	if (req->op == QFT_OP_FETCH &&
	    !(l->lane[lane].features & QFT_FEAT_FETCH)) {
		r = -EOPNOTSUPP;
		goto out_put;
	}
	/* QFT_O_LAZY is a hint the callers set whatever the server: a
	 * server that did not agree on it (an older one, after a
	 * reconnect too) would refuse the open, and without it only the
	 * pace of the WRITEs changes.  The caller's request keeps it for a
	 * resend on another link. */
	if ((req->op == QFT_OP_OPEN || req->op == QFT_OP_CREATE) &&
	    !l->lane[lane].lazy)
		req->opflags &= ~QFT_O_LAZY;
	/* A resumable link numbers and keeps the request, and puts it in
	 * the table itself (resume.c). */
	if (l->resume) {
		r = qc_resume_send(c, l, lane, req, p);
		req->opflags = opflags;
		req->flags = flags;
		return r;
	}
	/* The head goes on the stack (a view that cannot grow), a WRITE's
	 * data stays where the caller has it: nothing is allocated or
	 * copied for the frame.  Only a head too big for the stack (long
	 * paths, xattr values) is built on the heap. */
	r = qft_msg_encode_head(&out, req, &tail);
	if (r == -EMSGSIZE) {
		qbuf_init(&out, FRAME_LIMIT);
		r = qft_msg_encode_head(&out, req, &tail);
	}
	req->opflags = opflags;
	req->flags = flags;
	if (r < 0) {
		/* Callers check sizes first; this is a bug, not the peer's. */
		qft_err("cannot encode a %s request: %s",
			qft_op_name(req->op), strerror(-r));
		if (out.data != stack)
			qbuf_free(&out);
		r = -EIO;
		goto out_put;
	}
	iov[0] = (struct iovec){ out.data, out.len };
	iov[1] = (struct iovec){ (void *)tail.p, tail.len };
	r = qft_chan_sendv(&l->lane[lane].chan, iov, tail.len ? 2 : 1);
	if (out.data != stack)
		qbuf_free(&out);
	if (r < 0) {
		qc_link_fail(c, l, r, NULL);
		r = -EIO;
		goto out_put;
	}
	atomic_store(&l->last_tx, now_ns());
out_put:
	pthread_mutex_lock(&c->lock);
	if (r == 0 && id) {
		/* Its deadline runs from now: time spent waiting for the
		 * socket is time the link was busy, not stuck. */
		struct pending *q = qc_pending_find(c, id);

		if (q)
			q->sent_ns = now_ns();
	}
	qc_link_put(c, l);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/*
 * The lane for `req` on link `gen` (conn.h, "Two streams"): requests that
 * name no handle (gen 0) and everything bound to a directory handle go on
 * meta, the rest on bulk.  An OPENDIR marks its handle as a directory's
 * until qc_handle_free.
 */
static unsigned route(struct qc_conn *c, uint64_t gen,
		      const struct qft_msg *req)
{
	bool dir;

	if (!gen)
		return LANE_META;
	if (req->handle == 0 || req->handle > QFT_MAX_HANDLES)
		return LANE_BULK;
	dir = qc_handle_is_dir(c, gen, req->handle,
			       req->op == QFT_OP_OPENDIR);
	return dir || req->op == QFT_OP_OPENDIR ? LANE_META : LANE_BULK;
}

/* Before a request goes on the meta stream: the ordered requests sent
 * on bulk before it are done (qc_call_ordered). */
static void wait_ordered(struct qc_conn *c)
{
	pthread_mutex_lock(&c->olock);
	while (c->ordered)
		pthread_cond_wait(&c->ocond, &c->olock);
	pthread_mutex_unlock(&c->olock);
}

static int call(struct qc_conn *c, uint64_t gen, unsigned lane,
		struct qft_msg *req, struct qc_reply *rep)
{
	struct pending p;
	struct link *l;
	bool resumable;
	int r;

	if (lane == LANE_META)
		wait_ordered(c);

	memset(rep, 0, sizeof(*rep));
	qbuf_init(&rep->frame, FRAME_LIMIT);
	req->flags &= QFT_F_CRED;   /* the one flag a caller may set */
	req->id = next_id(c);

	memset(&p, 0, sizeof(p));
	p.id = req->id;
	p.op = req->op;
	qbuf_init(&p.frame, FRAME_LIMIT);
	pthread_cond_init(&p.cond, NULL);
	atomic_fetch_add(&c->n_waited, 1);

	/* Registered before sending, so the reply always finds its waiter. */
	pthread_mutex_lock(&c->lock);
	r = qc_link_get(c, gen, &l);
	if (r < 0) {
		pthread_mutex_unlock(&c->lock);
		goto out_destroy;
	}
	resumable = l->resume;
	if (!resumable)
		qc_pending_add(c, l, &p);
	pthread_mutex_unlock(&c->lock);

	r = link_send(c, l, lane, req, p.id, &p);
	pthread_mutex_lock(&c->lock);
	if (r < 0 && !p.done) {
		/* Not sent (encoding failed): nobody else will wake us.  A
		 * resumable link's sender failing left it out of the table. */
		if (!resumable && qc_pending_take(c, p.id) && !l->dead)
			l->npending--;
		p.done = true;
		p.err = r;
	}
	/* The watchdog fails the link, and so this wait, at the deadline. */
	while (!p.done)
		pthread_cond_wait(&p.cond, &c->lock);
	pthread_mutex_unlock(&c->lock);

	r = p.err;
	if (r < 0) {
		qc_reply_frame_free(&p.frame, &p.pool);
		goto out_destroy;
	}
	rep->frame = p.frame;
	rep->pool = p.pool;
	r = qc_reply_check(req->op, rep);
	if (r < 0) {
		qc_reply_free(rep);
		memset(&rep->msg, 0, sizeof(rep->msg));
	}
out_destroy:
	pthread_cond_destroy(&p.cond);
	return r;
}

int qc_call(struct qc_conn *c, struct qft_msg *req, struct qc_reply *rep)
{
	return call(c, 0, route(c, 0, req), req, rep);
}

int qc_call_gen(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		struct qc_reply *rep)
{
	if (!gen)
		return -ENOTCONN;
	return call(c, gen, route(c, gen, req), req, rep);
}

int qc_call_behind(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		   struct qc_reply *rep)
{
	if (!gen)
		return -ENOTCONN;
	return call(c, gen, LANE_BULK, req, rep);
}

int qc_call_async_lane(struct qc_conn *c, uint64_t gen, unsigned lane,
		       struct qft_msg *req, qc_done_fn *done, void *ctx,
		       bool ordered)
{
	struct pending *p;
	struct link *l;
	bool resumable;
	uint64_t id;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p) {
		done(ctx, -ENOMEM, NULL);
		return -ENOMEM;
	}
	qbuf_init(&p->frame, FRAME_LIMIT);
	p->cb = done;
	p->cb_ctx = ctx;
	p->op = req->op;
	if (ordered) {
		/* Counted before it can complete, on whatever thread. */
		pthread_mutex_lock(&c->olock);
		c->ordered++;
		pthread_mutex_unlock(&c->olock);
		p->oc = c;
	}
	atomic_fetch_add(&c->n_async, 1);
	req->flags &= QFT_F_CRED;   /* the one flag a caller may set */
	req->id = next_id(c);
	p->id = id = req->id;

	pthread_mutex_lock(&c->lock);
	r = gen ? qc_link_get(c, gen, &l) : -ENOTCONN;
	if (r < 0) {
		pthread_mutex_unlock(&c->lock);
		p->err = r;
		qc_pending_complete(p);
		return r;
	}
	resumable = l->resume;
	if (!resumable)
		qc_pending_add(c, l, p);
	pthread_mutex_unlock(&c->lock);

	/* Once sent, p belongs to the reader, which may free it any time. */
	r = link_send(c, l, lane, req, id, p);
	if (r < 0 && resumable) {
		/* Left out of the table: still ours. */
		p->err = r;
		qc_pending_complete(p);
	} else if (r < 0) {
		/* A failed send killed the link, which completed p; only a
		 * frame that could not even be encoded is still ours. */
		pthread_mutex_lock(&c->lock);
		p = qc_pending_take(c, id);
		if (p && !l->dead)
			l->npending--;
		pthread_mutex_unlock(&c->lock);
		if (p) {
			p->err = r;
			qc_pending_complete(p);
		}
	}
	return r;
}

int qc_call_async(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		  qc_done_fn *done, void *ctx)
{
	return qc_call_async_lane(c, gen, route(c, gen, req), req, done, ctx,
				  false);
}

int qc_call_ordered(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		    qc_done_fn *done, void *ctx)
{
	return qc_call_async_lane(c, gen, LANE_BULK, req, done, ctx, true);
}

static void noreply_done(void *ctx, int err, struct qc_reply *rep)
{
	(void)ctx;
	(void)err;
	(void)rep;
}

int qc_send_noreply(struct qc_conn *c, uint64_t gen, struct qft_msg *req)
{
	unsigned lane = route(c, gen, req);
	struct link *l;
	bool resumable = false;
	int r;

	pthread_mutex_lock(&c->lock);
	r = gen ? qc_link_get(c, gen, &l) : -ENOTCONN;
	if (r == 0 && (resumable = l->resume))
		qc_link_put(c, l);
	pthread_mutex_unlock(&c->lock);
	if (r < 0)
		return r;
	atomic_fetch_add(&c->n_noreply, 1);
	/* A resumable lane's ids must all be answered before the server
	 * forgets them, and a resend needs the copy: a request like any
	 * other, whose reply nobody reads. */
	if (resumable)
		return qc_call_async_lane(c, gen, lane, req, noreply_done,
					  NULL, false);
	req->flags &= QFT_F_CRED;   /* the one flag a caller may set */
	req->id = next_id(c);
	return link_send(c, l, lane, req, 0, NULL);
}
