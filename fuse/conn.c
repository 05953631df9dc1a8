// SPDX-License-Identifier: MIT
/*
 * Request/reply matching over one channel (see conn.h).
 *
 * Callers wait on their own condition variable in a `struct pending` that
 * lives on their stack and sits in a small hash of in-flight requests keyed
 * by request id.  The reader thread is the only receiver: it takes the
 * waiter out of the table, gives it the reply frame and wakes it.  The
 * table and every waiter's `done`/`err` are guarded by conn->lock.
 * Asynchronous calls put a heap-allocated entry with a callback in the same
 * table; whoever takes it out (the reader with the reply, conn_fail, or a
 * sender whose frame could not be encoded) completes and frees it, always
 * after dropping conn->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "chan.h"
#include "conn.h"
#include "errmap.h"
#include "log.h"
#include "thread.h"
#include "protocol.h"

#define PENDING_BUCKETS 256u
/* Receive buffers must hold a sealed record; send buffers share it. */
#define FRAME_LIMIT     ((size_t)QFT_CHAN_RECV_LIMIT)
/* Replies up to this size are copied out of the reader's buffer; larger
 * ones (READ data) take the buffer itself, so bulk data is never copied. */
#define COPY_LIMIT      (64u * 1024u)
#define HANDLE_WORDS    (QFT_MAX_HANDLES / 64u)

struct pending {
	uint64_t id;
	struct pending *next;   /* conn lock: bucket chain */
	pthread_cond_t cond;    /* qc_call only */
	bool done;              /* conn lock */
	int err;                /* conn lock: set with done when no reply */
	struct qbuf frame;      /* the reply; the reader fills it before done */
	/* qc_call_async: heap-allocated, completed by calling cb exactly
	 * once by whoever takes it out of the table (NULL for qc_call). */
	qc_done_fn *cb;
	void *cb_ctx;
	uint16_t op;            /* the request's opcode, to check the reply */
};

struct qc_conn {
	struct qft_chan chan;
	/* The data plane's record keys, when sealed; the channel borrows
	 * them (tx under its write lock, rx for the reader). */
	struct qft_seal tx;
	struct qft_seal rx;
	bool sealed;            /* owner thread only */
	atomic_uint_fast64_t next_id;
	pthread_t reader;
	bool reader_running;    /* owner thread only (start, shutdown, free) */

	pthread_mutex_t lock;
	struct pending *pending[PENDING_BUCKETS]; /* lock */
	bool dead;              /* lock: no more requests can be answered */
	bool closing;           /* lock: qc_conn_shutdown asked for the end */
	bool lost;              /* lock: died without being asked to */
	bool warned_stray;      /* lock */
	pthread_cond_t dead_cond; /* lock: signalled when dead becomes true */

	pthread_mutex_t hlock;
	uint64_t hmap[HANDLE_WORDS]; /* hlock: bit n set = handle n + 1 taken */
	uint32_t hnext;         /* hlock: word where the next search starts */
};

void qc_reply_free(struct qc_reply *rep)
{
	qbuf_free(&rep->frame);
}

static uint64_t next_id(struct qc_conn *c)
{
	return atomic_fetch_add(&c->next_id, 1);
}

int qc_conn_new(struct qc_conn **out, int fd)
{
	pthread_condattr_t ca;
	struct qc_conn *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	r = qft_chan_init(&c->chan, fd, fd);
	if (r < 0)
		goto out_free;
	atomic_init(&c->next_id, 1);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->hlock, NULL);
	/* Shutdown waits with a deadline; wall-clock jumps must not move it. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->dead_cond, &ca);
	pthread_condattr_destroy(&ca);
	*out = c;
	return 0;
out_free:
	free(c);
	return r;
}

void qc_conn_free(struct qc_conn *c)
{
	if (!c)
		return;
	if (c->reader_running)
		qc_conn_shutdown(c, 0);
	qft_chan_destroy(&c->chan);
	if (c->sealed) {
		qft_seal_free(&c->tx);
		qft_seal_free(&c->rx);
	}
	pthread_cond_destroy(&c->dead_cond);
	pthread_mutex_destroy(&c->hlock);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int qc_conn_set_keys(struct qc_conn *c, enum qft_cipher cipher,
		     const struct qft_session_keys *keys)
{
	int r;

	r = qft_seal_init(&c->tx, cipher, keys->c2s, true);
	if (r < 0)
		return r;
	r = qft_seal_init(&c->rx, cipher, keys->s2c, false);
	if (r < 0) {
		qft_seal_free(&c->tx);
		return r;
	}
	c->sealed = true;
	qft_chan_set_seal(&c->chan, &c->tx, &c->rx);
	return 0;
}

static const char *fail_reason(struct qc_conn *c, int err)
{
	/* Only the reader opens records, and it has stopped by now. */
	if (err == -EBADMSG && c->sealed && c->rx.failed)
		return "a record failed authentication (corrupted or "
		       "tampered with)";
	switch (err) {
	case -EPIPE:   return "the server closed the connection";
	case -EIO:     return "the stream ended inside a frame";
	case -EBADMSG: return "malformed frame header";
	case -ENOSYS:  return "frame with an unknown opcode";
	case -EPROTO:  return "protocol violation";
	default:       return strerror(-err);
	}
}

