// SPDX-License-Identifier: MIT
/*
 * Request/reply matching over a replaceable link (see conn.h).
 *
 * Callers wait on their own condition variable in a `struct pending` that
 * lives on their stack and sits in a small hash of in-flight requests keyed
 * by request id.  The live link's reader thread is the only receiver: it
 * takes the waiter out of the table, gives it the reply frame and wakes it.
 * Asynchronous calls put a heap-allocated entry with a callback in the same
 * table; whoever takes it out (the reader with the reply, link_fail, or a
 * sender whose frame could not be encoded) completes and frees it, always
 * after dropping conn->lock.
 *
 * Every entry in the table belongs to the current link: entries are added
 * only while it is alive, and link_fail empties the table when it dies, so
 * a new link starts with an empty one.
 *
 * A link's memory and stream stay valid while anything may use them: its
 * reader (joined before it is freed) and the threads counted in `users`
 * (senders between taking it under the lock and finishing their send).
 * Only the watchdog (or qc_conn_shutdown, once the watchdog is stopped)
 * frees links, after they died and those users left.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "chan.h"
#include "net/conn.h"
#include "errmap.h"
#include "log.h"
#include "pool.h"
#include "thread.h"
#include "protocol.h"

#define PENDING_BUCKETS 256u
/* Receive buffers must hold a sealed record; send buffers share it. */
#define FRAME_LIMIT     ((size_t)QFT_CHAN_RECV_LIMIT)
/* Replies up to this size are copied out of the reader's buffer; larger
 * ones (READ data) take the buffer itself, so bulk data is never copied. */
#define COPY_LIMIT      (64u * 1024u)
/*
 * Receive buffers come from the connection's pool (common/pool.h): a
 * large reply takes the reader's buffer with it and the reader takes the
 * next from the pool, so bulk data costs no malloc, free or page fault per
 * reply.  The pool keeps enough idle buffers for the default read-ahead
 * window (16 MiB, fuse/fs.h).  Its cap is back-pressure of last resort:
 * what the client holds is bounded by its own windows -- read-ahead of all
 * files together at most twice the largest -o readahead= (1 GiB,
 * QC_STREAM_SIZE_MAX), one reply per waiting thread -- and the cap lies
 * above that, so a reader never waits for a buffer that only a reply
 * behind it could free.  Past it (a consumer that keeps replies without
 * bound) the reader stops reading rather than fail.
 */
#define RPOOL_KEEP      16u
#define RPOOL_MAX       (2048u + 256u)
/* How often a reader waiting for a buffer looks whether its link died. */
#define RPOOL_POLL_MS   100
/* A request's head (header and fields, not its data) usually fits here. */
#define HEAD_STACK      512u
#define HANDLE_WORDS    (QFT_MAX_HANDLES / 64u)

#define NS_PER_MS       1000000LL
#define NS_PER_S        1000000000LL
/* How often the watchdog looks at deadlines while requests are out, and
 * at most how long it sleeps while none are. */
#define WATCH_TICK_MS   250
#define IDLE_TICK_MS    1000
/* While shutting down, how long a silent server is given to close. */
#define SHUTDOWN_SILENCE_MS 2000
/* How long an unmount waits for a reconnect attempt in progress. */
#define ATTEMPT_WAIT_MS 2000
/* Waiting for a transport to go after a fault: it has nothing to finish. */
#define FAULT_REAP_MS   1000
#define BACKOFF_MAX_S   30

struct pending {
	uint64_t id;
	struct pending *next;   /* conn lock: bucket chain */
	pthread_cond_t cond;    /* qc_call only */
	bool done;              /* conn lock */
	int err;                /* conn lock: set with done when no reply */
	int64_t sent_ns;        /* conn lock: frame handed to the stream; 0
				 * while its sender still waits to send */
	struct qbuf frame;      /* the reply; the reader fills it before done */
	struct qft_pool *pool;  /* frame.data is a buffer of it, or NULL */
	/* qc_call_async: heap-allocated, completed by calling cb exactly
	 * once by whoever takes it out of the table (NULL for qc_call). */
	qc_done_fn *cb;
	void *cb_ctx;
	uint16_t op;            /* the request's opcode, to check the reply */
	/* qc_call_ordered: the connection whose `ordered` count it holds
	 * until completed; NULL otherwise */
	struct qc_conn *oc;
};

/* The streams of a link (conn.h, "Two streams"). */
enum { LANE_BULK, LANE_META, LANES };

struct lane {
	struct link *l;         /* immutable */
	struct qft_chan chan;
	/* The stream's record keys, when sealed; the channel borrows them
	 * (tx under its write lock, rx for the reader). */
	struct qft_seal tx;
	struct qft_seal rx;
	bool sealed;            /* immutable once the lane is set up */
	/* HELLO granted QFT_FEAT_NOTIFY: NOTIFY frames are accepted here.
	 * Set before the readers start, then immutable. */
	bool notify;
	/* HELLO granted QFT_FEAT_PROGRESS: PROGRESS frames are accepted
	 * here (link_progress).  Set before the readers start. */
	bool progress;
	/* HELLO granted QFT_FEAT_LAZY: OPEN and CREATE may carry QFT_O_LAZY
	 * here (link_send drops it elsewhere).  Set before the readers
	 * start. */
	bool lazy;
	pthread_t reader;
	bool reader_running;    /* the thread that frees the link only */
};

struct link {
	struct qc_conn *c;      /* immutable */
	uint64_t gen;           /* immutable */
	/* lane[0] is bulk; lane[1] is meta when nlanes is 2, else unused
	 * and everything goes on bulk.  nlanes is fixed before the readers
	 * start. */
	struct lane lane[LANES];
	unsigned nlanes;
	struct qc_endpoint ep;  /* priv: for the transport's close */
	atomic_int_fast64_t last_rx; /* ns: last frame received (or start) */
	atomic_int_fast64_t last_tx; /* ns: last frame sent */

	bool dead;              /* conn lock: nothing more will be answered */
	bool clean;             /* conn lock: the server ended it, asked to */
	unsigned users;         /* conn lock: senders using chan unlocked */
	unsigned npending;      /* conn lock: its entries in the table */
	int64_t busy_since;     /* conn lock: when npending last left 0 */
	unsigned ended;         /* conn lock: lanes the server closed while
				 * we were closing */
	/* The server's uid and gid from the bulk HELLO reply: set by the
	 * handshake, before anyone else sees the link. */
	uint32_t srv_uid, srv_gid;
};

