// SPDX-License-Identifier: MIT
/*
 * Links (conn.h, "Links" and "Two streams"): making one over an endpoint,
 * its version handshake, failing it and waking its waiters, and the user
 * references that keep it alive while senders use its streams.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "errmap.h"
#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"

void qc_link_wipe_keys(struct qc_endpoint *ep)
{
	if (ep->sealed)
		qft_session_keys_wipe(&ep->keys);
}

void qc_link_wipe_meta(struct qc_endpoint *ep)
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
	qc_link_wipe_meta(ep);
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
int qc_link_new(struct qc_conn *c, struct qc_endpoint *ep,
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
	qc_link_wipe_keys(ep);
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
	qc_link_wipe_keys(ep);
	qc_link_wipe_meta(ep);
	close(ep->fd);
	ep->fd = -1;
	return r;
}

/* Shuts every lane's stream down: readers and blocked senders return. */
void qc_link_shutdown(struct link *l)
{
	for (unsigned i = 0; i < l->nlanes; i++)
		qft_chan_shutdown(&l->lane[i].chan);
}

/* Joins the readers of a link nobody else uses any more. */
void qc_link_join(struct link *l)
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
void qc_link_free(struct qc_conn *c, struct link *l, int reap_ms)
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
void qc_link_fail(struct qc_conn *c, struct link *l, int err,
		  const char *why)
{
	struct pending *async = NULL;
	bool report;
	int resuming;

	pthread_mutex_lock(&c->lock);
	if (l->dead) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	/* A resumable session keeps its waiters and its generation. */
	resuming = qc_seq_lost(c, l);
	if (resuming) {
		pthread_mutex_unlock(&c->lock);
		if (resuming > 1)
			qft_warn("link lost; resuming (up to %d s): %s",
				 c->o.resume_s, why ? why : fail_reason(l, err));
		qc_link_shutdown(l);
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
	async = qc_pending_fail_all(c);
	l->npending = 0;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	while (async) {
		struct pending *next = async->next;

		qc_pending_complete(async);
		async = next;
	}
	if (report && why)
		qft_err("%s: connection lost", why);
	else if (report)
		qft_err("connection to server lost: %s", fail_reason(l, err));
	/* Senders blocked on a full socket must not wait for a dead peer;
	 * the other lane's reader must end too. */
	qc_link_shutdown(l);
	/* The server's watches were this link's: no lease outlives it. */
	if (link_notifies(l) && c->o.notify)
		c->o.notify(c->o.notify_ctx, 0, QFT_NOTIFY_ALL, "", 0);
}

/*
 * Makes `l` the live link on its generation (l->gen, which the caller
 * chose: a new one after a reconnect, the session's after a resume), and
 * wakes whoever waits for a link.  Conn lock held.
 */
void qc_link_go_live(struct qc_conn *c, struct link *l)
{
	qc_conn_assert_locked(c);
	c->cur = l;
	c->lost = false;
	c->expired = false;
	/* A new link may reach a server running as someone else. */
	c->srv_uid = l->srv_uid;
	c->srv_gid = l->srv_gid;
	/* The keepalive counts its silence from now, not from the
	 * handshake. */
	atomic_store(&l->last_rx, now_ns());
	atomic_store(&c->live_gen, l->gen);
	pthread_cond_broadcast(&c->cond);
	pthread_cond_broadcast(&c->rcond);
}

/*
 * Records what this host sends the bulk stream's data with (the choice
 * was made on the socket at connect: login/bootstrap.c) and logs both
 * directions once per link.  A server that was asked for an algorithm by
 * name (-o congestion=) and could not use it says so in its own log;
 * here it shows as what it uses instead.
 */
static void link_note_cc(struct link *l)
{
	struct lane *ln = &l->lane[LANE_BULK];

	if (qft_tcpcc_get(ln->chan.wfd, l->cc_up) < 0)
		return;
	qft_debug("congestion control: uploads %s (this host), downloads "
		  "%s (the server)", l->cc_up,
		  l->cc_down[0] ? l->cc_down : "not told");
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
	/* Server-side copy and holes: asked always, used where granted
	 * (qc_conn_features). */
	m.features |= QFT_FEAT_COPY | QFT_FEAT_HOLES;
	m.features |= QFT_FEAT_FETCH;
	if (l->c->o.want_cred)
		m.features |= QFT_FEAT_CRED;
	if (l->c->o.want_noatime)
		m.features |= QFT_FEAT_NOATIME;
	if (l->c->o.want_locks)
		m.features |= QFT_FEAT_LOCKS;
	/* Only where the endpoint can be reached again, and on meta only
	 * when bulk has it: a session resumes whole or not at all. */
	if (l->c->o.resume_s > 0 && l->ep.resumable &&
	    (ln == &l->lane[LANE_BULK] || l->lane[LANE_BULK].resume))
		m.features |= QFT_FEAT_RESUME;
	/* The host's boot, for carrying a session over to a new server
	 * should this one die (carry.c): asked where it would resume. */
	if (l->c->o.resume_s > 0 && l->ep.resumable &&
	    ln == &l->lane[LANE_BULK])
		m.features |= QFT_FEAT_BOOTID;
	/* What the server sends with, for the statistics and the log. */
	if (ln == &l->lane[LANE_BULK])
		m.features |= QFT_FEAT_TCPCC;
	/* Striping (stripe.c): its connections join as resumed ones do,
	 * directly. */
	if (ln == &l->lane[LANE_BULK] && l->c->o.streams != 1 &&
	    l->c->o.resume_s > 0 && l->ep.resumable && l->c->o.ops &&
	    l->c->o.ops->join)
		m.features |= QFT_FEAT_STRIPES;
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
	/*
	 * A mount other users share, served by root that will not act as
	 * each of them (an older server, or one that cannot switch ids
	 * here): every user would act as root on the server, checked by
	 * nothing but this kernel's view of cached attributes.
	 */
	if (l->c->o.want_cred && rep.uid == 0 &&
	    !(rep.features & QFT_FEAT_CRED)) {
		snprintf(msg, size, "the server runs as root and cannot act as "
			 "each user of this shared mount (-o allow_other): "
			 "every user would read and write as root there.  "
			 "Update qftfs-server (it must offer the CRED feature; "
			 "a container or user namespace may forbid switching "
			 "ids), log in as an ordinary user, or mount without "
			 "allow_other");
		r = -EPROTO;
		goto out_free_buf;
	}
	/* Before the reader starts: no compressed frame can come earlier. */
	qft_chan_lz4_agreed(&ln->chan, l->c->o.compress, rep.features);
	/* Both streams reach one server process; bulk's answer counts. */
	if (ln == &l->lane[LANE_BULK]) {
		l->srv_uid = rep.uid;
		l->srv_gid = rep.gid;
		/* The decoder checked its length and bytes. */
		if ((m.features & rep.features & QFT_FEAT_BOOTID) &&
		    rep.boot_id.len < sizeof(l->boot_id))
			memcpy(l->boot_id, rep.boot_id.s, rep.boot_id.len + 1);
		if ((m.features & rep.features & QFT_FEAT_TCPCC) &&
		    rep.tcpcc.len < sizeof(l->cc_down))
			memcpy(l->cc_down, rep.tcpcc.s, rep.tcpcc.len + 1);
		link_note_cc(l);
	}
	/* A bit that was not asked for grants nothing. */
	ln->notify = l->c->o.want_notify && (rep.features & QFT_FEAT_NOTIFY);
	ln->progress = rep.features & QFT_FEAT_PROGRESS;
	ln->lazy = rep.features & QFT_FEAT_LAZY;
	ln->cred = l->c->o.want_cred && (rep.features & QFT_FEAT_CRED);
	ln->resume = (m.features & QFT_FEAT_RESUME) &&
		     (rep.features & QFT_FEAT_RESUME);
	ln->features = rep.features & m.features;
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
int qc_link_hello(struct link *l, int timeout_s, char *msg, size_t size)
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
	if (l->nlanes < 2) {
		l->resume = l->lane[LANE_BULK].resume;
		return 0;
	}
	r = lane_hello(&l->lane[LANE_META], timeout_s, mmsg, sizeof(mmsg));
	if (r == -EPIPE) {
		qft_info("the server serves one stream: metadata shares it "
			 "with file data");
		link_drop_meta(l);
	} else if (r < 0) {
		qft_warn("meta stream: %s; using one stream",
			 mmsg[0] ? mmsg : strerror(-r));
		link_drop_meta(l);
	} else if (l->lane[LANE_BULK].resume && !l->lane[LANE_META].resume) {
		/* Cannot happen with one server; a meta stream that could
		 * not be resumed would leave its handles behind. */
		qft_warn("meta stream: the server cannot resume it; using "
			 "one stream");
		link_drop_meta(l);
	} else {
		qft_debug("two streams: bulk and meta");
	}
	l->resume = l->lane[LANE_BULK].resume;
	if (l->resume)
		qft_debug("resumable session (up to %d s)", l->c->o.resume_s);
	return 0;
}

/*
 * Waits (conn lock held) until link `l` has no users, then drops the lock
 * to join its reader and free it.  `l` must be dead and no longer
 * reachable by new users (cur moved on, or closing with the table empty).
 */
void qc_link_retire(struct qc_conn *c, struct link *l, int reap_ms)
{
	qc_conn_assert_locked(c);
	assert(l->dead);
	while (l->users)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	qc_link_join(l);
	qc_link_free(c, l, reap_ms);
	pthread_mutex_lock(&c->lock);
}

/*
 * The link to send on: the live one, which must be `gen` unless gen is 0;
 * with gen 0, waits for one until the deadline.  Takes a user reference.
 * Conn lock held.  -ENOTCONN (gen given) or -EIO.
 */
int qc_link_get(struct qc_conn *c, uint64_t gen, struct link **out)
{
	int64_t until = 0;

	qc_conn_assert_locked(c);
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
		/* After the grace of a resume: at once, until a new link. */
		if (c->expired)
			return gen ? -ENOTCONN : -EIO;
		/* Resuming: past the deadline, as long as the grace lasts,
		 * for the same generation too (its handles stay valid). */
		if (c->resuming && c->started) {
			if (gen && gen != atomic_load(&c->live_gen))
				return -ENOTCONN;
			if (wait_until(&c->cond, &c->lock, c->resume_until) &&
			    c->resuming)
				return gen ? -ENOTCONN : -EIO;
			until = 0;
			continue;
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

void qc_link_put(struct qc_conn *c, struct link *l)
{
	qc_conn_assert_locked(c);
	assert(l->users > 0);
	if (--l->users == 0)
		pthread_cond_broadcast(&c->cond);
}
