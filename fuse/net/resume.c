// SPDX-License-Identifier: MIT
/*
 * Resumable sessions (conn.h, "Resuming"; docs/protocol.md, "Resuming a
 * session"): numbering each lane's requests and keeping a copy of each
 * until its reply came, and, after the link died, connecting again to
 * the same server, sending RESUME and the kept requests, and going on
 * with the same generation -- or giving the session up when that cannot
 * work, which then fails what waits as a lost link always did.  Run by
 * senders (qc_resume_send), the readers (qc_seq_unkeep, through
 * qc_pending_take) and the watchdog (the rest).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include "errmap.h"
#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"

/* The request id's place in the frame header (docs/protocol.md,
 * "Framing"): a frame is encoded before its lane numbers it. */
#define HDR_ID_OFF      8u
/*
 * The copies kept, all lanes together: past this, senders wait for
 * replies.  Each file's write-behind window bounds its own WRITEs
 * (fs.h, 16 MiB by default, measured from the link otherwise), but not
 * the sum over files written at once; this does.
 */
#define KEPT_MAX        ((uint64_t)512 << 20)
/*
 * When attempts start, counted from the start of the one before: fast at
 * first, then every 2 s.  An attempt through a cut link lasts as long as
 * its connect timeouts (net/remote.c), and the next one starts as soon as
 * it failed if that is later, so that a SYN leaves about every second
 * (a connect's own retransmission, then the next attempt's) and the first
 * byte moves within about a second of the link's heal.
 */
static const int backoff_ms[] = { 200, 500, 1000, 2000 };

/* The lane's window (QFT_RESUME_WINDOW) or the bytes kept do not let
 * its next request go yet; conn lock held. */
static bool window_full(struct qc_conn *c, unsigned lane)
{
	const struct qc_rlane *rl = &c->rl[lane];

	return (rl->head && rl->head->seq + QFT_RESUME_WINDOW <= rl->next) ||
	       c->kept_bytes > KEPT_MAX;
}

int qc_resume_frame(const struct qft_msg *req, uint8_t **frame, size_t *len)
{
	struct qft_blob tail;
	struct qbuf head;
	int r;

	qbuf_init(&head, FRAME_LIMIT);
	r = qft_msg_encode_head(&head, req, &tail);
	if (r < 0) {
		qft_err("cannot encode a %s request: %s",
			qft_op_name(req->op), strerror(-r));
		qbuf_free(&head);
		return -EIO;
	}
	*len = head.len + tail.len;
	*frame = malloc(*len);
	if (!*frame) {
		qbuf_free(&head);
		return -EIO;
	}
	memcpy(*frame, head.data, head.len);
	if (tail.len)
		memcpy(*frame + head.len, tail.p, tail.len);
	qbuf_free(&head);
	return 0;
}

void qc_resume_number(struct qc_conn *c, struct link *l, unsigned lane,
		      struct pending *p)
{
	struct qc_rlane *rl = &c->rl[lane];
	uint64_t seq = rl->next++;

	qc_conn_assert_locked(c);
	p->seq = seq;
	p->lane = lane;
	p->id = QC_RKEY(lane, seq);
	qft_store64(p->kept + HDR_ID_OFF, seq);
	p->rnext = NULL;
	p->rprev = rl->tail;
	if (rl->tail)
		rl->tail->rnext = p;
	else
		rl->head = p;
	rl->tail = p;
	qc_pending_add(c, l, p);
}

/*
 * Sends `req` (with its pending entry p, never NULL) on lane `lane` of
 * the resumable link l, whose user reference it drops: encoded first,
 * numbered, kept and put in the table, then sent, all under the lane's
 * send lock so that ids go out in order.  When l is dead and its session
 * resuming, the request is numbered and kept but not sent: the resume
 * sends it.  Returns 0 when p is in the table (whoever takes it out
 * completes it, even when the send fails), or -EIO when it is not (l is
 * dead and its session given up, or the frame could not be encoded).
 */
int qc_resume_send(struct qc_conn *c, struct link *l, unsigned lane,
		   struct qft_msg *req, struct pending *p)
{
	struct iovec iov;
	uint8_t *frame;
	uint64_t key;
	bool queued = false;
	size_t len;
	int r;