struct qc_conn {
	struct qc_conn_opts o;  /* immutable */
	atomic_uint_fast64_t next_id;
	/* The live link's generation, 0 while there is none: changed under
	 * lock, read without it by every operation on a handle. */
	atomic_uint_fast64_t live_gen;

	pthread_mutex_t lock;
	/* lock (CLOCK_MONOTONIC): a link was installed or died, users left,
	 * closing was set, the watchdog finished. */
	pthread_cond_t cond;
	pthread_cond_t ping_cond; /* lock: ping_wanted or closing */
	struct link *cur;       /* lock: the newest link, maybe dead; NULL
				 * between tearing one down and the next */
	uint64_t last_gen;      /* lock */
	struct pending *pending[PENDING_BUCKETS]; /* lock */
	bool closing;           /* lock: qc_conn_shutdown asked for the end */
	bool lost;              /* lock: down by a fault, not replaced yet */
	int64_t lost_at;        /* lock: when it went down */
	bool warned_stray;      /* lock */
	bool ping_wanted;       /* lock */
	bool watchdog_done;     /* lock */
	/* lock: a reconnect attempt's link during its handshake, which
	 * qc_conn_shutdown cuts short rather than wait for */
	struct link *attempt;

	bool started;           /* owner thread only */
	bool abandoned;         /* owner thread only: watchdog left running */
	pthread_t watchdog;
	pthread_t pinger;

	pthread_mutex_t hlock;
	uint64_t hgen;          /* hlock: the link whose numbers hmap holds */
	uint64_t hmap[HANDLE_WORDS]; /* hlock: bit n set = handle n + 1 taken */
	uint64_t hdir[HANDLE_WORDS]; /* hlock: ... and bound by OPENDIR, so it
				      * lives on the meta lane */
	uint32_t hnext;         /* hlock: word where the next search starts */

	uint32_t srv_uid;       /* lock: the live link's (qc_conn_server_ids) */
	uint32_t srv_gid;       /* lock */

	/*
	 * qc_call_ordered requests not completed yet: requests on the meta
	 * stream wait for them, so that none overtakes one.  Its own lock,
	 * since they complete wherever a link fails, `lock` held or not.
	 */
	pthread_mutex_t olock;
	pthread_cond_t ocond;   /* olock: ordered fell to 0 */
	uint64_t ordered;       /* olock */

	/* Requests sent, by how their sender waited (qc_conn_counts). */
	atomic_uint_fast64_t n_waited;
	atomic_uint_fast64_t n_async;
	atomic_uint_fast64_t n_noreply;

	/* Receive buffers of every link (RPOOL_*); its own locking. */
	struct qft_pool *rpool;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static struct timespec ts_at(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / NS_PER_S,
			       .tv_nsec = ns % NS_PER_S };

	return ts;
}

/* pthread_cond_timedwait until the CLOCK_MONOTONIC time `ns`; true once
 * that time has passed. */
static bool wait_until(pthread_cond_t *cond, pthread_mutex_t *m, int64_t ns)
{
	struct timespec ts = ts_at(ns);

	return pthread_cond_timedwait(cond, m, &ts) == ETIMEDOUT ||
	       now_ns() >= ns;
}

/* Frees a reply frame, or gives its buffer back to the pool it is from. */
static void frame_free(struct qbuf *frame, struct qft_pool **pool)
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
	frame_free(&rep->frame, &rep->pool);
}

static uint64_t next_id(struct qc_conn *c)
{
	return atomic_fetch_add(&c->next_id, 1);
}

static int64_t deadline_ns(const struct qc_conn *c)
{
	return (int64_t)c->o.timeout_s * NS_PER_S;
}

/* -------------------------------------------------------------------------
 * Links
 */

static void wipe_endpoint_keys(struct qc_endpoint *ep)
{
	if (ep->sealed)
		qft_session_keys_wipe(&ep->keys);
}

static void wipe_meta(struct qc_endpoint *ep)
{
	if (ep->meta) {
		if (ep->sealed)
			qft_session_keys_wipe(&ep->meta_keys);
		close(ep->meta_fd);
		ep->meta = false;
		ep->meta_fd = -1;
	}
}

/* Sets up a lane's channel on `fd` (not taken: the caller closes it on
 * failure), sealed with `keys` when `sealed`. */
static int lane_init(struct link *l, struct lane *ln, int fd, bool sealed,
		     enum qft_cipher cipher,
		     const struct qft_session_keys *keys)
{
	int r;

	ln->l = l;
	r = qft_chan_init(&ln->chan, fd, fd);
	if (r < 0)
		return r;
	if (sealed) {
		r = qft_seal_init(&ln->tx, cipher, keys->c2s, true);
		if (r < 0)
			goto out_destroy_chan;
		r = qft_seal_init(&ln->rx, cipher, keys->s2c, false);
		if (r < 0) {
			qft_seal_free(&ln->tx);
			goto out_destroy_chan;
		}
		ln->sealed = true;
		qft_chan_set_seal(&ln->chan, &ln->tx, &ln->rx);
	}
	return 0;

out_destroy_chan:
	/* The fd is the caller's to close. */
	ln->chan.rfd = ln->chan.wfd = -1;
	qft_chan_destroy(&ln->chan);
	return r;
}

/* Closes a lane's stream and frees its seals. */
static void lane_destroy(struct lane *ln)
{
	qft_chan_destroy(&ln->chan);
	if (ln->sealed) {
		qft_seal_free(&ln->tx);
		qft_seal_free(&ln->rx);
		ln->sealed = false;
	}
}

/* Adds the meta lane from ep's meta stream (taken, keys wiped); before
 * the link's readers start.  On failure the link stays on one lane. */
static int link_add_meta(struct link *l, struct qc_endpoint *ep)
{
	int r;

	r = lane_init(l, &l->lane[LANE_META], ep->meta_fd, ep->sealed,
		      ep->cipher, &ep->meta_keys);
	if (r == 0) {
		ep->meta_fd = -1;
		ep->meta = false;
		if (ep->sealed)
			qft_session_keys_wipe(&ep->meta_keys);
		l->nlanes = 2;
		return 0;
	}
	wipe_meta(ep);
	return r;
}

/* Back to the bulk lane alone; before the readers start. */
static void link_drop_meta(struct link *l)
{
	if (l->nlanes < 2)
		return;
	lane_destroy(&l->lane[LANE_META]);
	l->nlanes = 1;
}

