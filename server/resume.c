// SPDX-License-Identifier: MIT
/* A session that outlives its connections (see resume.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <openssl/crypto.h>

#include "attach.h"
#include "chan.h"
#include "errmap.h"
#include "log.h"
#include "replay.h"
#include "resume.h"
#include "session.h"
#include "srv.h"
#include "tcpcc.h"
#include "thread.h"
#include "watch.h"

/* A resumed connection's first frame must arrive within this. */
#define FIRST_FRAME_MS 5000
/* A STRIPE on bulk waits this long for connections still joining: the
 * client sends it once their joins were answered, so only a thread not
 * yet scheduled can be late. */
#define STRIPE_WAIT_S 5

static const char *lane_name(enum srv_lane lane)
{
	return lane == SRV_LANE_META ? "meta" : "bulk";
}

void srv_resume_init(struct srv_resume *rs, unsigned grace_s,
		     struct srv_session *ss)
{
	pthread_condattr_t ca;

	memset(rs, 0, sizeof(*rs));
	rs->grace_s = grace_s;
	rs->ss = ss;
	rs->lfd = -1;
	rs->afd = -1;
	rs->wake[0] = rs->wake[1] = -1;
	srv_gate_init(&rs->gate, "connection resuming the session");
	for (size_t i = 0; i < SRV_LANES; i++)
		rs->lane[i].fd = -1;
	pthread_mutex_init(&rs->lock, NULL);
	/* The grace is measured on the monotonic clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rs->cond, &ca);
	pthread_condattr_destroy(&ca);
}

static void conn_free(struct srv_resume_conn *c, bool close_fd)
{
	if (!c)
		return;
	if (close_fd && c->fd >= 0)
		close(c->fd);
	qft_seal_free(&c->tx);
	qft_seal_free(&c->rx);
	free(c);
}

/* Closes the listeners; lock held. */
static void listener_close(struct srv_resume *rs)
{
	if (rs->lfd >= 0)
		close(rs->lfd);
	rs->lfd = -1;
	if (rs->afd >= 0)
		close(rs->afd);
	rs->afd = -1;
}

bool srv_resume_grant(struct srv_resume *rs, enum srv_lane lane, int fd,
		      bool asked)
{
	bool ok = false, stop = false;

	if (!rs || rs->grace_s == 0)
		return false;
	pthread_mutex_lock(&rs->lock);
	if (!asked) {
		if (lane == SRV_LANE_BULK && !rs->refused) {
			/* An older client: the session ends with it, and
			 * nobody needs the listener any more. */
			rs->refused = true;
			stop = rs->running;
		}
	} else if (!rs->refused && !rs->ending) {
		rs->lane[lane].granted = true;
		rs->lane[lane].attached = true;
		rs->lane[lane].fd = fd;
		ok = true;
	}
	pthread_mutex_unlock(&rs->lock);
	if (stop)
		(void)!write(rs->wake[1], "x", 1);
	if (ok) {
		/* The session may now outlive the ssh login that started it:
		 * its hang-up is no reason to go. */
		signal(SIGHUP, SIG_IGN);
		qft_debug("%s connection: resumable for %u s", lane_name(lane),
			  rs->grace_s);
	}
	return ok;
}

bool srv_resume_active(struct srv_resume *rs)
{
	bool on;

	if (!rs)
		return false;
	pthread_mutex_lock(&rs->lock);
	on = !rs->refused &&
	     (rs->lane[SRV_LANE_BULK].granted || rs->lane[SRV_LANE_META].granted);
	pthread_mutex_unlock(&rs->lock);
	return on;
}

/* Shuts a lane's connection and its stripes down; lock held. */
static void lane_cut(struct srv_resume_lane *ln)
{
	if (!ln->attached || ln->fd < 0)
		return;
	shutdown(ln->fd, SHUT_RDWR);
	for (unsigned i = 0; i < ln->nsfd; i++)
		shutdown(ln->sfd[i], SHUT_RDWR);
}

/* Sends `m` sealed with c's keys on a channel of its own. */
static int conn_reply(struct srv_resume_conn *c, struct qft_chan *ch,
		      const struct qft_msg *m)
{
	struct qbuf b;
	int r;

	qbuf_init(&b, QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	r = qft_chan_send_msg(ch, &b, m);
	qbuf_free(&b);
	return r;
}

static void conn_error(struct srv_resume_conn *c, struct qft_chan *ch,
		       uint16_t op, uint64_t id, int err, const char *msg)
{
	struct qft_msg m;

	qft_msg_init(&m, op, id);
	m.flags = QFT_F_REPLY;
	m.status = qft_status_from_errno(err);
	m.errmsg.s = msg;
	m.errmsg.len = (uint32_t)strlen(msg);
	(void)conn_reply(c, ch, &m);
}

/*
 * A connection whose first frame is a STRIPE join: answered on its own
 * keys, then queued for the STRIPE on bulk to take (its records are
 * sealed with bulk's keys from then on).  0 once queued (c is freed,
 * its socket kept), or -errno (logged; the caller frees c).
 */
static int stripe_join(struct srv_resume *rs, struct srv_resume_conn *c,
		       struct qft_chan *ch, const struct qft_msg *m)
{
	const struct timeval off = { 0 };
	struct qft_msg rep;
	const char *why = NULL;
	int r;

	pthread_mutex_lock(&rs->lock);
	if (!rs->stripes_ok || rs->ending || m->count != 0)
		why = "this session does not stripe";
	else if (rs->njoined >= QFT_MAX_STRIPES - 1)
		why = "too many stripes joined";
	pthread_mutex_unlock(&rs->lock);
	if (why) {
		qft_warn("stripe connection refused: %s", why);
		conn_error(c, ch, QFT_OP_STRIPE, m->id, EPROTO, why);
		return -EPROTO;
	}
	/* Answered before it is queued: once taken, bulk's records go on
	 * it, and the answer must not land between them. */
	qft_msg_init(&rep, QFT_OP_STRIPE, m->id);
	rep.flags = QFT_F_REPLY;
	r = conn_reply(c, ch, &rep);
	if (r < 0) {
		qft_warn("stripe connection: cannot answer: %s", strerror(-r));
		return r;
	}
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &off, sizeof(off));
	pthread_mutex_lock(&rs->lock);
	if (rs->njoined < QFT_MAX_STRIPES - 1 && !rs->ending) {
		rs->joined[rs->njoined++] = c->fd;
		c->fd = -1;
		pthread_cond_broadcast(&rs->cond);
	}
	pthread_mutex_unlock(&rs->lock);
	if (c->fd >= 0)
		return -EPROTO;
	qft_debug("a stripe connection joined");
	conn_free(c, false);
	return 0;
}

/*
 * Reads and checks the first frame of an authenticated connection and
 * hands the connection to its lane: 0 (c is the lane's now), or -errno
 * (logged; the caller frees c).
 */
static int first_frame(struct srv_resume *rs, struct srv_resume_conn *c)
{
	struct timeval tv = { .tv_sec = FIRST_FRAME_MS / 1000 };
	struct srv_resume_lane *ln;
	struct qft_chan ch;
	struct qft_msg m;
	struct qft_hdr h;
	struct qbuf in;
	enum srv_lane lane;
	int fd, r;

	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	r = qft_chan_init(&ch, fd, fd);
	if (r < 0) {
		close(fd);
		return r;
	}
	qft_chan_set_seal(&ch, &c->tx, &c->rx);
	qbuf_init(&in, QFT_CHAN_RECV_LIMIT);
	memset(&h, 0, sizeof(h));
	r = qft_chan_recv(&ch, &in, &h);
	if (r < 0) {
		qft_warn("resumed connection: no first frame: %s",
			 strerror(-r));
		goto out;
	}
	r = qft_msg_decode(&m, in.data, in.len);
	if (r == 0 && m.op == QFT_OP_STRIPE && m.flags == 0) {
		r = stripe_join(rs, c, &ch, &m);
		qbuf_free(&in);
		qft_chan_destroy(&ch);
		return r;
	}
	if (r < 0 || m.op != QFT_OP_RESUME || m.flags != 0 ||
	    m.magic != QFT_MAGIC) {
		qft_warn("resumed connection: the first frame is no RESUME "
			 "(%s); closing it", qft_op_name(h.op));
		r = -EPROTO;
		goto out;
	}
	if (m.version != QFT_VERSION) {
		qft_warn("resumed connection: protocol v%u, not v%u",
			 m.version, QFT_VERSION);
		conn_error(c, &ch, QFT_OP_RESUME, m.id, EPROTO,
			   "protocol version mismatch");
		r = -EPROTO;
		goto out;
	}
	lane = (m.opflags & QFT_RESUME_META) ? SRV_LANE_META : SRV_LANE_BULK;
	ln = &rs->lane[lane];
	c->seq = m.seq;
	c->id = m.id;
	pthread_mutex_lock(&rs->lock);
	if (!ln->granted || rs->ending) {
		pthread_mutex_unlock(&rs->lock);
		qft_warn("RESUME of the %s connection: it has no session "
			 "state to resume", lane_name(lane));
		conn_error(c, &ch, QFT_OP_RESUME, m.id, ESTALE,
			   "no such connection");
		r = -ESTALE;
		goto out;
	}
	/* A newer attempt wins: the client gave the older one up. */
	conn_free(ln->pending, true);
	ln->pending = c;
	/* The lane may not have noticed its connection died. */
	lane_cut(ln);
	pthread_cond_broadcast(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
	qft_debug("RESUME of the %s connection from seq %llu: handed over",
		  lane_name(lane), (unsigned long long)m.seq);
	r = 0;
out:
	qbuf_free(&in);
	/* Closes only the duplicate. */
	qft_chan_destroy(&ch);
	if (r == 0) {
		tv.tv_sec = 0;
		setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	return r;
}

struct hs_arg {
	struct srv_resume *rs;
	size_t slot;
	int fd;
	bool tcp;               /* else the attach socket */
};

static const char *auth_reason(int r)
{
	switch (r) {
	case -EACCES:    return "wrong proof (wrong key, tampering or replay)";
	case -EPROTO:    return "not a qftfs handshake, or another cipher";
	case -ETIMEDOUT: return "handshake not finished within 5 s";
	case -EPIPE:     return "closed before the handshake";
	case -EIO:       return "closed during the handshake";
	case -ECONNABORTED: return "cut short to make room for another";
	default:         return strerror(-r);
	}
}

static void *hs_main(void *arg)
{
	struct hs_arg *a = arg;
	struct srv_resume *rs = a->rs;
	struct qft_session_keys keys;
	struct srv_resume_conn *c;
	enum qft_cipher cipher;
	int r;

	c = calloc(1, sizeof(*c));
	r = c ? 0 : -ENOMEM;
	if (r == 0)
		r = qft_auth_server(a->fd, rs->key, QFT_AUTH_TIMEOUT_MS,
				    &cipher, &keys);
	if (r == 0 && cipher != rs->cipher) {
		qft_session_keys_wipe(&keys);
		r = -EPROTO;
	}
	if (r < 0) {
		/* Logged by the gate; failures end nothing (gate.h). */
		pthread_mutex_lock(&rs->lock);
		srv_gate_done(&rs->gate, (int)a->slot, r, auth_reason(r));
		pthread_mutex_unlock(&rs->lock);
		free(c);
		close(a->fd);
		goto out;
	}
	/* Authenticated: the gate, which is for the connections before
	 * that, lets it go.  A client joining stripes starts its next
	 * handshake as soon as this one's first frame is answered, and
	 * this thread could still hold the slot then, which would count
	 * against that address and get a joined stripe shut down. */
	pthread_mutex_lock(&rs->lock);
	srv_gate_done(&rs->gate, (int)a->slot, 0, NULL);
	pthread_mutex_unlock(&rs->lock);
	c->fd = a->fd;
	r = qft_seal_init(&c->tx, cipher, keys.s2c, true);
	if (r == 0) {
		r = qft_seal_init(&c->rx, cipher, keys.c2s, false);
		if (r < 0)
			qft_seal_free(&c->tx);
	}
	qft_session_keys_wipe(&keys);
	if (r < 0) {
		qft_err("cannot key a resumed connection: %s", strerror(-r));
		free(c);
		goto out_close;
	}
	if (a->tcp)
		srv_session_tune_tcp(rs->ss, c->fd, "resumed connection");
	if (first_frame(rs, c) == 0)
		goto out;               /* the lane closes it */
	conn_free(c, false);
out_close:
	close(a->fd);
out:
	OPENSSL_cleanse(&keys, sizeof(keys));
	pthread_mutex_lock(&rs->lock);
	rs->nhs--;
	pthread_cond_broadcast(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
	free(a);
	return NULL;
}

/*
 * Accepts one connection and starts its handshake; lock not held.  On
 * the attach socket, someone else's connection is closed at once and
 * counts as no failure: another user cannot even make the session stop
 * listening.
 */
static void hs_start(struct srv_resume *rs, int lfd, bool tcp)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	struct hs_arg *a;
	pthread_attr_t at;
	pthread_t t;
	int fd, r, slot = -1;

	fd = accept4(lfd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (!tcp && !srv_attach_peer_ok(fd)) {
		close(fd);
		return;
	}
	a = malloc(sizeof(*a));
	pthread_mutex_lock(&rs->lock);
	if (a && !rs->ending)
		slot = srv_gate_admit(&rs->gate, fd, (struct sockaddr *)&sa,
				      len);
	if (slot < 0) {
		pthread_mutex_unlock(&rs->lock);
		free(a);
		close(fd);
		return;
	}
	rs->nhs++;
	pthread_mutex_unlock(&rs->lock);
	a->rs = rs;
	a->slot = (size_t)slot;
	a->fd = fd;
	a->tcp = tcp;
	/* Detached: srv_resume_end waits for the count instead. */
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &at, hs_main, a);
	pthread_attr_destroy(&at);
	if (r) {
		qft_warn("cannot start a handshake: %s", strerror(r));
		pthread_mutex_lock(&rs->lock);
		srv_gate_done(&rs->gate, slot, 0, NULL);
		rs->nhs--;
		pthread_mutex_unlock(&rs->lock);
		free(a);
		close(fd);
	}
}

static void *acceptor_main(void *arg)
{
	struct srv_resume *rs = arg;

	pthread_setname_np(pthread_self(), "qftfs-resume");
	for (;;) {
		struct pollfd p[3];
		bool busy;
		char why = 0;
		int lfd, afd;

		pthread_mutex_lock(&rs->lock);
		busy = !srv_gate_room(&rs->gate);
		lfd = busy ? -1 : rs->lfd;
		afd = busy ? -1 : rs->afd;
		pthread_mutex_unlock(&rs->lock);
		p[0].fd = rs->wake[0];
		p[0].events = POLLIN;
		p[1].fd = lfd;
		p[1].events = POLLIN;
		p[2].fd = afd;
		p[2].events = POLLIN;
		p[1].revents = p[2].revents = 0;
		/* With every slot busy, look again when one frees. */
		if (poll(p, 3, busy ? 200 : -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			(void)!read(rs->wake[0], &why, 1);
			break;
		}
		if (lfd >= 0 && p[1].revents)
			hs_start(rs, lfd, true);
		if (afd >= 0 && p[2].revents)
			hs_start(rs, afd, false);
	}
	pthread_mutex_lock(&rs->lock);
	listener_close(rs);
	/* Handshakes still running fail at once. */
	srv_gate_shutdown_all(&rs->gate);
	while (rs->nhs)
		pthread_cond_wait(&rs->cond, &rs->lock);
	pthread_mutex_unlock(&rs->lock);
	OPENSSL_cleanse(rs->key, sizeof(rs->key));
	return NULL;
}

void srv_resume_listen(struct srv_resume *rs, int lfd, int afd,
		       const uint8_t key[QFT_SECRET_SIZE],
		       enum qft_cipher cipher)
{
	bool go;
	int r;

	pthread_mutex_lock(&rs->lock);
	go = rs->grace_s > 0 && !rs->refused && !rs->ending &&
	     (lfd >= 0 || afd >= 0);
	pthread_mutex_unlock(&rs->lock);
	if (go && pipe2(rs->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		qft_warn("cannot keep the listener for resuming: %s",
			 strerror(errno));
		go = false;
	}
	if (!go) {
		if (lfd >= 0)
			close(lfd);
		if (afd >= 0)
			close(afd);
		return;
	}
	memcpy(rs->key, key, sizeof(rs->key));
	rs->cipher = cipher;
	pthread_mutex_lock(&rs->lock);
	rs->lfd = lfd;
	rs->afd = afd;
	r = qft_thread_start(&rs->acceptor, acceptor_main, rs);
	if (r == 0)
		rs->running = true;
	else
		listener_close(rs);
	pthread_mutex_unlock(&rs->lock);
	if (r) {
		qft_warn("cannot accept resumed connections: %s",
			 strerror(r));
		OPENSSL_cleanse(rs->key, sizeof(rs->key));
		return;
	}
	qft_debug("keeping the listener: the session may be resumed");
}

void srv_resume_end(struct srv_resume *rs)
{
	bool join;

	if (!rs)
		return;
	pthread_mutex_lock(&rs->lock);
	rs->ending = true;
	for (size_t i = 0; i < SRV_LANES; i++)
		lane_cut(&rs->lane[i]);
	pthread_cond_broadcast(&rs->cond);
	join = rs->running;
	rs->running = false;
	pthread_mutex_unlock(&rs->lock);
	if (join) {
		(void)!write(rs->wake[1], "x", 1);
		pthread_join(rs->acceptor, NULL);
	}
}

void srv_resume_free(struct srv_resume *rs)
{
	srv_resume_end(rs);
	for (size_t i = 0; i < SRV_LANES; i++) {
		conn_free(rs->lane[i].pending, true);
		rs->lane[i].pending = NULL;
		/* Its descriptor went with the lane's channel. */
		conn_free(rs->lane[i].cur, false);
		rs->lane[i].cur = NULL;
	}
	/* Joined, never taken. */
	for (unsigned i = 0; i < rs->njoined; i++)
		close(rs->joined[i]);
	rs->njoined = 0;
	for (size_t i = 0; i < 2; i++)
		if (rs->wake[i] >= 0)
			close(rs->wake[i]);
	rs->wake[0] = rs->wake[1] = -1;
	OPENSSL_cleanse(rs->key, sizeof(rs->key));
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
}

/*
 * Moves s's channel onto c: new socket, new seals, no sticky error; the
 * compression state stays.  The old socket is closed.
 */
static void rebind(struct srv *s, struct srv_resume_lane *ln,
		   struct srv_resume_conn *c)
{
	struct srv_resume_conn *old = ln->cur;
	int oldfd;

	if (s->lane == SRV_LANE_META)
		/* Before its number may be reused. */
		srv_session_forget_meta(s->resume->ss);
	/* The dead link's stripes go with it; the client stripes the new
	 * one afresh. */
	pthread_mutex_lock(&s->resume->lock);
	ln->nsfd = 0;
	pthread_mutex_unlock(&s->resume->lock);
	qft_chan_stripes_drop(&s->chan);
	pthread_mutex_lock(&s->chan.wlock);
	oldfd = s->chan.rfd;
	s->chan.rfd = s->chan.wfd = c->fd;
	s->chan.tx = &c->tx;
	s->chan.rx = &c->rx;
	s->chan.werr = 0;
	pthread_mutex_unlock(&s->chan.wlock);
	if (oldfd >= 0 && oldfd != c->fd)
		close(oldfd);
	ln->cur = c;
	conn_free(old, false);
	s->link_dead = false;
}

static void deadline_at(struct timespec *ts, unsigned s)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += s;
}

static int send_resume_reply(struct srv *s, const struct srv_resume_conn *c,
			     bool lost)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_RESUME, c->id);
	m.flags = QFT_F_REPLY;
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = s->features;
	m.uid = (uint32_t)geteuid();
	m.gid = (uint32_t)getegid();
	m.opflags = lost ? QFT_RESUME_REP_LOST_NOTIFY : 0;
	m.seq = srv_replay_next(s->replay);
	return qft_chan_send_msg(&s->chan, &s->out, &m);
}

static int send_resume_error(struct srv *s, const struct srv_resume_conn *c,
			     int err, const char *msg)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_RESUME, c->id);
	m.flags = QFT_F_REPLY;
	m.status = qft_status_from_errno(err);
	m.errmsg.s = msg;
	m.errmsg.len = (uint32_t)strlen(msg);
	return qft_chan_send_msg(&s->chan, &s->out, &m);
}

