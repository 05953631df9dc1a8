// SPDX-License-Identifier: MIT
/*
 * Striping a link's bulk stream over more TCP connections (chan.h,
 * "Striping"; docs/architecture.md, "Striping"), so that a loss on a far
 * link halves one stripe's window instead of the whole stream's.
 *
 * Done once per link, fresh or resumed, after its handshake and before
 * its readers start, so every exchange here is synchronous: nothing else
 * is on the bulk stream yet (notifications travel on meta, which a link
 * must have to be striped).  Each stripe is one more connection
 * authenticated like a resumed one (the transport's reattach) whose first
 * frame is a STRIPE join; then a STRIPE on bulk takes them.  This side
 * sends striped from the frame after its STRIPE, the server from the
 * frame after its reply, so each side reads striped after the other's.
 *
 * Error convention: 0 or a negative errno.  Anything that fails before
 * the bulk STRIPE leaves the link as it was (logged); after it, the link
 * cannot be read any more, and the error fails it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "errmap.h"
#include "log.h"
#include "net/conn_internal.h"
#include "tcpcc.h"

/* -o streams=auto: this many connections where striping pays. */
#define STRIPES_AUTO 4u
/* ... which is on a far link (a near one recovers from a loss within
 * milliseconds) whose sender lacks bbr. */
#define STRIPE_MIN_RTT_US 5000u

#ifdef QFT_FAULT_INJECTION
/* Test knob: the round trip from which auto stripes, for a lab whose
 * links are all near. */
#define STRIPE_RTT_ENV "QFTFS_FAULT_STRIPE_RTT_US"

static unsigned min_rtt_us(void)
{
	const char *v = getenv(STRIPE_RTT_ENV);

	return v && *v ? (unsigned)strtoul(v, NULL, 10) : STRIPE_MIN_RTT_US;
}
#else
static unsigned min_rtt_us(void)
{
	return STRIPE_MIN_RTT_US;
}
#endif

/* The smoothed round trip of a TCP socket, 0 when unknown. */
static unsigned rtt_us(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return 0;
	return ti.tcpi_rtt;
}

/* How many connections the bulk stream should have: 1 for none. */
static unsigned wanted(const struct qc_conn *c, const struct link *l)
{
	const struct lane *ln = &l->lane[LANE_BULK];
	bool bbr_up = strcmp(l->cc_up, QFT_TCPCC_PREFERRED) == 0;
	bool bbr_down = strcmp(l->cc_down, QFT_TCPCC_PREFERRED) == 0;

	if (c->o.streams == 1 || atomic_load(&c->stripes_off))
		return 1;
	if (!(ln->features & QFT_FEAT_STRIPES) || l->nlanes < 2 ||
	    !l->cc_up[0] || !c->o.ops->reattach) {
		/* Asked for by number: say why it is one. */
		if (c->o.streams > 1)
			qft_info("streams=%u: one connection carries the data "
				 "(striping needs a resumable session over the "
				 "direct connection, with its meta connection)",
				 c->o.streams);
		return 1;
	}
	if (c->o.streams > 1)
		return c->o.streams;
	if (bbr_up && bbr_down)
		return 1;
	return rtt_us(ln->chan.wfd) >= min_rtt_us() ? STRIPES_AUTO : 1;
}

/*
 * One exchange on a stream of its own, sealed with `keys`: `req` sent,
 * its reply (op STRIPE) into *rep, whose frame stays in `b`.
 */
static int exchange(struct qc_conn *c, int fd, bool sealed,
		    enum qft_cipher cipher, const struct qft_session_keys *keys,
		    const struct qft_msg *req, struct qbuf *b,
		    struct qft_msg *rep)
{
	struct timeval tv = { .tv_sec = c->o.timeout_s };
	const struct timeval off = { 0 };
	struct qft_seal tx, rx;
	struct qft_chan ch;
	struct qft_hdr h;
	int dup, r;

	/* The channel closes its descriptor; the stripe keeps the socket. */
	dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dup < 0)
		return -errno;
	r = qft_chan_init(&ch, dup, dup);
	if (r < 0) {
		close(dup);
		return r;
	}
	if (sealed) {
		if ((r = qft_seal_init(&tx, cipher, keys->c2s, true)) < 0)
			goto out_chan;
		if ((r = qft_seal_init(&rx, cipher, keys->s2c, false)) < 0) {
			qft_seal_free(&tx);
			goto out_chan;
		}
		qft_chan_set_seal(&ch, &tx, &rx);
	}
	r = qft_chan_send_msg(&ch, b, req);
	if (r == 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		r = qft_chan_recv(&ch, b, &h);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &off, sizeof(off));
		if (r == -EAGAIN || r == -EWOULDBLOCK)
			r = -ETIMEDOUT;
	}
	if (r == 0)
		r = qft_msg_decode(rep, b->data, b->len);
	if (r == 0 && (rep->op != QFT_OP_STRIPE || rep->id != req->id ||
		       !(rep->flags & QFT_F_REPLY)))
		r = -EPROTO;
	if (r == 0 && rep->status != QFT_OK)
		r = -qft_errno_from_status(rep->status);
	if (sealed) {
		qft_seal_free(&tx);
		qft_seal_free(&rx);
	}