	/* Encoded with id 0, numbered once the lane's lock is held: a
	 * frame that cannot be encoded must not leave a gap in the ids. */
	req->id = 0;
	r = qc_resume_frame(req, &frame, &len);
	if (r < 0)
		goto out_put;

	pthread_mutex_lock(&c->slock[lane]);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (l->dead) {
			if (!c->resuming) {
				pthread_mutex_unlock(&c->lock);
				pthread_mutex_unlock(&c->slock[lane]);
				free(frame);
				r = -EIO;
				goto out_put;
			}
			queued = true;
			break;
		}
		if (!window_full(c, lane))
			break;
		c->rwaiters++;
		pthread_cond_wait(&c->rcond, &c->lock);
		c->rwaiters--;
	}
	p->kept = frame;
	p->kept_len = len;
	qc_resume_number(c, l, lane, p);
	key = p->id;
	c->kept_n++;
	c->kept_bytes += len;
	pthread_mutex_unlock(&c->lock);

	r = 0;
	if (!queued) {
		/* The reply cannot come, and free the copy, before the
		 * server has all of it: sending from it is safe. */
		iov = (struct iovec){ frame, len };
		r = qft_chan_sendv(&l->lane[lane].chan, &iov, 1);
	}
	pthread_mutex_unlock(&c->slock[lane]);
	if (r < 0) {
		/* The session resumes (the copy goes again) or is given up
		 * (which completes p): p is in other hands either way. */
		qc_link_fail(c, l, r, NULL);
		r = 0;
	} else if (!queued) {
		atomic_store(&l->last_tx, now_ns());
		pthread_mutex_lock(&c->lock);
		/* Its deadline runs from now; it may be answered already. */
		if ((p = qc_pending_find(c, key)) != NULL)
			p->sent_ns = now_ns();
		pthread_mutex_unlock(&c->lock);
	}
out_put:
	pthread_mutex_lock(&c->lock);
	qc_link_put(c, l);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static void bye_done(void *ctx, int err, struct qc_reply *rep)
{
	/* The server ends the session after it; nothing to do here. */
	(void)ctx;
	(void)err;
	(void)rep;
}

/*
 * Sends BYE on bulk of the live resumable link l at unmount (closing is
 * set, so no call can be made; a user reference on l held, dropped).
 */
