// SPDX-License-Identifier: MIT
/*
 * Striping a link's bulk stream over more TCP connections (chan.h,
 * "Striping"; docs/architecture.md, "Striping"), so that a loss on a far
 * link halves one stripe's window instead of the whole stream's.
 *
 * Done once per link, fresh or resumed, after its handshake.  Each stripe
 * is one more connection authenticated like a resumed one (the
 * transport's reattach) whose first frame is a STRIPE join; then a STRIPE
 * on bulk takes them.  This side sends striped from the frame after its
 * STRIPE, the server from the frame after its reply, so each side reads
 * striped after the other's.
 *
 * On a fresh link nothing else is on the bulk stream yet (notifications
 * travel on meta, which a link must have to be striped), so the reply is
 * read at once (qc_stripe_setup).  A resumed link is joined before its
 * readers start (qc_stripe_join) but taken after (qc_stripe_start): the
 * server may still answer the dead link's requests on it, ahead of the
 * STRIPE reply, and only a reader can route those.  The reader switches
 * its receiving when the reply comes (qc_stripe_taken).
 *
 * Error convention: 0 or a negative errno.  Anything that fails before
 * the bulk STRIPE leaves the link as it was (logged); after it, the link
 * cannot be read any more, and the error fails it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "errmap.h"
#include "log.h"
#include "net/conn_internal.h"
#include "tcpcc.h"
#include "thread.h"

/* -o streams=auto: this many connections where striping pays, sent on
 * QFT_CHAN_STRIPES_START of them until they lose packets (chan.h) ... */
#define STRIPES_AUTO QFT_MAX_STRIPES
/* Joins at once: the server's listener lets one address handshake this
 * many times at once (server/gate.h, SRV_GATE_PER_PEER), and a third
 * would push out the first. */