out_chan:
	qft_chan_destroy(&ch);
	return r;
}

/* One more connection, joined to the session's bulk stream: its socket,
 * or -errno (logged at debug: the link goes on with fewer stripes). */
static int join_one(struct qc_conn *c, struct link *l)
{
	struct qft_session_keys keys;
	struct qft_msg m, rep;
	struct qbuf b;
	int fd, r;

	r = c->o.ops->reattach(c->o.ops_ctx, &l->ep, &fd, &keys);
	if (r < 0) {
		qft_debug("stripe: cannot connect: %s", strerror(-r));
		return r;
	}
	qbuf_init(&b, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_STRIPE, next_id(c));
	qft_msg_init(&rep, QFT_OP_STRIPE, 0);
	m.count = 0;
	r = exchange(c, fd, l->ep.sealed, l->ep.cipher, &keys, &m, &b, &rep);
	qft_session_keys_wipe(&keys);
	if (r < 0) {
		qft_debug("stripe: not joined: %s%s%s", strerror(-r),
			  rep.errmsg.len ? ": " : "",
			  rep.errmsg.len ? rep.errmsg.s : "");
		close(fd);
		fd = r;
	}
	qbuf_free(&b);
	return fd;
}

/*
 * Stripes l's bulk stream where that pays (-o streams=): 0 when it is
 * striped or left alone, -errno when the switch itself failed and the
 * link cannot be used.  Before l's readers start.
 */
int qc_stripe_setup(struct qc_conn *c, struct link *l)
{
	struct lane *ln = &l->lane[LANE_BULK];
	struct timeval tv = { .tv_sec = c->o.timeout_s };
	const struct timeval off = { 0 };
	int fds[QFT_MAX_STRIPES - 1];
	unsigned want = wanted(c, l), n = 0, up;
	struct qft_msg m, rep;
	struct qft_hdr h;
	struct qbuf b;
	int r;

	if (want < 2)
		return 0;
	for (unsigned i = 0; i + 1 < want; i++) {
		r = join_one(c, l);
		if (r < 0)
			break;
		fds[n++] = r;
	}
	if (n == 0) {
		qft_info("cannot stripe the data connection: one connection "
			 "carries it");
		return 0;
	}
	r = qft_chan_stripes_add(&ln->chan, fds, n);
	if (r < 0) {
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		return 0;
	}
	/* Uploads are ours to spread: over every stripe unless we send
	 * with bbr, or the user asked for the stripes. */
	up = c->o.streams > 1 ||
	     strcmp(l->cc_up, QFT_TCPCC_PREFERRED) != 0 ? n + 1 : 1;
	qbuf_init(&b, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_STRIPE, next_id(c));
	m.count = n;
	m.opflags = c->o.streams > 1 ? QFT_STRIPE_ALL : 0;
	r = qft_msg_encode(&b, &m);
	if (r == 0)
		r = qft_chan_send_switch(&ln->chan, b.data, b.len, up);
	if (r == 0) {
		setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &tv,
			   sizeof(tv));
		r = qft_chan_recv(&ln->chan, &b, &h);
		setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &off,
			   sizeof(off));
		if (r == -EAGAIN || r == -EWOULDBLOCK)
			r = -ETIMEDOUT;
	}
	if (r == 0)
		r = qft_msg_decode(&rep, b.data, b.len);
	if (r == 0 && (rep.op != QFT_OP_STRIPE || rep.id != m.id ||
		       !(rep.flags & QFT_F_REPLY) || rep.status != QFT_OK ||
		       rep.count < 1 || rep.count > n + 1))
		r = -EPROTO;
	qbuf_free(&b);
	if (r < 0) {
		/* The next link goes without, rather than fail the same way
		 * for ever. */
		atomic_store(&c->stripes_off, true);
		qft_warn("cannot stripe the data connection: %s; the next "
			 "connection will not be striped", strerror(-r));
		return r;
	}
	qft_chan_recv_switch(&ln->chan);
	l->streams = n + 1;
	l->streams_up = up;
	l->streams_down = (unsigned)rep.count;
	qft_info("data striped over %u connections: uploads on %u, "
		 "downloads on %u", n + 1, up, l->streams_down);
	return 0;
}