#ifdef QFT_FAULT_INJECTION
/* The reply QFTFS_FAULT_LATE_REPLY held (replay.h), sent now: a link's
 * late answer, ahead of whatever the client sends after resuming. */
static void send_late(struct srv *s)
{
	const uint8_t *frame;
	size_t len;

	if (!srv_replay_fault_late_take(s->replay, &frame, &len))
		return;
	qft_warn("fault injection: sending the held reply after RESUME");
	if (qft_chan_send(&s->chan, frame, len) < 0) {
		qft_chan_shutdown(&s->chan);
		s->link_dead = true;
	}
}
#endif

/* Ends the session from a lane whose grace passed; lock held. */
static void expire(struct srv_resume *rs)
{
	rs->ending = true;
	for (size_t i = 0; i < SRV_LANES; i++)
		lane_cut(&rs->lane[i]);
	pthread_cond_broadcast(&rs->cond);
}

int srv_resume_wait(struct srv *s)
{
	struct srv_resume *rs = s->resume;
	struct srv_resume_lane *ln = &rs->lane[s->lane];
	struct timespec until;
	bool logged = false;

	pthread_mutex_lock(&rs->lock);
	ln->attached = false;
	ln->fd = -1;
	ln->nsfd = 0;
	pthread_mutex_unlock(&rs->lock);
	/* Nothing more goes out on it (its replies are kept): the peer --
	 * the relay of an attach, a half-closed client -- learns so now,
	 * not when a RESUME replaces it.  Its stripes too. */
	qft_chan_shutdown(&s->chan);
	/* Notifications wait for no one: dropped (and remembered) until the
	 * lane is back. */
	if (s->notify)
		srv_watch_detach(s->watch, &s->chan);
	deadline_at(&until, rs->grace_s);

	for (;;) {
		struct srv_resume_conn *c;
		bool lost = false;
		int r = 0;

		pthread_mutex_lock(&rs->lock);
		if (!logged && !ln->pending && !rs->ending)
			qft_info("%s connection lost (request %llu next): "
				 "waiting up to %u s for the client to resume",
				 lane_name(s->lane),
				 (unsigned long long)srv_replay_next(s->replay),
				 rs->grace_s);
		logged = true;
		while (!ln->pending && !rs->ending && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&rs->cond, &rs->lock,
						   &until);
		if (rs->ending) {
			pthread_mutex_unlock(&rs->lock);
			return -ECANCELED;
		}
		if (!ln->pending) {
			expire(rs);
			pthread_mutex_unlock(&rs->lock);
			qft_info("%s connection: no RESUME within %u s; the "
				 "session ends", lane_name(s->lane),
				 rs->grace_s);
			return -ETIMEDOUT;
		}
		c = ln->pending;
		ln->pending = NULL;
		pthread_mutex_unlock(&rs->lock);

		rebind(s, ln, c);
		if (srv_replay_resume(s->replay, c->seq) < 0) {
			qft_warn("RESUME of the %s connection from seq %llu: "
				 "outside the window (next %llu); refused",
				 lane_name(s->lane),
				 (unsigned long long)c->seq,
				 (unsigned long long)srv_replay_next(s->replay));
			(void)send_resume_error(s, c, ESTALE,
						"seq outside the window");
			shutdown(c->fd, SHUT_RDWR);
			s->link_dead = true;
			continue;
		}
		if (s->notify)
			lost = srv_watch_lost_take(s->watch);
		if (send_resume_reply(s, c, lost) < 0) {
			qft_warn("%s connection: cannot answer RESUME",
				 lane_name(s->lane));
			shutdown(c->fd, SHUT_RDWR);
			s->link_dead = true;
			continue;
		}
		if (s->notify)
			srv_watch_reattach(s->watch, &s->chan, s->is_meta);
#ifdef QFT_FAULT_INJECTION
		send_late(s);
#endif
		pthread_mutex_lock(&rs->lock);
		ln->attached = true;
		ln->fd = c->fd;
		if (rs->ending)
			shutdown(c->fd, SHUT_RDWR);
		pthread_mutex_unlock(&rs->lock);
		qft_info("%s connection resumed: client seq %llu, server seq "
			 "%llu%s", lane_name(s->lane),
			 (unsigned long long)c->seq,
			 (unsigned long long)srv_replay_next(s->replay),
			 lost ? " (notifications were lost)" : "");
		return 0;
	}
}