static int check_reply(uint16_t op, struct qc_reply *rep);

/*
 * Completes an asynchronous call taken out of the table (or never put in
 * it): decodes the reply unless p->err says there is none, hands it to the
 * callback and frees what the callback did not take.  No lock held.
 */
static void complete_async(struct pending *p)
{
	struct qc_reply rep;
	int r = p->err;

	memset(&rep, 0, sizeof(rep));
	rep.frame = p->frame;
	if (r == 0) {
		r = check_reply(p->op, &rep);
		if (r < 0) {
			qbuf_free(&rep.frame);
			memset(&rep, 0, sizeof(rep));
		}
	} else {
		qbuf_free(&rep.frame);
	}
	p->cb(p->cb_ctx, r, r == 0 ? &rep : NULL);
	qc_reply_free(&rep);
	free(p);
}

/*
 * Marks the connection dead and wakes every waiter with -EIO.  Called by
 * the reader when receiving fails and by a sender when sending fails.
 */
static void conn_fail(struct qc_conn *c, int err)
{
	struct pending *async = NULL;
	bool report;

	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->dead = true;
	report = !c->closing;
	c->lost = report;
	for (unsigned b = 0; b < PENDING_BUCKETS; b++) {
		struct pending *p = c->pending[b];

		while (p) {
			struct pending *next = p->next;

			p->err = -EIO;
			if (p->cb) {
				/* Completed below, outside the lock: the
				 * callbacks take their owners' locks. */
				p->next = async;
				async = p;
			} else {
				p->done = true;
				pthread_cond_signal(&p->cond);
			}
			p = next;
		}
		c->pending[b] = NULL;
	}
	pthread_cond_broadcast(&c->dead_cond);
	pthread_mutex_unlock(&c->lock);
	while (async) {
		struct pending *next = async->next;

		complete_async(async);
		async = next;
	}
	if (report)
		qft_err("connection to server lost: %s", fail_reason(c, err));
	/* Senders blocked on a full socket must not wait for a dead peer. */
	qft_chan_shutdown(&c->chan);
}

/* Removes and returns the waiter for `id`; conn lock held. */
static struct pending *take_pending(struct qc_conn *c, uint64_t id)
{
	struct pending **pp = &c->pending[id % PENDING_BUCKETS];

	for (; *pp; pp = &(*pp)->next) {
		struct pending *p = *pp;

		if (p->id == id) {
			*pp = p->next;
			return p;
		}
	}
	return NULL;
}