/* A link over `ep`: its fds are taken (closed on failure), its keys
 * wiped.  Not yet reading. */
static int link_new(struct qc_conn *c, struct qc_endpoint *ep,
		    struct link **out)
{
	struct link *l;
	int r;

	l = calloc(1, sizeof(*l));
	if (!l) {
		r = -ENOMEM;
		goto out_wipe;
	}
	l->c = c;
	r = lane_init(l, &l->lane[LANE_BULK], ep->fd, ep->sealed, ep->cipher,
		      &ep->keys);
	if (r < 0)
		goto out_free;
	l->nlanes = 1;
	wipe_endpoint_keys(ep);
	ep->fd = -1;            /* the channel's now */
	if (ep->meta && (r = link_add_meta(l, ep)) < 0)
		qft_warn("cannot set up the meta stream (%s); using one "
			 "stream", strerror(-r));
	l->ep = *ep;
	l->ep.meta = false;
	l->ep.meta_fd = -1;
	atomic_init(&l->last_rx, now_ns());
	atomic_init(&l->last_tx, now_ns());
	*out = l;
	return 0;

out_free:
	free(l);
out_wipe:
	wipe_endpoint_keys(ep);
	wipe_meta(ep);
	close(ep->fd);
	ep->fd = -1;
	return r;
}

/* Shuts every lane's stream down: readers and blocked senders return. */
static void link_shutdown(struct link *l)
{
	for (unsigned i = 0; i < l->nlanes; i++)
		qft_chan_shutdown(&l->lane[i].chan);
}

/* Joins the readers of a link nobody else uses any more. */
static void link_join(struct link *l)
{
	for (unsigned i = 0; i < l->nlanes; i++) {
		if (l->lane[i].reader_running) {
			pthread_join(l->lane[i].reader, NULL);
			l->lane[i].reader_running = false;
		}
	}
}

/*
 * Frees a link nobody uses any more (reader joined, no users): closes the
 * stream, then the transport behind it, unless `reap_ms` < 0, which
 * leaves ep.priv to the caller.
 */
static void link_free(struct qc_conn *c, struct link *l, int reap_ms)
{
	/* Bulk last: its lz4 statistics line, the one that tells about file
	 * data, is the link's last word (tests/test_lz4.py reads it). */
	for (unsigned i = l->nlanes; i-- > 0;)
		lane_destroy(&l->lane[i]);
	if (reap_ms >= 0 && c->o.ops)
		c->o.ops->close(c->o.ops_ctx, &l->ep,
				l->clean ? reap_ms : FAULT_REAP_MS, l->clean);
	free(l);
}