#define JOINERS 2u
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
	    !l->cc_up[0] || !c->o.ops->join) {
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
 * or -errno (logged at debug: the link goes on with fewer stripes).
 * Called from the joiner threads. */
static int join_one(struct qc_conn *c, struct link *l, uint64_t id)
{
	struct qft_session_keys keys;
	struct qft_msg m, rep;
	struct qbuf b;
	int fd, r;

	r = c->o.ops->join(c->o.ops_ctx, &l->ep, &fd, &keys);
	if (r < 0) {
		qft_debug("stripe: cannot connect: %s", strerror(-r));
		return r;
	}
	qbuf_init(&b, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_STRIPE, id);
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

/* The joins of one link, shared by its joiner threads. */
struct joins {
	struct qc_conn *c;
	struct link *l;
	pthread_mutex_t lock;
	unsigned want;           /* joins to make */
	unsigned next;           /* lock: the next one to start */
	bool failed;             /* lock: one failed, start no more */
	uint64_t id[QFT_MAX_STRIPES - 1];
	int fd[QFT_MAX_STRIPES - 1];   /* each its joiner's: socket or -errno */
};

static void *joiner_main(void *arg)
{
	struct joins *j = arg;

	for (;;) {
		unsigned i;

		pthread_mutex_lock(&j->lock);
		i = j->failed ? j->want : j->next++;
		pthread_mutex_unlock(&j->lock);
		if (i >= j->want)
			return NULL;
		j->fd[i] = join_one(j->c, j->l, j->id[i]);
		if (j->fd[i] < 0) {
			/* The next would most likely fail the same way. */
			pthread_mutex_lock(&j->lock);
			j->failed = true;
			pthread_mutex_unlock(&j->lock);
		}
	}
}

/*
 * Joins the stripes l's bulk stream should have (-o streams=) and adds
 * them to its channel, not yet used: their number (0 for none).  Before
 * l's readers start.  Two links in a row that died before their STRIPE
 * was answered turn striping off, rather than fail the same way for ever.
 */
static unsigned join_all(struct qc_conn *c, struct link *l)
{
	struct lane *ln = &l->lane[LANE_BULK];
	int fds[QFT_MAX_STRIPES - 1];
	unsigned want, n = 0, nt = 0;
	pthread_t t[JOINERS];
	struct joins j;

	if (atomic_load(&c->stripe_tries) >= 2 &&
	    !atomic_exchange(&c->stripes_off, true))
		qft_warn("two connections in a row failed while being "
			 "striped; the next ones will not be");
	want = wanted(c, l);
	if (want < 2)
		return 0;
	/* JOINERS at a time: at 40 ms each join costs about 0.15 s. */
	j.c = c;
	j.l = l;
	j.want = want - 1;
	j.next = 0;
	j.failed = false;
	pthread_mutex_init(&j.lock, NULL);
	for (unsigned i = 0; i < j.want; i++) {
		j.id[i] = next_id(c);
		j.fd[i] = -ECANCELED;
	}
	for (unsigned i = 0; i < JOINERS && i < j.want; i++) {
		if (qft_thread_start(&t[i], joiner_main, &j) != 0)
			break;
		nt++;
	}
	if (nt == 0)
		joiner_main(&j);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&j.lock);
	for (unsigned i = 0; i < j.want; i++)
		if (j.fd[i] >= 0)
			fds[n++] = j.fd[i];
	if (n == 0) {
		qft_info("cannot stripe the data connection: one connection "
			 "carries it");
		return 0;
	}
	if (qft_chan_stripes_add(&ln->chan, fds, n) < 0) {
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		return 0;
	}
	return n;
}

/*
 * The STRIPE on bulk that takes l's n joined stripes: this side sends
 * striped from the next frame on.  Its reply is awaited by l's reader
 * (or by qc_stripe_setup, before there is one): l->stripe_id says which.
 */
static int take(struct qc_conn *c, struct link *l, unsigned n)
{
	struct lane *ln = &l->lane[LANE_BULK];
	struct qft_msg m;
	struct qbuf b;
	unsigned up, max;
	int r;

	/* Uploads are ours to spread. */
	qft_chan_stripes_choose(n + 1, c->o.streams > 1,
				strcmp(l->cc_up, QFT_TCPCC_PREFERRED) == 0,
				&up, &max);
	qft_msg_init(&m, QFT_OP_STRIPE, next_id(c));
	m.count = n;
	m.opflags = c->o.streams > 1 ? QFT_STRIPE_ALL : 0;
	pthread_mutex_lock(&c->lock);
	l->stripe_id = m.id;
	l->stripe_n = n;
	pthread_mutex_unlock(&c->lock);
	atomic_fetch_add(&c->stripe_tries, 1);
	qbuf_init(&b, FRAME_LIMIT);
	r = qft_msg_encode(&b, &m);
	if (r == 0)
		r = qft_chan_send_switch(&ln->chan, b.data, b.len, up);
	if (r == 0)
		qft_chan_tx_grow(&ln->chan, max);
	qbuf_free(&b);
	return r;
}

/*
 * The server's answer to l's STRIPE, received on bulk as frame `in`, by
 * the only receiver of that stream: from the next frame on, bulk is read
 * striped.  0, or -EPROTO for a reply that was not asked for or does not
 * fit (the stream cannot be read any more: the link fails, and the next
 * one is not striped).
 */
int qc_stripe_taken(struct link *l, const struct qbuf *in)
{
	struct lane *ln = &l->lane[LANE_BULK];
	struct qc_conn *c = l->c;
	struct qft_msg rep;
	unsigned n = 0;
	int r;

	r = qft_msg_decode(&rep, in->data, in->len);
	pthread_mutex_lock(&c->lock);
	if (r == 0 && l->stripe_id && rep.id == l->stripe_id) {
		n = l->stripe_n;
		l->stripe_id = 0;
	}
	pthread_mutex_unlock(&c->lock);
	if (r == 0 && (n == 0 || rep.op != QFT_OP_STRIPE ||
		       !(rep.flags & QFT_F_REPLY) || rep.status != QFT_OK ||
		       rep.count < 1 || rep.count > n + 1))
		r = -EPROTO;
	if (r < 0) {
		atomic_store(&c->stripes_off, true);
		qft_warn("cannot stripe the data connection: the server's "
			 "STRIPE reply does not fit the request; the next "
			 "connection will not be striped");
		return -EPROTO;
	}
	qft_chan_recv_switch(&ln->chan);
	atomic_store(&c->stripe_tries, 0);
	pthread_mutex_lock(&c->lock);
	l->streams = n + 1;
	l->streams_down = (unsigned)rep.count;
	pthread_mutex_unlock(&c->lock);
	qft_info("data striped over %u connections: uploads on %u, "
		 "downloads on %u (to begin with)", n + 1,
		 qft_chan_tx_use(&ln->chan), (unsigned)rep.count);
	return 0;
}

void qc_stripe_join(struct qc_conn *c, struct link *l)
{
	unsigned n = join_all(c, l);

	pthread_mutex_lock(&c->lock);
	l->stripe_n = n;
	pthread_mutex_unlock(&c->lock);
}

int qc_stripe_start(struct qc_conn *c, struct link *l)
{
	unsigned n;

	pthread_mutex_lock(&c->lock);
	n = l->stripe_n;
	pthread_mutex_unlock(&c->lock);
	return n ? take(c, l, n) : 0;
}

int qc_stripe_setup(struct qc_conn *c, struct link *l)
{
	struct lane *ln = &l->lane[LANE_BULK];
	struct timeval tv = { .tv_sec = c->o.timeout_s };
	const struct timeval off = { 0 };
	unsigned n = join_all(c, l);
	struct qft_hdr h;
	struct qbuf b;
	int r;

	if (n == 0)
		return 0;
	qbuf_init(&b, FRAME_LIMIT);
	r = take(c, l, n);
	if (r == 0) {
		/* A fresh session: its STRIPE reply is the next frame. */
		setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &tv,
			   sizeof(tv));
		r = qft_chan_recv(&ln->chan, &b, &h);
		setsockopt(ln->chan.rfd, SOL_SOCKET, SO_RCVTIMEO, &off,
			   sizeof(off));
		if (r == -EAGAIN || r == -EWOULDBLOCK)
			r = -ETIMEDOUT;
	}
	if (r == 0)
		r = qc_stripe_taken(l, &b);
	qbuf_free(&b);
	if (r < 0 && r != -EPROTO) {
		/* The next link goes without, rather than fail the same way
		 * for ever. */
		atomic_store(&c->stripes_off, true);
		qft_warn("cannot stripe the data connection: %s; the next "
			 "connection will not be striped", strerror(-r));
	}
	return r;
}
