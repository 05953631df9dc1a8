// SPDX-License-Identifier: MIT
/* Frame transport over a byte stream (see chan.h). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <linux/sockios.h>
/* Not netinet/tcp.h: glibc's tcp_info lacks the segment counts. */
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "chan.h"
#include "log.h"

/*
 * sbuf holds a record of the largest frame, or a compressed frame built
 * in place: its payload is encoded into room for qft_lz4_bound(), which
 * is QFT_LZ4_HDR_SIZE more than the payload, however little it ends up
 * using.
 */
#define SEND_LIMIT (QFT_SEAL_MAX_RECORD + QFT_LZ4_HDR_SIZE)
_Static_assert(QFT_LZ4_MAX_CHUNK >= QFT_MAX_PAYLOAD,
	       "any payload must fit one chunk");
_Static_assert(QFT_CHAN_MAX_STRIPES == QFT_MAX_STRIPES,
	       "a channel holds the stripes the protocol allows");

int qft_chan_init(struct qft_chan *c, int rfd, int wfd)
{
	int r;

	c->rfd = rfd;
	c->wfd = wfd;
	c->werr = 0;
	c->tx = NULL;
	c->rx = NULL;
	qbuf_init(&c->sbuf, SEND_LIMIT);
	qft_lz4_policy_init(&c->txz, QFT_LZ4_NONE);
	c->rx_lz4 = false;
	c->lz4_on = false;
	qbuf_init(&c->zbuf, QFT_MAX_PAYLOAD);
	qbuf_init(&c->gbuf, QFT_MAX_PAYLOAD);
	memset(&c->st, 0, sizeof(c->st));
	c->nstripes = 1;
	for (unsigned i = 0; i < QFT_CHAN_MAX_STRIPES; i++)
		c->sfd[i] = -1;
	c->tx_striped = c->rx_striped = false;
	c->tx_use = c->tx_max = 1;
	c->tx_next = 0;
	c->tx_probe_ns = 0;
	memset(&c->tx_loss, 0, sizeof(c->tx_loss));
	c->tx_seq = c->rx_seq = 0;
	memset(c->tx_chunks, 0, sizeof(c->tx_chunks));
	memset(c->rx_chunks, 0, sizeof(c->rx_chunks));
	c->rx_cur = 0;
	c->rx_left = 0;
	memset(c->rx_known, 0, sizeof(c->rx_known));
	memset(c->rx_head, 0, sizeof(c->rx_head));
	memset(c->rx_hlen, 0, sizeof(c->rx_hlen));
	r = pthread_mutex_init(&c->wlock, NULL);
	return -r;
}

void qft_chan_set_seal(struct qft_chan *c, struct qft_seal *tx,
		       struct qft_seal *rx)
{
	pthread_mutex_lock(&c->wlock);
	c->tx = tx;
	pthread_mutex_unlock(&c->wlock);
	c->rx = rx;
}

void qft_chan_set_lz4(struct qft_chan *c, enum qft_lz4_mode mode)
{
	pthread_mutex_lock(&c->wlock);
	qft_lz4_policy_init(&c->txz, mode);
	c->txz.reprobe = QFT_CHAN_LZ4_REPROBE;
	c->lz4_on = true;
	pthread_mutex_unlock(&c->wlock);
	c->rx_lz4 = true;
}

uint32_t qft_chan_lz4_offer(enum qft_lz4_mode mode)
{
	switch (mode) {
	case QFT_LZ4_ALWAYS: return QFT_FEAT_LZ4;
	case QFT_LZ4_AUTO:   return QFT_FEAT_LZ4 | QFT_FEAT_LZ4_AUTO;
	case QFT_LZ4_NONE:   break;
	}
	return 0;
}

enum qft_lz4_mode qft_chan_lz4_accept(struct qft_chan *c, uint32_t asked,
				      bool allow, uint32_t *reply)
{
	enum qft_lz4_mode mode;

	*reply = 0;
	if (!(asked & QFT_FEAT_LZ4) || !allow)
		return QFT_LZ4_NONE;
	/* The server's replies follow the client's choice. */
	mode = asked & QFT_FEAT_LZ4_AUTO ? QFT_LZ4_AUTO : QFT_LZ4_ALWAYS;
	*reply = qft_chan_lz4_offer(mode);
	qft_chan_set_lz4(c, mode);
	return mode;
}