void qc_resume_bye(struct qc_conn *c, struct link *l)
{
	struct pending *p;
	struct qft_msg m;

	p = calloc(1, sizeof(*p));
	if (!p) {
		pthread_mutex_lock(&c->lock);
		qc_link_put(c, l);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	qbuf_init(&p->frame, FRAME_LIMIT);
	p->cb = bye_done;
	p->op = QFT_OP_BYE;
	qft_msg_init(&m, QFT_OP_BYE, 0);
	if (qc_resume_send(c, l, LANE_BULK, &m, p) < 0) {
		p->err = -EIO;
		qc_pending_complete(p);
	}
}

/*
 * Frees the dead link of a session being resumed, keeping what the next
 * link is made like: the endpoint's transport state (not closed), the
 * generation, the lanes and the features they agreed on.  Conn lock
 * held; c->cur no longer points at l.
 */
void qc_resume_retire(struct qc_conn *c, struct link *l)
{
	qc_conn_assert_locked(c);
	if (!c->rs.held) {
		c->rs.ep = l->ep;
		c->rs.held = true;
		c->rs.gen = l->gen;
		c->rs.nlanes = l->nlanes;
		for (unsigned i = 0; i < l->nlanes; i++)
			c->rs.features[i] = l->lane[i].features;
		c->rs.ep.keys = (struct qft_session_keys){ { 0 }, { 0 } };
		memcpy(c->rs.boot_id, l->boot_id, sizeof(c->rs.boot_id));
		memcpy(c->rs.cc_down, l->cc_down, sizeof(c->rs.cc_down));
	}
	qc_link_retire(c, l, -1);
}

/*
 * The session is given up (conn lock held; dropped and taken again):
 * every waiter fails, the generation goes, the transport is closed, and
 * leases end.  With `expired` (the grace passed), calls fail at once
 * until a new link is up.
 */
static void give_up(struct qc_conn *c, bool expired, const char *why)
{
	struct qc_endpoint ep = c->rs.ep;
	bool held = c->rs.held, notify;
	struct pending *async;

	qc_conn_assert_locked(c);
	notify = held && ((c->rs.features[LANE_BULK] |
			   c->rs.features[LANE_META]) & QFT_FEAT_NOTIFY);
	c->resuming = false;
	c->restarting = false;
	c->expired = expired;
	c->rs.held = false;
	c->lost = true;
	atomic_store(&c->live_gen, 0);
	async = qc_pending_fail_all(c);
	pthread_cond_broadcast(&c->cond);
	pthread_cond_broadcast(&c->rcond);
	pthread_mutex_unlock(&c->lock);
	while (async) {
		struct pending *next = async->next;

		qc_pending_complete(async);
		async = next;
	}
	if (why)
		qft_err("cannot resume the session: %s; operations in "
			"flight fail with EIO", why);
	if (held && c->o.ops)
		c->o.ops->close(c->o.ops_ctx, &ep, FAULT_REAP_MS, false);
	if (notify && c->o.notify)
		c->o.notify(c->o.notify_ctx, 0, QFT_NOTIFY_ALL, "", 0);
	pthread_mutex_lock(&c->lock);
}

/*
 * The session cannot be carried over to the new server (carry.c): what
 * waits for it fails, as when it is given up.  Conn lock held (dropped
 * and taken again).
 */
void qc_resume_abandon(struct qc_conn *c, const char *why)
{
	qc_conn_assert_locked(c);
	give_up(c, false, why);
}

/* At unmount (watchdog stopped): a session still being resumed fails
 * what waits for it and closes its transport. */
void qc_resume_end(struct qc_conn *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->resuming || c->rs.held)
		give_up(c, false, NULL);
	pthread_mutex_unlock(&c->lock);
}

/*
 * RESUME on lane i of the new link l, before its readers start: 0, or
 * -ESTALE / -EPROTO when the server will not resume it (final), or
 * another -errno (the link failed: try again).  *lost_notify is set when
 * the reply says notifications were dropped.
 */
static int lane_resume(struct qc_conn *c, struct link *l, unsigned i,
		       bool *lost_notify)
{
	struct lane *ln = &l->lane[i];
	struct timeval tv = { .tv_sec = c->o.timeout_s };
	const struct timeval off = { 0 };
	uint32_t feat = c->rs.features[i];
	struct qft_msg m, rep;
	struct qft_hdr h;
	struct qbuf b;
	uint64_t seq;
	int r;

	pthread_mutex_lock(&c->lock);
	seq = c->rl[i].head ? c->rl[i].head->seq : c->rl[i].next;
	pthread_mutex_unlock(&c->lock);

	qbuf_init(&b, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_RESUME, next_id(c));
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = feat;
	m.opflags = i == LANE_META ? QFT_RESUME_META : 0;
	m.seq = seq;
	r = qft_chan_send_msg(&ln->chan, &b, &m);
	if (r < 0)
		goto out_free_buf;
	setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = qft_chan_recv(&ln->chan, &b, &h);
	setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &off, sizeof(off));
	if (r < 0) {
		r = r == -EAGAIN || r == -EWOULDBLOCK ? -ETIMEDOUT : r;
		goto out_free_buf;
	}
	r = qft_msg_decode(&rep, b.data, b.len);
	if (r < 0 || !(rep.flags & QFT_F_REPLY) || rep.op != QFT_OP_RESUME ||
	    rep.id != m.id) {
		qft_err("the server answered RESUME with something else");
		r = -EPROTO;
		goto out_free_buf;
	}
	if (rep.status != QFT_OK) {
		r = -qft_errno_from_status(rep.status);
		qft_info("the server refused to resume the %s stream: %s",
			 i == LANE_META ? "meta" : "bulk",
			 rep.errmsg.len ? rep.errmsg.s : strerror(-r));
		r = r == -EPROTO ? -EPROTO : -ESTALE;
		goto out_free_buf;
	}
	pthread_mutex_lock(&c->lock);
	/* Its next id lies between what we hold no reply for and what we
	 * sent: anything else is not the session we kept. */
	if (rep.magic != QFT_MAGIC || rep.version != QFT_VERSION ||
	    rep.features != feat || rep.seq < seq || rep.seq > c->rl[i].next)
		r = -EPROTO;
	pthread_mutex_unlock(&c->lock);
	if (r < 0) {
		qft_err("the server's RESUME reply does not fit the session "
			"(version %u, features %#x, next id %llu)",
			rep.version, rep.features,
			(unsigned long long)rep.seq);
		goto out_free_buf;
	}
	qft_chan_lz4_agreed(&ln->chan, c->o.compress, rep.features);
	ln->notify = c->o.want_notify && (feat & QFT_FEAT_NOTIFY);
	ln->progress = feat & QFT_FEAT_PROGRESS;
	ln->lazy = feat & QFT_FEAT_LAZY;
	ln->cred = feat & QFT_FEAT_CRED;
	ln->resume = true;
	ln->features = feat;
	if (i == LANE_BULK) {
		l->srv_uid = rep.uid;
		l->srv_gid = rep.gid;
	}
	if (rep.opflags & QFT_RESUME_REP_LOST_NOTIFY)
		*lost_notify = true;
	r = 0;
