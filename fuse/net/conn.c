// SPDX-License-Identifier: MIT
/*
 * The connection (conn.h): making and freeing it, the first handshake,
 * starting its threads, shutting it down, and what it tells about itself
 * (live generation, server ids, counts).  The rest of it is in the files
 * conn_internal.h lists.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "log.h"
#include "net/conn_internal.h"
#include "pool.h"
#include "thread.h"

/*
 * Receive buffers come from the connection's pool (common/pool.h): a
 * large reply takes the reader's buffer with it and the reader takes the
 * next from the pool, so bulk data costs no malloc, free or page fault per
 * reply.  The pool keeps enough idle buffers for the default read-ahead
 * window (16 MiB, fuse/fs/fs.h).  Its cap is back-pressure of last resort:
 * what the client holds is bounded by its own windows -- read-ahead of all
 * files together at most twice the largest -o readahead= (1 GiB,
 * QC_STREAM_SIZE_MAX), one reply per waiting thread -- and the cap lies
 * above that, so a reader never waits for a buffer that only a reply
 * behind it could free.  Past it (a consumer that keeps replies without
 * bound) the reader stops reading rather than fail.
 */
#define RPOOL_KEEP      16u
#define RPOOL_MAX       (2048u + 256u)
/*
 * While shutting down, how long a silent server is given to close.  By
 * then the requests that do work were answered (a close() waits for its
 * FLUSH, the unmount for commit=async's SYNCFS), so a server that is
 * there closes within a round trip; on a link cut a moment ago, not yet
 * noticed, the unmount waits this long for nothing.
 */
#define SHUTDOWN_SILENCE_MS 1000
/* How long an unmount waits for a reconnect attempt in progress. */
#define ATTEMPT_WAIT_MS 2000

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
		qc_link_wipe_keys(ep);
		qc_link_wipe_meta(ep);
		close(ep->fd);
		ep->fd = -1;
		return -ENOMEM;
	}
	c->o = *o;
	if (c->o.timeout_s <= 0)
		c->o.timeout_s = QC_TIMEOUT_DEFAULT;
	r = qft_pool_new(&c->rpool, FRAME_LIMIT, RPOOL_KEEP, RPOOL_MAX);
	if (r < 0) {
		qc_link_wipe_keys(ep);
		qc_link_wipe_meta(ep);
		close(ep->fd);
		ep->fd = -1;
		free(c);
		return r;
	}
	r = qc_link_new(c, ep, &l);
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
	qc_seq_init(c);
	l->gen = c->last_gen = 1;
	qc_handle_reset(c, 1);
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

		qc_link_shutdown(l);
		qc_link_join(l);
		qc_link_free(c, l, 0);
		c->cur = NULL;
	}
	qc_seq_destroy(c);
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
	int r;

	/* Before the threads: nothing else uses the link yet. */
	assert(!c->started);
	r = qc_link_hello(c->cur, timeout_s, msg, size);
	if (r == 0 && (r = qc_stripe_setup(c, c->cur)) < 0)
		snprintf(msg, size, "cannot stripe the data connection (%s); "
			 "mount with -o streams=1 to use one", strerror(-r));
	/* Still single threaded: no lock needed, but it costs nothing. */
	pthread_mutex_lock(&c->lock);
	c->srv_uid = c->cur->srv_uid;
	c->srv_gid = c->cur->srv_gid;
	pthread_mutex_unlock(&c->lock);
	return r;
}

bool qc_conn_locks(struct qc_conn *c)
{
	bool on;

	pthread_mutex_lock(&c->lock);
	on = c->cur && (c->cur->lane[LANE_BULK].features & QFT_FEAT_LOCKS);
	pthread_mutex_unlock(&c->lock);
	return on;
}

void qc_conn_server_ids(struct qc_conn *c, uint32_t *uid, uint32_t *gid)
{
	pthread_mutex_lock(&c->lock);
	*uid = c->srv_uid;
	*gid = c->srv_gid;
	pthread_mutex_unlock(&c->lock);
}