enum qft_lz4_mode qft_chan_lz4_agreed(struct qft_chan *c,
				      enum qft_lz4_mode mode,
				      uint32_t replied)
{
	if (!(qft_chan_lz4_offer(mode) & QFT_FEAT_LZ4))
		return QFT_LZ4_NONE;
	if (!(replied & QFT_FEAT_LZ4)) {
		qft_info("the server does not accept compression "
			 "(compress=%s): sending uncompressed",
			 qft_lz4_mode_name(mode));
		return QFT_LZ4_NONE;
	}
	qft_chan_set_lz4(c, mode);
	return mode;
}

void qft_chan_lz4_stats(struct qft_chan *c, struct qft_chan_lz4_stats *st)
{
	pthread_mutex_lock(&c->wlock);
	*st = c->st;
	pthread_mutex_unlock(&c->wlock);
}

/* Percent of `of` that `part` is, for the log; 0 of nothing is 100%. */
static double percent(uint64_t part, uint64_t of)
{
	return of ? 100.0 * (double)part / (double)of : 100.0;
}

void qft_chan_destroy(struct qft_chan *c)
{
	if (c->lz4_on) {
		const struct qft_chan_lz4_stats *st = &c->st;

		qft_info("lz4: sent %llu bytes as %llu (%.1f%%, %llu of %llu "
			 "frames compressed); received %llu bytes as %llu "
			 "(%.1f%%, %llu of %llu frames compressed)",
			 (unsigned long long)st->tx_bytes,
			 (unsigned long long)st->tx_wire,
			 percent(st->tx_wire, st->tx_bytes),
			 (unsigned long long)st->tx_lz4,
			 (unsigned long long)st->tx_frames,
			 (unsigned long long)st->rx_bytes,
			 (unsigned long long)st->rx_wire,
			 percent(st->rx_wire, st->rx_bytes),
			 (unsigned long long)st->rx_lz4,
			 (unsigned long long)st->rx_frames);
	}
	if (c->rfd >= 0)
		close(c->rfd);
	if (c->wfd >= 0 && c->wfd != c->rfd)
		close(c->wfd);
	c->rfd = c->wfd = -1;
	for (unsigned i = 1; i < c->nstripes; i++)
		if (c->sfd[i] >= 0)
			close(c->sfd[i]);
	c->nstripes = 1;
	qbuf_free(&c->sbuf);
	qbuf_free(&c->zbuf);
	qbuf_free(&c->gbuf);
	pthread_mutex_destroy(&c->wlock);
}

void qft_chan_shutdown(struct qft_chan *c)
{
	unsigned n;

	pthread_mutex_lock(&c->wlock);
	n = c->nstripes;
	pthread_mutex_unlock(&c->wlock);
	for (unsigned i = 1; i < n; i++)
		shutdown(c->sfd[i], SHUT_RDWR);
	/* Sockets wake their readers; for pipes closing our write end lets
	 * the peer see EOF, which makes it close its side in turn. */
	if (shutdown(c->rfd, SHUT_RDWR) < 0 && c->wfd != c->rfd) {
		pthread_mutex_lock(&c->wlock);
		if (c->wfd >= 0) {
			close(c->wfd);
			c->wfd = -1;
		}
		c->werr = -EPIPE;
		pthread_mutex_unlock(&c->wlock);
	}
}

int qft_write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Writes the pieces iov[0..n) whole, retrying on EINTR and after partial
 * writes; `iov` is the caller's scratch copy and is consumed.
 */
static int writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Stripe i's socket (0: the channel's own). */
static int stripe_wfd(const struct qft_chan *c, unsigned i)
{
	return i ? c->sfd[i] : c->wfd;
}

static int stripe_rfd(const struct qft_chan *c, unsigned i)
{
	return i ? c->sfd[i] : c->rfd;
}

/*
 * The stripe to send the next record on (wlock): the one with the
 * fewest bytes not yet sent (a stripe slowed by a loss keeps them),
 * ties going round from the one after the last choice, so idle stripes
 * share the records evenly.  A socket that cannot say (not TCP) counts
 * as empty.
 */
static unsigned pick_stripe(struct qft_chan *c)
{
	unsigned best = c->tx_next % c->tx_use;
	int least = INT_MAX;

	for (unsigned k = 0; k < c->tx_use; k++) {
		unsigned i = (c->tx_next + k) % c->tx_use;
		int q = 0;

		if (ioctl(stripe_wfd(c, i), SIOCOUTQNSD, &q) < 0)
			q = 0;
		if (q < least) {
			least = q;
			best = i;
		}
	}
	c->tx_next = best + 1;
	return best;
}