static const char *fail_reason(struct link *l, int err)
{
	/* Only the readers open records; the failing one has stopped. */
	for (unsigned i = 0; i < l->nlanes && err == -EBADMSG; i++)
		if (l->lane[i].sealed && l->lane[i].rx.failed)
			return "a record failed authentication (corrupted "
			       "or tampered with)";
	switch (err) {
	case -EPIPE:   return "the server closed the connection";
	case -ECONNRESET: return "the connection was reset";
	case -ETIMEDOUT: return "the connection timed out";
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
	rep.pool = p->pool;
	if (r == 0) {
		r = check_reply(p->op, &rep);
		if (r < 0) {
			qc_reply_free(&rep);
			memset(&rep, 0, sizeof(rep));
		}
	} else {
		qc_reply_free(&rep);
	}
	p->cb(p->cb_ctx, r, r == 0 ? &rep : NULL);
	qc_reply_free(&rep);
	if (p->oc) {
		pthread_mutex_lock(&p->oc->olock);
		if (--p->oc->ordered == 0)
			pthread_cond_broadcast(&p->oc->ocond);
		pthread_mutex_unlock(&p->oc->olock);
	}
	free(p);
}

/* Whether any stream of `l` was granted change notification. */
static bool link_notifies(const struct link *l)
{
	for (unsigned i = 0; i < l->nlanes; i++)
		if (l->lane[i].notify)
			return true;
	return false;
}

/*
 * Marks link `l` dead and wakes every waiter: synchronous ones with -EIO,
 * asynchronous ones with -ENOTCONN.  Called by the reader when receiving
 * fails, by a sender when sending fails and by the watchdog when a
 * deadline passes (with `why` set).  The caller keeps `l` alive.
 */
static void link_fail(struct qc_conn *c, struct link *l, int err,
		      const char *why)
{
	struct pending *async = NULL;
	bool report;

	pthread_mutex_lock(&c->lock);
	if (l->dead) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	l->dead = true;
	l->clean = c->closing && err == -EPIPE;
	if (l == c->cur)
		atomic_store(&c->live_gen, 0);
	report = !c->closing;
	if (report) {
		c->lost = true;
		c->lost_at = now_ns();
	}
	for (unsigned b = 0; b < PENDING_BUCKETS; b++) {
		struct pending *p = c->pending[b];

		while (p) {
			struct pending *next = p->next;

			if (p->cb) {
				/* Completed below, outside the lock: the
				 * callbacks take their owners' locks. */
				p->err = -ENOTCONN;
				p->next = async;
				async = p;
			} else {
				p->err = -EIO;
				p->done = true;
				pthread_cond_signal(&p->cond);
			}
			p = next;
		}
		c->pending[b] = NULL;
	}
	l->npending = 0;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	while (async) {
		struct pending *next = async->next;

		complete_async(async);
		async = next;
	}
	if (report && why)
		qft_err("%s: connection lost", why);
	else if (report)
		qft_err("connection to server lost: %s", fail_reason(l, err));
	/* Senders blocked on a full socket must not wait for a dead peer;
	 * the other lane's reader must end too. */
	link_shutdown(l);
	/* The server's watches were this link's: no lease outlives it. */
	if (link_notifies(l) && c->o.notify)
		c->o.notify(c->o.notify_ctx, 0, QFT_NOTIFY_ALL, "", 0);
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

static struct pending *find_pending(struct qc_conn *c, uint64_t id)
{
	for (struct pending *p = c->pending[id % PENDING_BUCKETS]; p;
	     p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

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
static int link_progress(struct link *l, const struct qbuf *in)
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
	p = l->dead ? NULL : find_pending(c, m.id);
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
		return link_progress(l, in);
	if (!(h->flags & QFT_F_REPLY)) {
		qft_err("server sent a %s %s frame", qft_op_name(h->op),
			h->flags & QFT_F_NOTIFY ? "notification (not agreed "
			"on)" : "request");
		return -EPROTO;
	}
	pthread_mutex_lock(&c->lock);
	/* A dead link's table entries are gone; its late frames are noise. */
	if (!l->dead) {
		p = take_pending(c, h->id);
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
	struct lane *ln = arg;
	struct link *l = ln->l;
	struct qc_conn *c = l->c;
	struct qft_hdr h;
	struct qbuf in;
	uint8_t *buf;
	int r;

	buf = qft_pool_get(c->rpool, reader_stop, l, RPOOL_POLL_MS);
	if (!buf) {
		link_fail(c, l, -ENOMEM, NULL);
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
	link_fail(c, l, r, NULL);
	return NULL;
}

static int link_start(struct link *l)
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
		link_shutdown(l);
		link_join(l);
		return -r;
	}
	atomic_store(&l->last_rx, now_ns());
	return 0;
}

/*
 * Version handshake on a lane that is not reading yet.  See
 * qc_conn_hello for the results.
 */
static int lane_hello(struct lane *ln, int timeout_s, char *msg, size_t size)
{
	struct link *l = ln->l;
	struct timeval tv = { .tv_sec = timeout_s };
	const struct timeval off = { 0 };
	struct qft_msg m, rep;
	struct qft_hdr h;
	struct qbuf b;
	int r;

	msg[0] = '\0';
	qbuf_init(&b, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_HELLO, next_id(l->c));
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = qft_chan_lz4_offer(l->c->o.compress);
	if (l->c->o.want_notify)
		m.features |= QFT_FEAT_NOTIFY;
	if (l->c->o.want_follow)
		m.features |= QFT_FEAT_FOLLOW;
	m.features |= QFT_FEAT_PROGRESS;
	m.features |= QFT_FEAT_LAZY;
	r = qft_chan_send_msg(&ln->chan, &b, &m);
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
	setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = qft_chan_recv(&ln->chan, &b, &h);
	setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &off, sizeof(off));
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
		snprintf(msg, size, "handshake failed: %s", fail_reason(l, r));
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
	if (l->c->o.want_follow && !(rep.features & QFT_FEAT_FOLLOW)) {
		snprintf(msg, size, "the server does not follow symlinks "
			 "(-o follow_symlinks): its command was not started "
			 "with --follow-symlinks (a forced command, or "
			 "-o server= dropping it); add that option there or "
			 "mount without follow_symlinks");
		r = -EPROTO;
		goto out_free_buf;
	}
	/* Before the reader starts: no compressed frame can come earlier. */
	qft_chan_lz4_agreed(&ln->chan, l->c->o.compress, rep.features);
	/* Both streams reach one server process; bulk's answer counts. */
	if (ln == &l->lane[LANE_BULK]) {
		l->srv_uid = rep.uid;
		l->srv_gid = rep.gid;
	}
	/* A bit that was not asked for grants nothing. */
	ln->notify = l->c->o.want_notify && (rep.features & QFT_FEAT_NOTIFY);
	ln->progress = rep.features & QFT_FEAT_PROGRESS;
	ln->lazy = rep.features & QFT_FEAT_LAZY;
	r = 0;
out_free_buf:
	qbuf_free(&b);
	return r;
}

/*
 * The handshake of a link: on bulk, then on meta when there is (or the
 * transport can make) one.  A meta stream the server closes, or that
 * fails otherwise, is dropped: the link runs on bulk alone.
 */
static int link_hello(struct link *l, int timeout_s, char *msg, size_t size)
{
	const struct qc_transport_ops *ops = l->c->o.ops;
	char mmsg[QFT_MAX_ERRMSG + 128];
	int r;

	r = lane_hello(&l->lane[LANE_BULK], timeout_s, msg, size);
	if (r < 0)
		return r;
	if (l->nlanes < 2 && ops && ops->open_meta) {
		struct qc_endpoint *ep = &l->ep;

		r = ops->open_meta(l->c->o.ops_ctx, ep);
		if (r == 0 && (r = link_add_meta(l, ep)) < 0)
			qft_warn("cannot set up the meta stream (%s); using "
				 "one stream", strerror(-r));
	}
	if (l->nlanes < 2)
		return 0;
	r = lane_hello(&l->lane[LANE_META], timeout_s, mmsg, sizeof(mmsg));
	if (r == -EPIPE) {
		qft_info("the server serves one stream: metadata shares it "
			 "with file data");
		link_drop_meta(l);
	} else if (r < 0) {
		qft_warn("meta stream: %s; using one stream",
			 mmsg[0] ? mmsg : strerror(-r));
		link_drop_meta(l);
	} else {
		qft_debug("two streams: bulk and meta");
	}
	return 0;
}

/* -------------------------------------------------------------------------
 * Setup and teardown
 */

int qc_conn_new(struct qc_conn **out, const struct qc_conn_opts *o,
		struct qc_endpoint *ep)
{
	pthread_condattr_t ca;
	struct qc_conn *c;
	struct link *l;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c) {
		wipe_endpoint_keys(ep);
		wipe_meta(ep);
		close(ep->fd);
		ep->fd = -1;
		return -ENOMEM;
	}
	c->o = *o;
	if (c->o.timeout_s <= 0)
		c->o.timeout_s = QC_TIMEOUT_DEFAULT;
	r = qft_pool_new(&c->rpool, FRAME_LIMIT, RPOOL_KEEP, RPOOL_MAX);
	if (r < 0) {
		wipe_endpoint_keys(ep);
		wipe_meta(ep);
		close(ep->fd);
		ep->fd = -1;
		free(c);
		return r;
	}
	r = link_new(c, ep, &l);
	if (r < 0) {
		qft_pool_release(c->rpool);
		free(c);
		return r;
	}
	atomic_init(&c->next_id, 1);
	atomic_init(&c->live_gen, 1);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->hlock, NULL);
	pthread_mutex_init(&c->olock, NULL);
	pthread_cond_init(&c->ocond, NULL);
	/* Deadlines must not move with the wall clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_cond_init(&c->ping_cond, &ca);
	pthread_condattr_destroy(&ca);
	l->gen = c->last_gen = 1;
	c->hgen = 1;
	c->cur = l;
	*out = c;
	return 0;
}

void qc_conn_free(struct qc_conn *c)
{
	if (!c)
		return;
	/* A reconnect attempt that would not end still uses everything;
	 * the process is exiting, which frees it all at once. */
	if (c->abandoned)
		return;
	if (c->cur) {
		struct link *l = c->cur;

		link_shutdown(l);
		link_join(l);
		link_free(c, l, 0);
		c->cur = NULL;
	}
	pthread_cond_destroy(&c->ping_cond);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->hlock);
	pthread_cond_destroy(&c->ocond);
	pthread_mutex_destroy(&c->olock);
	pthread_mutex_destroy(&c->lock);
	/* Replies still held give their buffers back to it later. */
	qft_pool_release(c->rpool);
	free(c);
}