out_free_buf:
	qbuf_free(&b);
	return r;
}

/* A new link to the session's server, its lanes resumed; not reading.
 * No lock held.  Final errors as lane_resume's, and -ECONNREFUSED,
 * -EACCES from the transport. */
static int attempt(struct qc_conn *c, struct link **out, bool *lost_notify)
{
	struct qc_endpoint ep;
	unsigned nlanes;
	struct link *l;
	int r;

	pthread_mutex_lock(&c->lock);
	ep = c->rs.ep;
	nlanes = c->rs.nlanes;
	pthread_mutex_unlock(&c->lock);
	ep.fd = ep.meta_fd = -1;
	ep.meta = false;
	r = c->o.ops->reattach(c->o.ops_ctx, &ep, &ep.fd, &ep.keys);
	if (r < 0)
		return r;
	if (nlanes > 1) {
		r = c->o.ops->reattach(c->o.ops_ctx, &ep, &ep.meta_fd,
				       &ep.meta_keys);
		if (r < 0) {
			qft_session_keys_wipe(&ep.keys);
			close(ep.fd);
			return r;
		}
		ep.meta = true;
	}
	r = qc_link_new(c, &ep, &l);
	if (r < 0)
		return r;
	if (l->nlanes != nlanes) {
		qc_link_free(c, l, -1);
		return -EIO;
	}
	pthread_mutex_lock(&c->lock);
	c->attempt = c->closing ? NULL : l;
	r = c->closing ? -ECANCELED : 0;
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; r == 0 && i < nlanes; i++)
		r = lane_resume(c, l, i, lost_notify);
	pthread_mutex_lock(&c->lock);
	c->attempt = NULL;
	if (c->closing && r == 0)
		r = -ECANCELED;
	pthread_mutex_unlock(&c->lock);
	if (r < 0) {
		qc_link_shutdown(l);
		qc_link_free(c, l, -1);
		return r;
	}
	l->resume = true;
	/* RESUME tells no boot: the server is the one whose HELLO did.
	 * Nor what it sends with: the same policy on a new socket. */
	pthread_mutex_lock(&c->lock);
	memcpy(l->boot_id, c->rs.boot_id, sizeof(l->boot_id));
	memcpy(l->cc_down, c->rs.cc_down, sizeof(l->cc_down));
	pthread_mutex_unlock(&c->lock);
	(void)qft_tcpcc_get(l->lane[LANE_BULK].chan.wfd, l->cc_up);
	/* The dead link's stripes died with it: new ones for this one,
	 * taken once it reads (resume_install). */
	qc_stripe_join(c, l);
	*out = l;
	return 0;
}

/*
 * Sends lane i's kept requests again, in id order, on the new link l
 * (reading already), within the lane's window.  Each copy is taken out
 * while it is sent, so that a reply meanwhile cannot free it, and put
 * back unless it was answered.  Send lock of the lane held.
 */