bool qft_chan_loss_step(struct qft_chan_loss *g, uint64_t segs,
			uint64_t resent)
{
	uint64_t ds, dr;

	if (!g->primed || segs < g->segs || resent < g->resent) {
		/* The first sample, or counts that went back (another set
		 * of sockets): a new start. */
		*g = (struct qft_chan_loss){ .primed = true, .segs = segs,
					     .resent = resent };
		return false;
	}
	ds = segs - g->segs;
	dr = resent - g->resent;
	if (ds < QFT_CHAN_LOSS_SEGS)
		return false;           /* too few to judge: keep counting */
	g->segs = segs;
	g->resent = resent;
	if (dr * 1000000u < ds * QFT_CHAN_LOSS_PPM) {
		g->lossy = 0;
		return false;
	}
	return ++g->lossy >= QFT_CHAN_LOSS_VERDICTS;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * While the stripes in use may grow (wlock): every
 * QFT_CHAN_LOSS_PROBE_MS, their segments sent and sent again, summed
 * from TCP_INFO, for a verdict; the stripes grow when it says so.
 */
static void tx_probe(struct qft_chan *c)
{
	uint64_t segs = 0, resent = 0;
	int64_t now = mono_ns();

	if (now < c->tx_probe_ns)
		return;
	c->tx_probe_ns = now + (int64_t)QFT_CHAN_LOSS_PROBE_MS * 1000000;
	for (unsigned i = 0; i < c->tx_use; i++) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);

		memset(&ti, 0, sizeof(ti));
		if (getsockopt(stripe_wfd(c, i), IPPROTO_TCP, TCP_INFO, &ti,
			       &len) < 0) {
			/* Not TCP: nothing to judge by, nothing to grow. */
			c->tx_max = c->tx_use;
			return;
		}
		segs += ti.tcpi_data_segs_out;
		resent += ti.tcpi_total_retrans;
	}
	if (!qft_chan_loss_step(&c->tx_loss, segs, resent))
		return;
	qft_info("striping: the %u connections sent on lose packets "
		 "(%u verdicts in a row of %u or more per million sent "
		 "again); sending on all %u", c->tx_use,
		 QFT_CHAN_LOSS_VERDICTS, QFT_CHAN_LOSS_PPM, c->tx_max);
	c->tx_use = c->tx_max;
}

/*
 * Writes a record (or plain frame) iov[0..n) whole: on the channel's
 * own socket, or when striped as chunks, each behind its number and
 * length on the stripe pick_stripe chose for it; wlock.  The pieces are
 * not changed.
 */
static int emit(struct qft_chan *c, const struct iovec *iov, int n)
{
	struct iovec out[QFT_CHAN_MAX_IOV + 3];
	uint8_t hdr[QFT_CHAN_STRIPE_HDR];
	size_t left = 0, at = 0;     /* at: offset within iov[i] */
	int i = 0, r;

	if (!c->tx_striped) {
		memcpy(out, iov, (size_t)n * sizeof(*iov));
		return writev_all(c->wfd, out, n);
	}
	if (c->tx_use < c->tx_max)
		tx_probe(c);
	for (int k = 0; k < n; k++)
		left += iov[k].iov_len;
	while (left) {
		size_t want = left < QFT_CHAN_STRIPE_CHUNK ? left :
			      QFT_CHAN_STRIPE_CHUNK, took = 0;
		unsigned s = c->tx_use > 1 ? pick_stripe(c) : 0;
		int m = 1;

		/* The chunk's slices of the pieces. */
		while (took < want) {
			size_t k = iov[i].iov_len - at;

			if (k > want - took)
				k = want - took;
			out[m++] = (struct iovec){
				(uint8_t *)iov[i].iov_base + at, k };
			took += k;
			at += k;
			if (at == iov[i].iov_len) {
				i++;
				at = 0;
			}
		}
		qft_store64(hdr, c->tx_seq);
		qft_store32(hdr + 8, (uint32_t)want);
		out[0] = (struct iovec){ hdr, sizeof(hdr) };
		r = writev_all(stripe_wfd(c, s), out, m);
		if (r < 0)
			return r;
		c->tx_seq++;
		c->tx_chunks[s]++;
		left -= want;
	}
	return 0;
}

static int emit1(struct qft_chan *c, const void *p, size_t len)
{
	struct iovec v = { .iov_base = (void *)p, .iov_len = len };

	return emit(c, &v, 1);
}