bool srv_resume_stripes_grant(struct srv_resume *rs)
{
	bool ok;

	if (!rs)
		return false;
	pthread_mutex_lock(&rs->lock);
	ok = rs->lane[SRV_LANE_BULK].granted && !rs->refused && !rs->ending;
	rs->stripes_ok = ok;
	pthread_mutex_unlock(&rs->lock);
	return ok;
}

int srv_resume_stripe(struct srv *s, const struct qft_msg *req)
{
	struct srv_resume *rs = s->resume;
	struct srv_resume_lane *ln;
	char cc[QFT_TCPCC_NAME_MAX] = "";
	int fds[QFT_MAX_STRIPES - 1];
	unsigned n = (unsigned)req->count, use, max;
	struct timespec until;
	struct qft_msg rep;
	int r = 0;

	/* The client sends from the frame after it striped: a refusal
	 * could not be read, so every one closes the connection. */
	if (!rs || s->lane != SRV_LANE_BULK ||
	    !(s->features & QFT_FEAT_STRIPES) || req->count < 1 ||
	    req->count >= QFT_MAX_STRIPES || qft_chan_stripes(&s->chan) != 1) {
		qft_err("closing connection: a STRIPE of %llu connections "
			"that was not agreed on",
			(unsigned long long)req->count);
		return -EPROTO;
	}
	ln = &rs->lane[SRV_LANE_BULK];
	deadline_at(&until, STRIPE_WAIT_S);
	pthread_mutex_lock(&rs->lock);
	while (rs->njoined < n && !rs->ending && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&rs->cond, &rs->lock, &until);
	if (rs->njoined < n) {
		unsigned got = rs->njoined;

		pthread_mutex_unlock(&rs->lock);
		qft_err("closing connection: STRIPE of %u connections, %u "
			"joined within %d s", n, got, STRIPE_WAIT_S);
		return -EPROTO;
	}
	/* The first n joined are this link's; any others are left from an
	 * attempt the client gave up. */
	memcpy(fds, rs->joined, n * sizeof(int));
	for (unsigned i = n; i < rs->njoined; i++)
		close(rs->joined[i]);
	rs->njoined = 0;
	memcpy(ln->sfd, fds, n * sizeof(int));
	ln->nsfd = n;
	if (rs->ending)
		lane_cut(ln);
	pthread_mutex_unlock(&rs->lock);

	r = qft_chan_stripes_add(&s->chan, fds, n);
	if (r < 0) {
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		qft_err("closing connection: cannot stripe: %s", strerror(-r));
		return r;
	}
	qft_chan_recv_switch(&s->chan);
	/* Downloads are the server's to spread. */
	(void)qft_tcpcc_get(s->chan.wfd, cc);
	qft_chan_stripes_choose(n + 1, req->opflags & QFT_STRIPE_ALL,
				strcmp(cc, QFT_TCPCC_PREFERRED) == 0, &use,
				&max);
	qft_msg_init(&rep, QFT_OP_STRIPE, req->id);
	rep.flags = QFT_F_REPLY;
	rep.count = use;
	qbuf_reset(&s->out);
	r = qft_msg_encode(&s->out, &rep);
	if (r == 0)
		r = qft_chan_send_switch(&s->chan, s->out.data, s->out.len,
					 use);
	if (r == 0)
		qft_chan_tx_grow(&s->chan, max);
	if (r < 0) {
		/* The caller takes the lane down, as for any reply that
		 * cannot go out. */
		qft_debug("cannot answer STRIPE: %s", strerror(-r));
		return -EPIPE;
	}
	qft_info("bulk data striped over %u connections; downloads go on "
		 "%u%s (congestion control %s)", n + 1, use,
		 max > use ? ", all once they lose packets" : "",
		 cc[0] ? cc : "?");
	return 0;
}

const struct srv_session_hooks srv_resume_hooks = {
	.listen = srv_resume_listen,
	.active = srv_resume_active,
};