static int resend(struct qc_conn *c, struct link *l, unsigned i)
{
	uint64_t last = 0;
	int r = 0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct pending *p = c->rl[i].head;
		uint64_t key, seq;
		struct iovec iov;
		uint8_t *frame;
		size_t len;

		while (p && p->seq <= last)
			p = p->rnext;
		if (!p || l->dead)
			break;
		if (p->seq >= c->rl[i].head->seq + QFT_RESUME_WINDOW) {
			uint64_t head = c->rl[i].head->seq;
			bool late;

			/* Nobody watches this link's deadlines but us. */
			c->rwaiters++;
			late = wait_until(&c->rcond, &c->lock,
					  now_ns() + deadline_ns(c));
			c->rwaiters--;
			if (late && c->rl[i].head && c->rl[i].head->seq == head) {
				r = -ETIMEDOUT;
				break;
			}
			continue;
		}
		seq = last = p->seq;
		key = p->id;
		frame = p->kept;
		len = p->kept_len;
		if (!frame)
			continue;
		p->kept = NULL;
		c->kept_n--;
		c->kept_bytes -= len;
		p->sent_ns = now_ns();
		pthread_mutex_unlock(&c->lock);
		iov = (struct iovec){ frame, len };
		r = qft_chan_sendv(&l->lane[i].chan, &iov, 1);
		pthread_mutex_lock(&c->lock);
		p = qc_pending_find(c, key);
		if (p && p->seq == seq && !p->kept) {
			p->kept = frame;
			c->kept_n++;
			c->kept_bytes += len;
		} else {
			free(frame);
		}
		if (r < 0)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Counts the session's requests in the table, which the new link now
 * carries; conn lock held. */
static unsigned count_pending(struct qc_conn *c)
{
	unsigned n = 0;

	for (unsigned b = 0; b < PENDING_BUCKETS; b++)
		for (struct pending *p = c->pending[b]; p; p = p->next)
			n++;
	return n;
}

int qc_resume_resend_all(struct qc_conn *c, struct link *l)
{
	int r = 0;

	qc_conn_assert_locked(c);
	l->npending = count_pending(c);
	l->busy_since = now_ns();
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; r == 0 && i < l->nlanes; i++)
		r = resend(c, l, i);
	pthread_mutex_lock(&c->lock);
	if (r == 0 && (l->dead || c->closing))
		r = -EIO;
	return r;
}

void qc_resume_go_live(struct qc_conn *c, struct link *l)
{
	qc_conn_assert_locked(c);
	c->rs.held = false;
	c->resuming = false;
	qc_link_go_live(c, l);
}

/*
 * Makes the resumed link l live: readers started, kept requests sent
 * again, then installed on the session's generation.  No lock held; 0
 * or -errno (l then freed, the session still waiting).
 */
static int resume_install(struct qc_conn *c, struct link *l, int64_t start)
{
	unsigned nlanes = l->nlanes;
	int r;

	/* No sender reaches the session meanwhile (no live link), and
	 * those after the install come after every resent id. */
	for (unsigned i = 0; i < nlanes; i++)
		pthread_mutex_lock(&c->slock[i]);
	pthread_mutex_lock(&c->lock);
	/* Cut short, not waited for, by an unmount meanwhile. */
	c->attempt = l;
	l->gen = c->rs.gen;
	r = c->closing ? -ECANCELED : qc_reader_start(l);
	if (r == 0) {
		/* First on bulk, so that everything resent goes striped. */
		pthread_mutex_unlock(&c->lock);
		r = qc_stripe_start(c, l);
		pthread_mutex_lock(&c->lock);
	}
	if (r == 0)
		r = qc_resume_resend_all(c, l);
	c->attempt = NULL;
	if (r == 0) {
		/* The transport's state goes on with the new link. */
		l->ep.priv = c->rs.ep.priv;
		c->resumes++;
		qc_resume_go_live(c, l);
	}
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = nlanes; i-- > 0;)
		pthread_mutex_unlock(&c->slock[i]);
	if (r == 0) {
		qft_info("session resumed after %.1f s",
			 (double)(now_ns() - start) / NS_PER_S);
		return 0;
	}
	qc_link_fail(c, l, -EIO, NULL);
	qc_link_shutdown(l);
	qc_link_join(l);
	qc_link_free(c, l, -1);
	return r;
}