/*
 * Seals the frame iov[0..n) (`len` bytes) and writes the record; wlock.
 * An encrypting cipher writes the body into the channel's one record
 * buffer, straight from the pieces; in clear (cipher none) only the tag
 * is computed and the pieces go out as they are, between the length
 * field and the tag.
 */
static int send_sealed(struct qft_chan *c, const struct iovec *iov, int n,
		       size_t len)
{
	struct iovec out[QFT_CHAN_MAX_IOV + 2];
	uint8_t lenf[QFT_SEAL_LEN_SIZE], tag[QFT_SEAL_TAG_SIZE];
	uint8_t *rec;
	int r;

	if (len > QFT_SEAL_MAX_FRAME)
		return -EMSGSIZE;
	if (c->tx->cipher == QFT_CIPHER_NONE) {
		if ((r = qft_seal_iov(c->tx, iov, n, lenf, NULL, tag)) < 0)
			return r;
		out[0] = (struct iovec){ lenf, sizeof(lenf) };
		memcpy(out + 1, iov, (size_t)n * sizeof(*iov));
		out[n + 1] = (struct iovec){ tag, sizeof(tag) };
		return emit(c, out, n + 2);
	}
	qbuf_reset(&c->sbuf);
	rec = qbuf_extend(&c->sbuf, QFT_SEAL_OVERHEAD + len);
	if (!rec)
		return -ENOMEM;
	r = qft_seal_iov(c->tx, iov, n, rec, rec + QFT_SEAL_LEN_SIZE,
			 rec + QFT_SEAL_LEN_SIZE + len);
	if (r < 0)
		return r;
	return emit1(c, rec, c->sbuf.len);
}

/*
 * The payload of the frame iov[0..n) (`len` bytes) as one range: where
 * it lies when one piece holds it all, else gathered into c->gbuf;
 * wlock.  NULL when there is no memory (the frame then goes as it is).
 */
static const uint8_t *frame_payload(struct qft_chan *c,
				    const struct iovec *iov, int n,
				    size_t len)
{
	size_t skip = QFT_HDR_SIZE;

	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len <= skip) {
			skip -= iov[i].iov_len;
			continue;
		}
		if (iov[i].iov_len - skip == len - QFT_HDR_SIZE)
			return (const uint8_t *)iov[i].iov_base + skip;
		break;
	}
	qbuf_reset(&c->gbuf);
	skip = QFT_HDR_SIZE;
	for (int i = 0; i < n; i++) {
		size_t k = iov[i].iov_len < skip ? iov[i].iov_len : skip;

		skip -= k;
		if (qbuf_put_bytes(&c->gbuf, (const uint8_t *)iov[i].iov_base +
				   k, iov[i].iov_len - k) < 0)
			return NULL;
	}
	return c->gbuf.data;
}

/*
 * Builds the QFT_F_LZ4 version of the frame iov[0..n) (`len` bytes, the
 * header in iov[0]) in c->sbuf, starting `off` bytes in (room for a
 * record's length field), with room after it for a record's tag; under
 * wlock.  Returns the compressed frame's length, or 0 when the frame is
 * to go as it is: too small, incompressible, skipped by the auto policy,
 * or no memory for the buffer (compression is never a reason for a frame
 * not to leave).
 */
static size_t compress_frame(struct qft_chan *c, const struct iovec *iov,
			     int n, size_t len, size_t off)
{
	const uint8_t *hdr = iov[0].iov_base, *payload;
	size_t plen = len - QFT_HDR_SIZE, zlen;
	uint8_t *p;

	if (len < QFT_HDR_SIZE + QFT_CHAN_LZ4_MIN || plen > QFT_LZ4_MAX_CHUNK)
		return 0;
	payload = frame_payload(c, iov, n, len);
	if (!payload)
		return 0;
	qbuf_reset(&c->sbuf);
	p = qbuf_extend(&c->sbuf, off + QFT_HDR_SIZE + qft_lz4_bound(plen) +
			QFT_SEAL_TAG_SIZE);
	if (!p)
		return 0;
	p += off;
	if (qft_lz4_try_encode(&c->txz, payload, plen, p + QFT_HDR_SIZE,
			       qft_lz4_bound(plen), &zlen) <= 0)
		return 0;
	/* The same header with the new length and the flag. */
	memcpy(p, hdr, QFT_HDR_SIZE);
	qft_store32(p, (uint32_t)zlen);
	qft_store16(p + 6, (uint16_t)(qft_load16(hdr + 6) | QFT_F_LZ4));
	return QFT_HDR_SIZE + zlen;
}