/* A reply nobody waits for: the answer to a fire-and-forget CLOSE. */
static void drop_unclaimed(struct qc_conn *c, const struct qft_hdr *h,
			   const struct qbuf *in)
{
	uint32_t status = 0;

	if (in->len >= QFT_HDR_SIZE + 4)
		status = qft_load32(in->data + QFT_HDR_SIZE);
	if (h->op == QFT_OP_CLOSE) {
		if (status != QFT_OK)
			qft_debug("CLOSE of a released handle failed: %s",
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
 * Routes one received frame.  Today every frame from the server is a reply
 * to a waiting request; this is where stream frames (read-ahead data,
 * write acknowledgements) will be told apart and routed to their streams.
 */
static int conn_dispatch(struct qc_conn *c, const struct qft_hdr *h,
			 struct qbuf *in)
{
	struct pending *p;

	if (!(h->flags & QFT_F_REPLY)) {
		qft_err("server sent a %s request frame", qft_op_name(h->op));
		return -EPROTO;
	}
	pthread_mutex_lock(&c->lock);
	p = take_pending(c, h->id);
	pthread_mutex_unlock(&c->lock);
	if (!p) {
		drop_unclaimed(c, h, in);
		return 0;
	}

	/* Out of the table, p is ours alone until we set done. */
	if (in->len <= COPY_LIMIT) {
		if (qbuf_put_bytes(&p->frame, in->data, in->len) < 0)
			p->err = -ENOMEM;
	} else {
		p->frame = *in;
		qbuf_init(in, FRAME_LIMIT);
		/* The next frame is likely as large: allocate it in one go
		 * rather than by doubling.  Failure is retried by recv. */
		(void)qbuf_reserve(in, FRAME_LIMIT);
	}
	if (p->cb) {
		complete_async(p);
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
	struct qc_conn *c = arg;
	struct qft_hdr h;
	struct qbuf in;
	int r;

	qbuf_init(&in, FRAME_LIMIT);
	for (;;) {
		r = qft_chan_recv(&c->chan, &in, &h);
		if (r < 0)
			break;
		r = conn_dispatch(c, &h, &in);
		if (r < 0)
			break;
	}
	qbuf_free(&in);
	conn_fail(c, r);
	return NULL;
}

int qc_conn_start(struct qc_conn *c)
{
	int r;

	/* Signals belong to libfuse's handlers in the loop threads; one
	 * delivered here would interrupt no one and leave the loop running. */
	r = -qft_thread_start(&c->reader, reader_main, c);
	if (r)
		return -r;
	c->reader_running = true;
	return 0;
}

bool qc_conn_lost(struct qc_conn *c)
{
	bool lost;

	pthread_mutex_lock(&c->lock);
	lost = c->lost;
	pthread_mutex_unlock(&c->lock);
	return lost;
}

void qc_conn_shutdown(struct qc_conn *c, int timeout_ms)
{
	struct timespec deadline;

	pthread_mutex_lock(&c->lock);
	c->closing = true;
	pthread_mutex_unlock(&c->lock);
	if (!c->reader_running) {
		qft_chan_shutdown(&c->chan);
		return;
	}

	/*
	 * Half-close, under the write lock so no frame is cut: the server
	 * reads end of stream after our last request, answers everything
	 * before it and exits, which closes its side and ends our reader.
	 */
	pthread_mutex_lock(&c->chan.wlock);
	shutdown(c->chan.wfd, SHUT_WR);
	pthread_mutex_unlock(&c->chan.wlock);

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	while (!c->dead) {
		if (pthread_cond_timedwait(&c->dead_cond, &c->lock,
					   &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	/* A server that does not close in time is cut off. */
	qft_chan_shutdown(&c->chan);
	pthread_join(c->reader, NULL);
	c->reader_running = false;
}

static int send_frame(struct qc_conn *c, struct qft_msg *req)
{
	struct qbuf out;
	int r;

	qbuf_init(&out, FRAME_LIMIT);
	r = qft_msg_encode(&out, req);
	if (r < 0) {
		/* Callers check sizes first; this is a bug, not the peer's. */
		qft_err("cannot encode a %s request: %s",
			qft_op_name(req->op), strerror(-r));
		qbuf_free(&out);
		return -EIO;
	}
	r = qft_chan_send(&c->chan, out.data, out.len);
	qbuf_free(&out);
	if (r < 0) {
		conn_fail(c, r);
		return -EIO;
	}
	return 0;
}

static int check_reply(uint16_t op, struct qc_reply *rep)
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

int qc_call(struct qc_conn *c, struct qft_msg *req, struct qc_reply *rep)
{
	struct pending p;
	int r;

	memset(rep, 0, sizeof(*rep));
	qbuf_init(&rep->frame, FRAME_LIMIT);
	req->flags = 0;
	req->id = next_id(c);

	memset(&p, 0, sizeof(p));
	p.id = req->id;
	qbuf_init(&p.frame, FRAME_LIMIT);
	pthread_cond_init(&p.cond, NULL);

	/* Registered before sending, so the reply always finds its waiter. */
	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		pthread_mutex_unlock(&c->lock);
		r = -EIO;
		goto out_destroy;
	}
	p.next = c->pending[p.id % PENDING_BUCKETS];
	c->pending[p.id % PENDING_BUCKETS] = &p;
	pthread_mutex_unlock(&c->lock);

	r = send_frame(c, req);
	pthread_mutex_lock(&c->lock);
	if (r < 0 && !p.done) {
		/* Not sent (encoding failed): nobody else will wake us. */
		take_pending(c, p.id);
		p.done = true;
		p.err = r;
	}
	while (!p.done)
		pthread_cond_wait(&p.cond, &c->lock);
	pthread_mutex_unlock(&c->lock);

	r = p.err;
	if (r < 0) {
		qbuf_free(&p.frame);
		goto out_destroy;
	}
	rep->frame = p.frame;
	r = check_reply(req->op, rep);
	if (r < 0) {
		qbuf_free(&rep->frame);
		memset(&rep->msg, 0, sizeof(rep->msg));
	}
out_destroy:
	pthread_cond_destroy(&p.cond);
	return r;
}

int qc_call_async(struct qc_conn *c, struct qft_msg *req, qc_done_fn *done,
		  void *ctx)
{
	struct pending *p;
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
	req->flags = 0;
	req->id = next_id(c);
	p->id = id = req->id;

	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		pthread_mutex_unlock(&c->lock);
		p->err = -EIO;
		complete_async(p);
		return -EIO;
	}
	p->next = c->pending[id % PENDING_BUCKETS];
	c->pending[id % PENDING_BUCKETS] = p;
	pthread_mutex_unlock(&c->lock);

	/* Once sent, p belongs to the reader, which may free it any time. */
	r = send_frame(c, req);
	if (r < 0) {
		/* A failed send killed the connection, which completed p; only
		 * a frame that could not even be encoded is still ours. */
		pthread_mutex_lock(&c->lock);
		p = take_pending(c, id);
		pthread_mutex_unlock(&c->lock);
		if (p) {
			p->err = r;
			complete_async(p);
		}
	}
	return r;
}

int qc_send_noreply(struct qc_conn *c, struct qft_msg *req)
{
	bool dead;

	pthread_mutex_lock(&c->lock);
	dead = c->dead;
	pthread_mutex_unlock(&c->lock);
	if (dead)
		return -EIO;
	req->flags = 0;
	req->id = next_id(c);
	return send_frame(c, req);
}

int qc_conn_hello(struct qc_conn *c, int timeout_s, char *msg, size_t size)
{
	struct timeval tv = { .tv_sec = timeout_s };
	const struct timeval off = { 0 };
	struct qft_msg m, rep;
	struct qft_hdr h;
	struct qbuf b;
	int r;

	msg[0] = '\0';
	qbuf_init(&b, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_HELLO, next_id(c));
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = 0;
	r = qft_chan_send_msg(&c->chan, &b, &m);
	if (r == -EPIPE || r == -ECONNRESET) {
		r = -EPIPE;
		goto out_free_buf;
	}
	if (r < 0) {
		snprintf(msg, size, "cannot send the handshake: %s",
			 strerror(-r));
		goto out_free_buf;
	}

	/* The handshake must not hang on a server that never answers; the
	 * option is ignored where the stream is not a socket. */
	setsockopt(c->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = qft_chan_recv(&c->chan, &b, &h);
	setsockopt(c->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &off, sizeof(off));
	if (r == -EAGAIN || r == -EWOULDBLOCK) {
		snprintf(msg, size, "the server did not answer within %d s",
			 timeout_s);
		r = -ETIMEDOUT;
		goto out_free_buf;
	}
	if (r == -EPIPE || r == -ECONNRESET) {
		r = -EPIPE;
		goto out_free_buf;
	}
	if (r < 0) {
		snprintf(msg, size, "handshake failed: %s", fail_reason(c, r));
		r = -EPROTO;
		goto out_free_buf;
	}
	r = qft_msg_decode(&rep, b.data, b.len);
	if (r < 0 || !(rep.flags & QFT_F_REPLY) || rep.op != QFT_OP_HELLO ||
	    rep.id != m.id) {
		snprintf(msg, size, "the server answered the handshake with "
			 "something other than a HELLO reply");
		r = -EPROTO;
		goto out_free_buf;
	}
	if (rep.status != QFT_OK) {
		if (rep.errmsg.len)
			snprintf(msg, size, "%s", rep.errmsg.s);
		else
			snprintf(msg, size, "the server refused the handshake: %s",
				 strerror(qft_errno_from_status(rep.status)));
		r = -EPROTO;
		goto out_free_buf;
	}
	if (rep.version != QFT_VERSION) {
		snprintf(msg, size, "the server speaks protocol version %u, "
			 "this client speaks version %u", rep.version,
			 QFT_VERSION);
		r = -EPROTO;
		goto out_free_buf;
	}
	r = 0;
out_free_buf:
	qbuf_free(&b);
	return r;
}

int qc_handle_alloc(struct qc_conn *c, uint64_t *handle)
{
	pthread_mutex_lock(&c->hlock);
	for (uint32_t i = 0; i < HANDLE_WORDS; i++) {
		uint32_t w = (c->hnext + i) % HANDLE_WORDS;
		unsigned bit;

		if (c->hmap[w] == ~(uint64_t)0)
			continue;
		bit = (unsigned)__builtin_ctzll(~c->hmap[w]);
		c->hmap[w] |= (uint64_t)1 << bit;
		c->hnext = w;
		pthread_mutex_unlock(&c->hlock);
		*handle = (uint64_t)w * 64 + bit + 1;
		return 0;
	}
	pthread_mutex_unlock(&c->hlock);
	return -EMFILE;
}

void qc_handle_free(struct qc_conn *c, uint64_t handle)
{
	uint64_t n = handle - 1, mask;

	if (handle == 0 || handle > QFT_MAX_HANDLES) {
		qft_err("freeing invalid handle %llu",
			(unsigned long long)handle);
		return;
	}
	mask = (uint64_t)1 << (n % 64);
	pthread_mutex_lock(&c->hlock);
	if (!(c->hmap[n / 64] & mask))
		qft_err("handle %llu freed twice", (unsigned long long)handle);
	c->hmap[n / 64] &= ~mask;
	pthread_mutex_unlock(&c->hlock);
}