int qc_conn_hello(struct qc_conn *c, int timeout_s, char *msg, size_t size)
{
	int r = link_hello(c->cur, timeout_s, msg, size);

	/* Still single threaded: no lock needed, but it costs nothing. */
	pthread_mutex_lock(&c->lock);
	c->srv_uid = c->cur->srv_uid;
	c->srv_gid = c->cur->srv_gid;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void qc_conn_server_ids(struct qc_conn *c, uint32_t *uid, uint32_t *gid)
{
	pthread_mutex_lock(&c->lock);
	*uid = c->srv_uid;
	*gid = c->srv_gid;
	pthread_mutex_unlock(&c->lock);
}

/*
 * Waits (conn lock held) until link `l` has no users, then drops the lock
 * to join its reader and free it.  `l` must be dead and no longer
 * reachable by new users (cur moved on, or closing with the table empty).
 */
static void link_retire(struct qc_conn *c, struct link *l, int reap_ms)
{
	while (l->users)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	link_join(l);
	link_free(c, l, reap_ms);
	pthread_mutex_lock(&c->lock);
}

/*
 * One attempt at a new link: a fresh endpoint from the transport and the
 * handshake; not reading yet.  No lock held.
 */
static int link_make(struct qc_conn *c, struct link **out)
{
	char msg[QFT_MAX_ERRMSG + 128];
	struct qc_endpoint ep;
	struct link *l;
	int r;

	memset(&ep, 0, sizeof(ep));
	ep.fd = -1;
	ep.meta_fd = -1;
	r = c->o.ops->open(c->o.ops_ctx, &ep);
	if (r < 0)
		return r;
	r = link_new(c, &ep, &l);
	if (r < 0) {
		qft_err("cannot set up the new connection: %s", strerror(-r));
		c->o.ops->close(c->o.ops_ctx, &ep, FAULT_REAP_MS, false);
		return r;
	}
	pthread_mutex_lock(&c->lock);
	c->attempt = c->closing ? NULL : l;
	r = c->closing ? -ECANCELED : 0;
	pthread_mutex_unlock(&c->lock);
	if (r == 0)
		r = link_hello(l, c->o.timeout_s, msg, sizeof(msg));
	pthread_mutex_lock(&c->lock);
	c->attempt = NULL;
	if (c->closing && r < 0)
		r = -ECANCELED;
	pthread_mutex_unlock(&c->lock);
	if (r == -EPIPE)
		snprintf(msg, sizeof(msg), "the server closed the connection "
			 "during the handshake");
	if (r < 0) {
		if (r != -ECANCELED)
			qft_err("cannot reconnect to %s: %s",
				c->o.host ? c->o.host : "the server", msg);
		link_shutdown(l);
		link_free(c, l, FAULT_REAP_MS);
		return r;
	}
	*out = l;
	return 0;
}

/* Makes `l` the live link: new generation, fresh handle numbers.  Conn
 * lock held. */
static void link_install(struct qc_conn *c, struct link *l)
{
	l->gen = ++c->last_gen;
	pthread_mutex_lock(&c->hlock);
	c->hgen = l->gen;
	memset(c->hmap, 0, sizeof(c->hmap));
	memset(c->hdir, 0, sizeof(c->hdir));
	c->hnext = 0;
	pthread_mutex_unlock(&c->hlock);
	c->cur = l;
	c->lost = false;
	/* A reconnect may reach a server running as someone else. */
	c->srv_uid = l->srv_uid;
	c->srv_gid = l->srv_gid;
	atomic_store(&c->live_gen, l->gen);
	pthread_cond_broadcast(&c->cond);
}

/*
 * After a loss: new links with backoff until one works or the connection
 * is shut down.  Conn lock held (dropped during attempts and waits).
 */
static void reconnect(struct qc_conn *c)
{
	int64_t delay = NS_PER_S, start = c->lost_at, until;
	const char *host = c->o.host ? c->o.host : "the server";
	unsigned attempt = 0;

	while (!c->closing) {
		struct link *l = NULL;
		int r;

		attempt++;
		qft_info("reconnecting to %s (attempt %u)", host, attempt);
		pthread_mutex_unlock(&c->lock);
		r = link_make(c, &l);
		pthread_mutex_lock(&c->lock);
		/* Its reader starts under the lock, so that whatever it
		 * does first happens to the installed link. */
		if (r == 0 && !c->closing && (r = link_start(l)) < 0)
			qft_err("cannot start the reader thread: %s",
				strerror(-r));
		if (r == 0 && !c->closing) {
			link_install(c, l);
			qft_info("reconnected to %s after %.0f s", host,
				 (double)(now_ns() - start) / NS_PER_S);
			return;
		}
		if (l) {
			/* Unmounting meanwhile, or no thread: not wanted. */
			pthread_mutex_unlock(&c->lock);
			link_free(c, l, FAULT_REAP_MS);
			pthread_mutex_lock(&c->lock);
			l = NULL;
		}
		if (c->closing)
			return;
		/* Woken early only by closing. */
		until = now_ns() + delay;
		while (!c->closing && !wait_until(&c->cond, &c->lock, until))
			;
		delay = delay * 2 > BACKOFF_MAX_S * NS_PER_S ?
			BACKOFF_MAX_S * NS_PER_S : delay * 2;
	}
}

/*
 * Why the live link `l` must be given up, or NULL.  Conn lock held.
 * Replies come in the order the server executes requests, so silence
 * while anything is outstanding, or one request unanswered for longer than
 * the deadline, means the link or the server is stuck.
 */
static const char *link_overdue(struct qc_conn *c, struct link *l,
				int64_t now, char *buf, size_t size)
{
	int64_t limit = deadline_ns(c), quiet, oldest = 0;
	uint16_t op = 0;

	if (!l->npending)
		return NULL;
	quiet = atomic_load(&l->last_rx);
	if (quiet < l->busy_since)
		quiet = l->busy_since;
	if (now - quiet >= limit) {
		snprintf(buf, size, "no reply from server for %d s",
			 c->o.timeout_s);
		return buf;
	}
	for (unsigned b = 0; b < PENDING_BUCKETS; b++)
		for (struct pending *p = c->pending[b]; p; p = p->next)
			if (p->sent_ns && (!oldest || p->sent_ns < oldest)) {
				oldest = p->sent_ns;
				op = p->op;
			}
	if (oldest && now - oldest >= limit) {
		snprintf(buf, size, "no reply to a %s request within %d s",
			 qft_op_name(op), c->o.timeout_s);
		return buf;
	}
	return NULL;
}

/*
 * The watchdog: deadlines and keepalives on the live link, and after a
 * loss, tearing the dead link down and making a new one.
 */
static void *watchdog_main(void *arg)
{
	struct qc_conn *c = arg;
	int64_t keep = (int64_t)c->o.keepalive_s * NS_PER_S;
	char why[128];

	pthread_mutex_lock(&c->lock);
	while (!c->closing) {
		struct link *l = c->cur;
		int64_t now = now_ns(), next;

		if (l && !l->dead) {
			const char *reason = link_overdue(c, l, now, why,
							  sizeof(why));
			int64_t rx = atomic_load(&l->last_rx);
			int64_t tx = atomic_load(&l->last_tx);

			if (reason) {
				l->users++;
				pthread_mutex_unlock(&c->lock);
				link_fail(c, l, -ETIMEDOUT, reason);
				pthread_mutex_lock(&c->lock);
				l->users--;
				continue;
			}
			next = now + WATCH_TICK_MS * NS_PER_MS;
			if (!l->npending) {
				int64_t quiet = rx > tx ? rx : tx;

				if (keep && now - quiet >= keep) {
					c->ping_wanted = true;
					pthread_cond_signal(&c->ping_cond);
				}
				/* Idle: a request made meanwhile is looked
				 * at within a second. */
				next = now + IDLE_TICK_MS * NS_PER_MS;
				if (keep && quiet + keep > now &&
				    quiet + keep < next)
					next = quiet + keep;
			}
			wait_until(&c->cond, &c->lock, next);
			continue;
		}
		if (l) {
			/* Dead: nobody can reach it once cur moves on. */
			c->cur = NULL;
			link_retire(c, l, FAULT_REAP_MS);
			continue;
		}
		if (c->o.reconnect && c->o.ops) {
			reconnect(c);
			continue;
		}
		/* Lost for good: calls fail at once; wait for the end. */
		pthread_cond_wait(&c->cond, &c->lock);
	}
	c->watchdog_done = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static int call_async(struct qc_conn *c, uint64_t gen, unsigned lane,
		      struct qft_msg *req, qc_done_fn *done, void *ctx,
		      bool ordered);

static void ping_done(void *ctx, int err, struct qc_reply *rep)
{
	/* An answer is all a PING asks for; a loss is reported by the
	 * link's failure. */
	(void)ctx;
	(void)err;
	(void)rep;
}

/*
 * Sends the PINGs the watchdog asks for.  A thread of its own: a send can
 * block on a full socket, and the watchdog must keep watching meanwhile
 * (it unblocks the send by shutting the link down).
 */
static void *pinger_main(void *arg)
{
	struct qc_conn *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->closing) {
		struct qft_msg m;
		unsigned lanes;
		uint64_t gen;

		if (!c->ping_wanted) {
			pthread_cond_wait(&c->ping_cond, &c->lock);
			continue;
		}
		c->ping_wanted = false;
		if (!c->cur || c->cur->dead || c->cur->npending)
			continue;
		gen = c->cur->gen;
		lanes = c->cur->nlanes;
		pthread_mutex_unlock(&c->lock);
		/* Each lane can die on its own: each is probed. */
		for (unsigned i = 0; i < lanes; i++) {
			qft_msg_init(&m, QFT_OP_PING, 0);
			(void)call_async(c, gen, i, &m, ping_done, NULL,
					 false);
		}
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int qc_conn_start(struct qc_conn *c)
{
	int r;

	r = link_start(c->cur);
	if (r < 0)
		return r;
	r = -qft_thread_start(&c->watchdog, watchdog_main, c);
	if (r)
		goto out_stop_reader;
	r = -qft_thread_start(&c->pinger, pinger_main, c);
	if (r)
		goto out_stop_watchdog;
	c->started = true;
	return 0;

out_stop_watchdog:
	pthread_mutex_lock(&c->lock);
	c->closing = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->watchdog, NULL);
out_stop_reader:
	/* The caller shuts down what is left. */
	return -r;
}

bool qc_conn_lost(struct qc_conn *c)
{
	bool lost;

	pthread_mutex_lock(&c->lock);
	lost = c->lost;
	pthread_mutex_unlock(&c->lock);
	return lost;
}

/* Stops the watchdog, waiting a bounded time for a reconnect attempt in
 * progress; false when it had to be left running. */
static bool stop_watchdog(struct qc_conn *c)
{
	int64_t until = now_ns() + ATTEMPT_WAIT_MS * NS_PER_MS;
	bool done;

	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->cond);
	while (!c->watchdog_done && !wait_until(&c->cond, &c->lock, until))
		;
	done = c->watchdog_done;
	pthread_mutex_unlock(&c->lock);
	if (done) {
		pthread_join(c->watchdog, NULL);
		return true;
	}
	qft_warn("a reconnect attempt is still running; leaving it behind");
	pthread_detach(c->watchdog);
	return false;
}

/*
 * Half-closes the live link and waits for the server to close its side:
 * at most until `until`, and at most SHUTDOWN_SILENCE_MS past the last
 * frame received.  Conn lock not held.
 */
static void link_drain(struct qc_conn *c, struct link *l, int64_t until)
{
	int64_t start = now_ns();
	struct timespec rt;

	/*
	 * Half-close, under the write lock so no frame is cut: the server
	 * reads end of stream after our last request, answers everything
	 * before it and exits, which closes its side and ends our reader.
	 * A sender stuck on a full socket holds the lock: then the server
	 * is not reading, and waiting for it is pointless.
	 */
	clock_gettime(CLOCK_REALTIME, &rt);
	rt.tv_sec += SHUTDOWN_SILENCE_MS / 1000;
	for (unsigned i = 0; i < l->nlanes; i++) {
		struct qft_chan *ch = &l->lane[i].chan;

		if (pthread_mutex_timedlock(&ch->wlock, &rt) != 0)
			return;
		shutdown(ch->wfd, SHUT_WR);
		pthread_mutex_unlock(&ch->wlock);
	}

	pthread_mutex_lock(&c->lock);
	while (!l->dead) {
		int64_t rx = atomic_load(&l->last_rx);
		int64_t end = (rx > start ? rx : start) +
			      SHUTDOWN_SILENCE_MS * NS_PER_MS;

		if (end > until)
			end = until;
		if (now_ns() >= end)
			break;
		wait_until(&c->cond, &c->lock, end);
	}
	pthread_mutex_unlock(&c->lock);
}

int qc_conn_shutdown(struct qc_conn *c, int timeout_ms, int reap_ms)
{
	int64_t until = now_ns() + (int64_t)timeout_ms * NS_PER_MS;
	struct link *l;
	int r;

	pthread_mutex_lock(&c->lock);
	c->closing = true;
	atomic_store(&c->live_gen, 0);
	if (c->attempt)
		link_shutdown(c->attempt);
	pthread_cond_broadcast(&c->cond);
	pthread_cond_broadcast(&c->ping_cond);
	pthread_mutex_unlock(&c->lock);
	if (c->started && !stop_watchdog(c)) {
		c->abandoned = true;
		return -EINPROGRESS;
	}

	pthread_mutex_lock(&c->lock);
	l = c->cur;
	r = !l || l->dead ? -EIO : 0;
	pthread_mutex_unlock(&c->lock);
	if (l && r == 0 && l->lane[LANE_BULK].reader_running)
		link_drain(c, l, until);
	if (l) {
		/* A server that did not close in time is cut off. */
		link_fail(c, l, -ECANCELED, NULL);
	}
	if (c->started) {
		pthread_join(c->pinger, NULL);
		c->started = false;
	}
	pthread_mutex_lock(&c->lock);
	if (l) {
		if (r == 0 && !l->clean)
			r = -ETIMEDOUT;
		c->cur = NULL;
		link_retire(c, l, reap_ms);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* -------------------------------------------------------------------------
 * Calls
 */

/*
 * The link to send on: the live one, which must be `gen` unless gen is 0;
 * with gen 0, waits for one until the deadline.  Takes a user reference.
 * Conn lock held.  -ENOTCONN (gen given) or -EIO.
 */
static int link_get(struct qc_conn *c, uint64_t gen, struct link **out)
{
	int64_t until = 0;

	for (;;) {
		struct link *l = c->cur;

		if (c->closing)
			return gen ? -ENOTCONN : -EIO;
		if (l && !l->dead) {
			if (gen && l->gen != gen)
				return -ENOTCONN;
			l->users++;
			*out = l;
			return 0;
		}
		if (gen)
			return -ENOTCONN;
		if (!c->o.reconnect || !c->started)
			return -EIO;
		if (!until)
			until = now_ns() + deadline_ns(c);
		if (wait_until(&c->cond, &c->lock, until))
			return -EIO;
	}
}

static void link_put(struct qc_conn *c, struct link *l)
{
	if (--l->users == 0)
		pthread_cond_broadcast(&c->cond);
}

/* Puts p in the table for link l; conn lock held. */
static void pending_add(struct qc_conn *c, struct link *l, struct pending *p)
{
	p->next = c->pending[p->id % PENDING_BUCKETS];
	c->pending[p->id % PENDING_BUCKETS] = p;
	if (l->npending++ == 0)
		l->busy_since = now_ns();
}

/*
 * Sends on link l (a user reference held) and drops the reference.  On a
 * failed send the link is failed, which completes the request (`id`, if
 * any) unless it could not even be encoded.
 */
static int link_send(struct qc_conn *c, struct link *l, unsigned lane,
		     struct qft_msg *req, uint64_t id)
{
	uint8_t stack[HEAD_STACK];
	struct qbuf out = { .data = stack, .cap = sizeof(stack),
			    .limit = sizeof(stack) };
	struct qft_blob tail;
	struct iovec iov[2];
	uint32_t opflags = req->opflags;
	int r;

	if (lane >= l->nlanes)
		lane = LANE_BULK;
	/* QFT_O_LAZY is a hint the callers set whatever the server: a
	 * server that did not agree on it (an older one, after a
	 * reconnect too) would refuse the open, and without it only the
	 * pace of the WRITEs changes.  The caller's request keeps it for a
	 * resend on another link. */
	if ((req->op == QFT_OP_OPEN || req->op == QFT_OP_CREATE) &&
	    !l->lane[lane].lazy)
		req->opflags &= ~QFT_O_LAZY;
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
		link_fail(c, l, r, NULL);
		r = -EIO;
		goto out_put;
	}
	atomic_store(&l->last_tx, now_ns());
out_put:
	pthread_mutex_lock(&c->lock);
	if (r == 0 && id) {
		/* Its deadline runs from now: time spent waiting for the
		 * socket is time the link was busy, not stuck. */
		struct pending *p = find_pending(c, id);

		if (p)
			p->sent_ns = now_ns();
	}
	link_put(c, l);
	pthread_mutex_unlock(&c->lock);
	return r;
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

/*
 * The lane for `req` on link `gen` (conn.h, "Two streams"): requests that
 * name no handle (gen 0) and everything bound to a directory handle go on
 * meta, the rest on bulk.  An OPENDIR marks its handle as a directory's
 * until qc_handle_free.
 */
static unsigned route(struct qc_conn *c, uint64_t gen,
		      const struct qft_msg *req)
{
	uint64_t n = req->handle - 1, mask = (uint64_t)1 << (n % 64);
	bool dir = false;

	if (!gen)
		return LANE_META;
	if (req->handle == 0 || req->handle > QFT_MAX_HANDLES)
		return LANE_BULK;
	pthread_mutex_lock(&c->hlock);
	if (gen == c->hgen) {
		if (req->op == QFT_OP_OPENDIR)
			c->hdir[n / 64] |= mask;
		dir = c->hdir[n / 64] & mask;
	}
	pthread_mutex_unlock(&c->hlock);
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
	int r;

	if (lane == LANE_META)
		wait_ordered(c);

	memset(rep, 0, sizeof(*rep));
	qbuf_init(&rep->frame, FRAME_LIMIT);
	req->flags = 0;
	req->id = next_id(c);

	memset(&p, 0, sizeof(p));
	p.id = req->id;
	p.op = req->op;
	qbuf_init(&p.frame, FRAME_LIMIT);
	pthread_cond_init(&p.cond, NULL);
	atomic_fetch_add(&c->n_waited, 1);

	/* Registered before sending, so the reply always finds its waiter. */
	pthread_mutex_lock(&c->lock);
	r = link_get(c, gen, &l);
	if (r < 0) {
		pthread_mutex_unlock(&c->lock);
		goto out_destroy;
	}
	pending_add(c, l, &p);
	pthread_mutex_unlock(&c->lock);

	r = link_send(c, l, lane, req, p.id);
	pthread_mutex_lock(&c->lock);
	if (r < 0 && !p.done) {
		/* Not sent (encoding failed): nobody else will wake us. */
		if (take_pending(c, p.id) && !l->dead)
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
		frame_free(&p.frame, &p.pool);
		goto out_destroy;
	}
	rep->frame = p.frame;
	rep->pool = p.pool;
	r = check_reply(req->op, rep);
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

static int call_async(struct qc_conn *c, uint64_t gen, unsigned lane,
		      struct qft_msg *req, qc_done_fn *done, void *ctx,
		      bool ordered)
{
	struct pending *p;
	struct link *l;
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
	req->flags = 0;
	req->id = next_id(c);
	p->id = id = req->id;

	pthread_mutex_lock(&c->lock);
	r = gen ? link_get(c, gen, &l) : -ENOTCONN;
	if (r < 0) {
		pthread_mutex_unlock(&c->lock);
		p->err = r;
		complete_async(p);
		return r;
	}
	pending_add(c, l, p);
	pthread_mutex_unlock(&c->lock);

	/* Once sent, p belongs to the reader, which may free it any time. */
	r = link_send(c, l, lane, req, id);
	if (r < 0) {
		/* A failed send killed the link, which completed p; only a
		 * frame that could not even be encoded is still ours. */
		pthread_mutex_lock(&c->lock);
		p = take_pending(c, id);
		if (p && !l->dead)
			l->npending--;
		pthread_mutex_unlock(&c->lock);
		if (p) {
			p->err = r;
			complete_async(p);
		}
	}
	return r;
}

int qc_call_async(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		  qc_done_fn *done, void *ctx)
{
	return call_async(c, gen, route(c, gen, req), req, done, ctx, false);
}

int qc_call_ordered(struct qc_conn *c, uint64_t gen, struct qft_msg *req,
		    qc_done_fn *done, void *ctx)
{
	return call_async(c, gen, LANE_BULK, req, done, ctx, true);
}

int qc_send_noreply(struct qc_conn *c, uint64_t gen, struct qft_msg *req)
{
	unsigned lane = route(c, gen, req);
	struct link *l;
	int r;

	pthread_mutex_lock(&c->lock);
	r = gen ? link_get(c, gen, &l) : -ENOTCONN;
	pthread_mutex_unlock(&c->lock);
	if (r < 0)
		return r;
	req->flags = 0;
	req->id = next_id(c);
	atomic_fetch_add(&c->n_noreply, 1);
	return link_send(c, l, lane, req, 0);
}

void qc_conn_counts(struct qc_conn *c, struct qc_conn_counts *out)
{
	struct qft_chan_lz4_stats z;
	struct link *l;

	out->waited = atomic_load(&c->n_waited);
	out->async = atomic_load(&c->n_async);
	out->noreply = atomic_load(&c->n_noreply);
	/* The live link, held as a user so that its lanes stay while the
	 * channel's own lock is taken without ours. */
	pthread_mutex_lock(&c->lock);
	out->links = c->last_gen;
	out->pending = out->oldest_ms = out->writes_pending = 0;
	for (unsigned b = 0; b < PENDING_BUCKETS; b++)
		for (struct pending *p = c->pending[b]; p; p = p->next) {
			out->pending++;
			out->writes_pending += p->op == QFT_OP_WRITE;
			if (p->sent_ns && (uint64_t)(now_ns() - p->sent_ns) /
			    1000000 > out->oldest_ms)
				out->oldest_ms = (uint64_t)(now_ns() -
							    p->sent_ns) / 1000000;
		}
	l = c->cur && !c->cur->dead && !c->closing ? c->cur : NULL;
	if (l)
		l->users++;
	pthread_mutex_unlock(&c->lock);
	if (!l)
		return;
	qft_chan_lz4_stats(&l->lane[LANE_BULK].chan, &z);
	out->tx_bytes = z.tx_bytes;
	out->tx_wire = z.tx_wire;
	out->rx_bytes = z.rx_bytes;
	out->rx_wire = z.rx_wire;
	pthread_mutex_lock(&c->lock);
	link_put(c, l);
	pthread_mutex_unlock(&c->lock);
}

int qc_conn_wait(struct qc_conn *c, uint64_t *gen)
{
	struct link *l;
	int r;

	pthread_mutex_lock(&c->lock);
	r = link_get(c, 0, &l);
	if (r == 0) {
		*gen = l->gen;
		link_put(c, l);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

uint64_t qc_conn_gen(struct qc_conn *c)
{
	return atomic_load(&c->live_gen);
}

/* -------------------------------------------------------------------------
 * Handles
 */

int qc_handle_alloc(struct qc_conn *c, uint64_t gen, uint64_t *handle)
{
	pthread_mutex_lock(&c->hlock);
	if (gen != c->hgen) {
		pthread_mutex_unlock(&c->hlock);
		return -ENOTCONN;
	}
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

void qc_handle_free(struct qc_conn *c, uint64_t gen, uint64_t handle)
{
	uint64_t n = handle - 1, mask;

	if (handle == 0 || handle > QFT_MAX_HANDLES) {
		qft_err("freeing invalid handle %llu",
			(unsigned long long)handle);
		return;
	}
	mask = (uint64_t)1 << (n % 64);
	pthread_mutex_lock(&c->hlock);
	if (gen != c->hgen) {
		pthread_mutex_unlock(&c->hlock);
		return;
	}
	if (!(c->hmap[n / 64] & mask))
		qft_err("handle %llu freed twice", (unsigned long long)handle);
	c->hmap[n / 64] &= ~mask;
	c->hdir[n / 64] &= ~mask;
	pthread_mutex_unlock(&c->hlock);
}

int qc_conn_parse_seconds(const char *name, const char *s, bool zero_ok,
			  int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < (zero_ok ? 0 : 1) ||
	    v > 24 * 3600) {
		fprintf(stderr, "qftfs: invalid %s '%s': expected whole "
			"seconds, %s\n", name, s,
			zero_ok ? "0 (off) to 86400" : "1 to 86400");
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}