/* Sends one frame, compressed and sealed as the channel says; wlock. */
static int send_locked(struct qft_chan *c, const struct iovec *iov, int n,
		       size_t len)
{
	size_t off = c->tx ? QFT_SEAL_LEN_SIZE : 0, zlen = 0;
	int r;

	if (c->txz.mode != QFT_LZ4_NONE)
		zlen = compress_frame(c, iov, n, len, off);
	if (zlen) {
		/* The frame is in sbuf already: seal it where it lies. */
		if (c->tx && (r = qft_seal_in_place(c->tx, c->sbuf.data,
						    zlen)) < 0)
			return r;
		c->sbuf.len = off + zlen + (c->tx ? QFT_SEAL_TAG_SIZE : 0);
		r = emit1(c, c->sbuf.data, c->sbuf.len);
	} else if (c->tx) {
		r = send_sealed(c, iov, n, len);
	} else {
		r = emit(c, iov, n);
	}
	if (r == 0) {
		c->st.tx_frames++;
		c->st.tx_bytes += len - QFT_HDR_SIZE;
		c->st.tx_wire += (zlen ? zlen : len) - QFT_HDR_SIZE;
		c->st.tx_lz4 += zlen != 0;
	}
	return r;
}

/* The frame's length, once its pieces are known to make one. */
static int frame_len(const struct iovec *iov, int n, size_t *out)
{
	size_t len = 0;

	if (n < 1 || n > QFT_CHAN_MAX_IOV || iov[0].iov_len < QFT_HDR_SIZE)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > QFT_SEAL_MAX_FRAME - len)
			return -EMSGSIZE;
		len += iov[i].iov_len;
	}
	/* The header must say what follows it, or the peer loses sync. */
	if (qft_load32(iov[0].iov_base) != len - QFT_HDR_SIZE)
		return -EINVAL;
	*out = len;
	return 0;
}

int qft_chan_sendv(struct qft_chan *c, const struct iovec *iov, int n)
{
	size_t len;
	int r;

	if ((r = frame_len(iov, n, &len)) < 0)
		return r;
	pthread_mutex_lock(&c->wlock);
	r = c->werr;
	if (r == 0) {
		r = send_locked(c, iov, n, len);
		/* A partial frame desynchronises the stream: never retry. */
		if (r < 0)
			c->werr = r;
	}
	pthread_mutex_unlock(&c->wlock);
	return r;
}

int qft_chan_stripes_add(struct qft_chan *c, const int *fds, unsigned n)
{
	int r = -EINVAL;

	pthread_mutex_lock(&c->wlock);
	if (c->nstripes == 1 && n >= 1 && n < QFT_CHAN_MAX_STRIPES) {
		for (unsigned i = 0; i < n; i++)
			c->sfd[i + 1] = fds[i];
		c->nstripes = n + 1;
		r = 0;
	}
	pthread_mutex_unlock(&c->wlock);
	return r;
}

int qft_chan_send_switch(struct qft_chan *c, const void *frame, size_t len,
			 unsigned use)
{
	struct iovec v = { .iov_base = (void *)frame, .iov_len = len };
	int r;

	if ((r = frame_len(&v, 1, &len)) < 0)
		return r;
	pthread_mutex_lock(&c->wlock);
	r = c->werr;
	if (r == 0 && (c->tx_striped || use < 1 || use > c->nstripes))
		r = -EINVAL;
	else if (r == 0 && (r = send_locked(c, &v, 1, len)) < 0)
		c->werr = r;
	if (r == 0) {
		/* From the next record on, behind its number. */
		c->tx_striped = true;
		c->tx_use = c->tx_max = use;
		c->tx_seq = 0;
	}
	pthread_mutex_unlock(&c->wlock);
	return r;
}

void qft_chan_tx_grow(struct qft_chan *c, unsigned max)
{
	pthread_mutex_lock(&c->wlock);
	if (c->tx_striped && max > c->tx_use) {
		c->tx_max = max < c->nstripes ? max : c->nstripes;
		c->tx_probe_ns = 0;
		memset(&c->tx_loss, 0, sizeof(c->tx_loss));
	}
	pthread_mutex_unlock(&c->wlock);
}

void qft_chan_stripes_choose(unsigned conns, bool all, bool bbr,
			     unsigned *use, unsigned *max)
{
	*max = bbr && !all ? 1 : conns;
	*use = all || *max < QFT_CHAN_STRIPES_START ? *max :
	       QFT_CHAN_STRIPES_START;
}