/*
 * Whether a session whose server is gone can be carried over to a new
 * one (carry.c): a new server can be started, the layer above can bind
 * its open files again, and the old server told its host's boot, which
 * the new one must match.  Conn lock held.
 */
static bool carriable(const struct qc_conn *c)
{
	return c->o.reconnect && c->o.ops && c->o.ops->open && c->o.rebind &&
	       c->rs.held && c->rs.boot_id[0];
}

/*
 * The session's server is gone (its port refused us, or something else
 * answers there): its transport is closed, and the reconnect starts a
 * new server and carries the session over (carry.c) while callers go on
 * waiting as for a resume, within the same grace.  Conn lock held
 * (dropped and taken again).
 */
static void hand_to_restart(struct qc_conn *c, const char *why)
{
	struct qc_endpoint ep = c->rs.ep;
	int64_t left;

	qc_conn_assert_locked(c);
	c->restarting = true;
	c->rs.held = false;
	left = (c->resume_until - now_ns()) / NS_PER_S;
	pthread_mutex_unlock(&c->lock);
	qft_warn("cannot resume the session: %s; starting a new server to "
		 "carry it over (up to %lld s)", why, (long long)left);
	c->o.ops->close(c->o.ops_ctx, &ep, FAULT_REAP_MS, false);
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->cond);
}

/* The transport's or the server's answer means the session is gone. */
static bool final_err(int r)
{
	return r == -ECONNREFUSED || r == -EACCES || r == -ESTALE ||
	       r == -EPROTO || r == -ENOTSUP;
}

/*
 * The watchdog's work while a session resumes (conn lock held, dropped
 * during attempts and waits): attempts with backoff until one works,
 * the grace passes, the server refuses, or the connection is shut down.
 */
void qc_resume_run(struct qc_conn *c)
{
	int64_t start = c->lost_at;
	unsigned step = 0;

	qc_conn_assert_locked(c);
	while (!c->closing && c->resuming) {
		struct link *l = NULL;
		bool lost_notify = false;
		int64_t until, began;
		int r;

		if (!c->rs.held || !c->o.ops || !c->o.ops->reattach) {
			give_up(c, false, "the transport cannot reconnect");
			return;
		}
		if (now_ns() >= c->resume_until) {
			char why[64];

			snprintf(why, sizeof(why), "no link for %d s "
				 "(-o resume=)", c->o.resume_s);
			give_up(c, true, why);
			return;
		}
		began = now_ns();
		pthread_mutex_unlock(&c->lock);
		r = attempt(c, &l, &lost_notify);
		/* Before the link is live: the session kept its generation,
		 * so its leases outlived the link, and none the server could
		 * not keep may answer a caller once the session goes on. */
		if (r == 0 && lost_notify && c->o.notify)
			c->o.notify(c->o.notify_ctx, 0, QFT_NOTIFY_ALL, "", 0);
		if (r == 0)
			r = resume_install(c, l, start);
		pthread_mutex_lock(&c->lock);
		if (r == 0 || c->closing)
			return;
		if (final_err(r)) {
			char why[96];

			snprintf(why, sizeof(why), "%s",
				 r == -ECONNREFUSED ? "the server is gone" :
				 r == -EACCES ? "the server refused the proof" :
				 r == -ESTALE ? "the server no longer has it" :
				 strerror(-r));
			/* Nobody listens on its port (or someone else
			 * does): the server died; its host may not have. */
			if ((r == -ECONNREFUSED || r == -EACCES) &&
			    carriable(c)) {
				hand_to_restart(c, why);
				return;
			}
			give_up(c, false, why);
			return;
		}
		qft_debug("resume attempt failed: %s", strerror(-r));
		until = began + (int64_t)backoff_ms[step] * NS_PER_MS;
		if (until > c->resume_until)
			until = c->resume_until;
		if (step + 1 < sizeof(backoff_ms) / sizeof(backoff_ms[0]))
			step++;
		/* Woken early only by closing. */
		while (!c->closing && !wait_until(&c->cond, &c->lock, until))
			;
	}
}