int qc_conn_start(struct qc_conn *c)
{
	int r;

	assert(!c->started);
	r = qc_reader_start(c->cur);
	if (r < 0)
		return r;
	r = -qft_thread_start(&c->watchdog, qc_watchdog_main, c);
	if (r)
		goto out_stop_reader;
	r = -qft_thread_start(&c->pinger, qc_watchdog_pinger_main, c);
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
	rt.tv_nsec += (long)SHUTDOWN_SILENCE_MS * 1000000L;
	rt.tv_sec += rt.tv_nsec / 1000000000L;
	rt.tv_nsec %= 1000000000L;
	for (unsigned i = 0; i < l->nlanes; i++) {
		struct qft_chan *ch = &l->lane[i].chan;

		if (pthread_mutex_timedlock(&ch->wlock, &rt) != 0)
			return;
		qft_chan_end_locked(ch);
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
		qc_link_shutdown(c->attempt);
	pthread_cond_broadcast(&c->cond);
	pthread_cond_broadcast(&c->ping_cond);
	pthread_cond_broadcast(&c->rcond);
	pthread_mutex_unlock(&c->lock);
	if (c->started && !stop_watchdog(c)) {
		c->abandoned = true;
		return -EINPROGRESS;
	}

	/* A session still being resumed will not be. */
	qc_resume_end(c);
	pthread_mutex_lock(&c->lock);
	l = c->cur;
	r = !l || l->dead ? -EIO : 0;
	if (r == 0 && l->resume)
		l->users++;
	pthread_mutex_unlock(&c->lock);
	/* Behind everything on bulk: the server ends the session once it
	 * answered it, instead of keeping it for a resume. */
	if (l && r == 0 && l->resume)
		qc_resume_bye(c, l);
	if (l && r == 0 && l->lane[LANE_BULK].reader_running)
		link_drain(c, l, until);
	if (l) {
		/* A server that did not close in time is cut off. */
		qc_link_fail(c, l, -ECANCELED, NULL);
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
		qc_link_retire(c, l, reap_ms);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

_Static_assert(sizeof(((struct qc_conn_counts *)0)->cc_up) ==
	       QFT_TCPCC_NAME_MAX, "conn.h spells the tcpcc.h size out");

void qc_conn_counts(struct qc_conn *c, struct qc_conn_counts *out)
{
	struct qft_chan_lz4_stats z;
	unsigned used;
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
	out->state = l ? QC_LINK_UP : c->resuming ? QC_LINK_RESUMING :
		     QC_LINK_DOWN;
	out->resume_left_ms = 0;
	if (c->resuming && c->resume_until > now_ns())
		out->resume_left_ms = (uint64_t)(c->resume_until - now_ns()) /
				      1000000;
	out->resumes = c->resumes;
	out->restarts = c->restarts;
	out->kept = c->kept_n;
	out->kept_bytes = c->kept_bytes;
	if (l) {
		out->streams = l->streams ? l->streams : 1;
		out->streams_down = l->streams ? l->streams_down : 1;
	}
	pthread_mutex_unlock(&c->lock);
	if (!l)
		return;
	/* What each side sends on now: the stripes in use grow with loss
	 * (chan.h); the server said what it began with, and more than that
	 * once its chunks came in on more. */
	out->streams_up = qft_chan_tx_use(&l->lane[LANE_BULK].chan);
	used = qft_chan_rx_used(&l->lane[LANE_BULK].chan);
	if (used > out->streams_down)
		out->streams_down = used;
	qft_chan_lz4_stats(&l->lane[LANE_BULK].chan, &z);
	memcpy(out->cc_up, l->cc_up, sizeof(out->cc_up));
	memcpy(out->cc_down, l->cc_down, sizeof(out->cc_down));
	out->tx_bytes = z.tx_bytes;
	out->tx_wire = z.tx_wire;
	out->rx_bytes = z.rx_bytes;
	out->rx_wire = z.rx_wire;
	pthread_mutex_lock(&c->lock);
	qc_link_put(c, l);
	pthread_mutex_unlock(&c->lock);
}

int qc_conn_wait(struct qc_conn *c, uint64_t *gen)
{
	struct link *l;
	int r;

	pthread_mutex_lock(&c->lock);
	r = qc_link_get(c, 0, &l);
	if (r == 0) {
		*gen = l->gen;
		qc_link_put(c, l);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

uint64_t qc_conn_gen(struct qc_conn *c)
{
	return atomic_load(&c->live_gen);
}

uint32_t qc_conn_features(struct qc_conn *c, uint64_t gen)
{
	struct link *l;
	uint32_t f = 0;

	pthread_mutex_lock(&c->lock);
	if (gen && qc_link_get(c, gen, &l) == 0) {
		f = l->lane[LANE_BULK].features;
		qc_link_put(c, l);
	}
	pthread_mutex_unlock(&c->lock);
	return f;
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