unsigned qft_chan_rx_used(const struct qft_chan *c)
{
	unsigned n = 0;

	for (unsigned i = 0; i < QFT_CHAN_MAX_STRIPES; i++)
		n += c->rx_chunks[i] != 0;
	return c->rx_striped ? n : 1;
}

void qft_chan_recv_switch(struct qft_chan *c)
{
	c->rx_striped = true;
	c->rx_seq = 0;
	c->rx_left = 0;
	memset(c->rx_known, 0, sizeof(c->rx_known));
	memset(c->rx_chunks, 0, sizeof(c->rx_chunks));
}

void qft_chan_stripes_drop(struct qft_chan *c)
{
	pthread_mutex_lock(&c->wlock);
	for (unsigned i = 1; i < c->nstripes; i++)
		if (c->sfd[i] >= 0)
			close(c->sfd[i]);
	for (unsigned i = 0; i < QFT_CHAN_MAX_STRIPES; i++)
		c->sfd[i] = -1;
	c->nstripes = 1;
	c->tx_striped = false;
	c->tx_use = c->tx_max = 1;
	pthread_mutex_unlock(&c->wlock);
	c->rx_striped = false;
	memset(c->rx_chunks, 0, sizeof(c->rx_chunks));
	c->rx_left = 0;
	memset(c->rx_known, 0, sizeof(c->rx_known));
}

void qft_chan_end_locked(struct qft_chan *c)
{
	shutdown(c->wfd, SHUT_WR);
	for (unsigned i = 1; i < c->nstripes; i++)
		shutdown(c->sfd[i], SHUT_WR);
}

unsigned qft_chan_stripes(struct qft_chan *c)
{
	unsigned n;

	pthread_mutex_lock(&c->wlock);
	n = c->nstripes;
	pthread_mutex_unlock(&c->wlock);
	return n;
}

unsigned qft_chan_tx_use(struct qft_chan *c)
{
	unsigned n;

	pthread_mutex_lock(&c->wlock);
	n = c->tx_striped ? c->tx_use : 1;
	pthread_mutex_unlock(&c->wlock);
	return n;
}

int qft_chan_send(struct qft_chan *c, const void *frame, size_t len)
{
	struct iovec v = { .iov_base = (void *)frame, .iov_len = len };

	return qft_chan_sendv(c, &v, 1);
}

int qft_chan_send_msg(struct qft_chan *c, struct qbuf *scratch,
		      const struct qft_msg *m)
{
	int r;

	qbuf_reset(scratch);
	if ((r = qft_msg_encode(scratch, m)) < 0)
		return r;
	return qft_chan_send(c, scratch->data, scratch->len);
}

/* Reads exactly n bytes; *got tells how many arrived before a failure. */
static int read_all(int fd, uint8_t *p, size_t n, size_t *got)
{
	*got = 0;
	while (*got < n) {
		ssize_t r = read(fd, p + *got, n - *got);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EPIPE;
		*got += (size_t)r;
	}
	return 0;
}

static int stream_read(struct qft_chan *c, uint8_t *p, size_t n,
		       size_t *got);

/*
 * qft_hdr_decode for a received header, which may carry QFT_F_LZ4: the
 * bit is taken out of the header (the frame handed on is an ordinary
 * one, with the expanded length once expand() ran) and *lz4 says whether
 * it was there.  *h is filled for the caller's log even on failure.
 */
static int decode_header(struct qft_chan *c, uint8_t *hdr, size_t n,
			 struct qft_hdr *h, bool *lz4)
{
	uint16_t flags;
	int r;

	*lz4 = false;
	if (n < QFT_HDR_SIZE)
		return qft_hdr_decode(h, hdr, n);
	flags = qft_load16(hdr + 6);
	*lz4 = flags & QFT_F_LZ4;
	qft_store16(hdr + 6, (uint16_t)(flags & ~QFT_F_LZ4));
	r = qft_hdr_decode(h, hdr, n);
	if (r == 0 && *lz4 && !c->rx_lz4) {
		qft_err("closing connection: a compressed %s frame (id %llu), "
			"but compression was not agreed on",
			qft_op_name(h->op), (unsigned long long)h->id);
		r = -EBADMSG;
	}
	return r;
}

/*
 * Expands the compressed payload z[0..n) behind the header that is all
 * `in` holds so far, and makes the header say the expanded length.  The
 * chunk's own header is checked before anything is allocated: it may not
 * claim more than QFT_MAX_PAYLOAD bytes, and the block must expand to
 * exactly what it claims.  Anything else is -EBADMSG: no correct sender
 * makes it, and the connection must end.
 */
static int expand(struct qft_chan *c, struct qbuf *in, const uint8_t *z,
		  size_t n, struct qft_hdr *h)
{
	size_t l = 0, got;
	unsigned kind;
	uint8_t *p;
	int r;

	r = qft_lz4_peek(z, n, &kind, &l);
	if (r == 0 && l > QFT_MAX_PAYLOAD)
		r = -EMSGSIZE;
	if (r < 0)
		goto bad;
	if (qbuf_reserve(in, l) < 0)
		return -ENOMEM;
	p = in->data + in->len;
	r = qft_lz4_decode(z, n, p, l, &got);
	if (r < 0)
		goto bad;
	in->len += l;
	qft_store32(in->data, (uint32_t)l);
	c->st.rx_frames++;
	c->st.rx_bytes += l;
	c->st.rx_wire += n;
	c->st.rx_lz4++;
	h->len = (uint32_t)l;
	return 0;
bad:
	/* The claimed length, when there is one, says what went wrong. */
	if (n >= QFT_LZ4_HDR_SIZE)
		qft_err("closing connection: a compressed %s frame (id %llu, "
			"%zu bytes claiming %lu) does not expand to at most "
			"%u bytes", qft_op_name(h->op),
			(unsigned long long)h->id, n,
			(unsigned long)qft_load32(z + 1), QFT_MAX_PAYLOAD);
	else
		qft_err("closing connection: a compressed %s frame (id %llu) "
			"is %zu bytes, too short for a chunk",
			qft_op_name(h->op), (unsigned long long)h->id, n);
	return -EBADMSG;
}

/* Counts a frame received as it is. */
static void count_plain(struct qft_chan *c, const struct qft_hdr *h)
{
	c->st.rx_frames++;
	c->st.rx_bytes += h->len;
	c->st.rx_wire += h->len;
}

/*
 * Reads one record and opens it where it lands: the length field goes
 * aside, the body straight to in->data, so the frame is at the start of
 * the buffer without being moved there.
 */
static int recv_sealed(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h)
{
	uint8_t lenf[QFT_SEAL_LEN_SIZE];
	size_t got, body, flen;
	uint8_t *p;
	bool lz4;
	int r;

	r = stream_read(c, lenf, sizeof(lenf), &got);
	if (r < 0)
		return r == -EPIPE && got ? -EIO : r;
	/* Bound the body before allocating anything the peer asked for. */
	r = qft_seal_body_len(lenf, &body);
	if (r < 0)
		return r;
	p = qbuf_extend(in, body);
	if (!p)
		return -ENOMEM;
	r = stream_read(c, p, body, &got);
	if (r < 0)
		return r == -EPIPE ? -EIO : r;
	r = qft_open_split(c->rx, lenf, in->data, body, &flen);
	if (r < 0)
		return r;
	in->len = flen;
	r = decode_header(c, in->data, flen, h, &lz4);
	if (r < 0)
		return r;
	if (flen - QFT_HDR_SIZE != h->len)
		return -EBADMSG;
	if (!lz4) {
		count_plain(c, h);
		return 0;
	}
	/* The compressed bytes move aside (they are the smaller half) and
	 * expand behind the header. */
	qbuf_reset(&c->zbuf);
	if (qbuf_put_bytes(&c->zbuf, in->data + QFT_HDR_SIZE, h->len) < 0)
		return -ENOMEM;
	in->len = QFT_HDR_SIZE;
	return expand(c, in, c->zbuf.data, h->len, h);
}

static int recv_plain(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h)
{
	size_t got;
	uint8_t *p;
	bool lz4;
	int r;

	p = qbuf_extend(in, QFT_HDR_SIZE);
	if (!p)
		return -ENOMEM;
	r = stream_read(c, p, QFT_HDR_SIZE, &got);
	if (r < 0)
		return r == -EPIPE && got ? -EIO : r;
	/* Check the length before allocating anything the peer asked for. */
	r = decode_header(c, in->data, QFT_HDR_SIZE, h, &lz4);
	if (r < 0)
		return r;
	if (lz4) {
		/* Compressed bytes go aside, to expand into `in`. */
		qbuf_reset(&c->zbuf);
		if (qbuf_reserve(&c->zbuf, h->len) < 0)
			return -ENOMEM;
		p = c->zbuf.data;
	} else {
		p = qbuf_extend(in, h->len);
		if (!p)
			return -ENOMEM;
	}
	r = stream_read(c, p, h->len, &got);
	if (r == -EPIPE)
		return -EIO;
	if (r < 0)
		return r;
	if (lz4)
		return expand(c, in, p, h->len, h);
	count_plain(c, h);
	return 0;
}

/*
 * Finds the stripe that holds the chunk due (rx_seq), reading the
 * headers of the stripes' next chunks as they arrive.  Chunks of one
 * stripe come in increasing order, so once every stripe's next number
 * is known and none is the one due, it never comes: -EBADMSG, as for a
 * number already past or a length out of bounds.  -EPIPE when a stripe
 * ends between chunks.
 */
static int rx_due(struct qft_chan *c, unsigned *out)
{
	for (;;) {
		struct pollfd p[QFT_CHAN_MAX_STRIPES];
		unsigned idx[QFT_CHAN_MAX_STRIPES];
		nfds_t np = 0;

		for (unsigned i = 0; i < c->nstripes; i++) {
			if (c->rx_known[i] && c->rx_head[i] == c->rx_seq) {
				*out = i;
				return 0;
			}
			if (!c->rx_known[i]) {
				p[np] = (struct pollfd){ .fd = stripe_rfd(c, i),
							 .events = POLLIN };
				idx[np++] = i;
			}
		}
		if (np == 0)
			return -EBADMSG;
		if (poll(p, np, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (nfds_t k = 0; k < np; k++) {
			uint8_t hdr[QFT_CHAN_STRIPE_HDR];
			unsigned s = idx[k];
			size_t got;
			int r;

			if (!p[k].revents)
				continue;
			r = read_all(p[k].fd, hdr, sizeof(hdr), &got);
			if (r < 0)
				return r == -EPIPE && got ? -EIO : r;
			c->rx_head[s] = qft_load64(hdr);
			c->rx_hlen[s] = qft_load32(hdr + 8);
			c->rx_known[s] = true;
			if (c->rx_head[s] < c->rx_seq || c->rx_hlen[s] == 0 ||
			    c->rx_hlen[s] > QFT_CHAN_STRIPE_CHUNK)
				return -EBADMSG;
		}
	}
}

/*
 * Reads exactly n bytes of the stream: from rfd, or when striped from
 * the chunks in order.  *got as read_all's; a stream that ends between
 * chunks before the first byte is -EPIPE, inside one -EIO.
 */
static int stream_read(struct qft_chan *c, uint8_t *p, size_t n, size_t *got)
{
	if (!c->rx_striped)
		return read_all(c->rfd, p, n, got);
	*got = 0;
	while (*got < n) {
		size_t k, g;
		unsigned s = 0;
		int r;

		if (c->rx_left == 0) {
			r = rx_due(c, &s);
			if (r < 0)
				return r;
			c->rx_cur = s;
			c->rx_left = c->rx_hlen[s];
			c->rx_known[s] = false;
			c->rx_seq++;
			c->rx_chunks[s]++;
		}
		k = n - *got < c->rx_left ? n - *got : c->rx_left;
		r = read_all(stripe_rfd(c, c->rx_cur), p + *got, k, &g);
		*got += g;
		c->rx_left -= (uint32_t)g;
		if (r < 0)
			return r == -EPIPE ? -EIO : r;
	}
	return 0;
}

int qft_chan_rx_fds(struct qft_chan *c, int *fds, int max)
{
	int n = 0;

	if (!c->rx_striped || max < 1) {
		fds[0] = c->rfd;
		return 1;
	}
	if (c->rx_left) {
		fds[0] = stripe_rfd(c, c->rx_cur);
		return 1;
	}
	for (unsigned i = 0; i < c->nstripes; i++)
		if (c->rx_known[i] && c->rx_head[i] == c->rx_seq) {
			fds[0] = stripe_rfd(c, i);
			return 1;
		}
	for (unsigned i = 0; i < c->nstripes && n < max; i++)
		if (!c->rx_known[i])
			fds[n++] = stripe_rfd(c, i);
	if (n == 0)
		fds[n++] = c->rfd;     /* the receive reports the fault */
	return n;
}

int qft_chan_recv(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h)
{
	qbuf_reset(in);
	return c->rx ? recv_sealed(c, in, h) : recv_plain(c, in, h);
}
