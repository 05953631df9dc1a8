// SPDX-License-Identifier: MIT
/* Frame transport over a byte stream (see chan.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "chan.h"

int qft_chan_init(struct qft_chan *c, int rfd, int wfd)
{
	int r;

	c->rfd = rfd;
	c->wfd = wfd;
	c->werr = 0;
	c->tx = NULL;
	c->rx = NULL;
	qbuf_init(&c->sbuf, QFT_SEAL_MAX_RECORD);
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

void qft_chan_destroy(struct qft_chan *c)
{
	if (c->rfd >= 0)
		close(c->rfd);
	if (c->wfd >= 0 && c->wfd != c->rfd)
		close(c->wfd);
	c->rfd = c->wfd = -1;
	qbuf_free(&c->sbuf);
	pthread_mutex_destroy(&c->wlock);
}

void qft_chan_shutdown(struct qft_chan *c)
{
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

/* Seals `frame` into c->sbuf and writes the record; under wlock. */
static int send_sealed(struct qft_chan *c, const void *frame, size_t len)
{
	uint8_t *rec;
	int r;

	if (len > QFT_SEAL_MAX_FRAME)
		return -EMSGSIZE;
	qbuf_reset(&c->sbuf);
	rec = qbuf_extend(&c->sbuf, QFT_SEAL_OVERHEAD + len);
	if (!rec)
		return -ENOMEM;
	memcpy(rec + QFT_SEAL_LEN_SIZE, frame, len);
	r = qft_seal_in_place(c->tx, rec, len);
	if (r < 0)
		return r;
	return qft_write_all(c->wfd, rec, c->sbuf.len);
}

int qft_chan_send(struct qft_chan *c, const void *frame, size_t len)
{
	int r;

	pthread_mutex_lock(&c->wlock);
	r = c->werr;
	if (r == 0) {
		if (c->tx)
			r = send_sealed(c, frame, len);
		else
			r = qft_write_all(c->wfd, frame, len);
		/* A partial frame desynchronises the stream: never retry. */
		if (r < 0)
			c->werr = r;
	}
	pthread_mutex_unlock(&c->wlock);
	return r;
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

/* Reads one record, opens it and leaves the frame at in->data[0..). */
static int recv_sealed(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h)
{
	size_t got, body, flen;
	uint8_t *p, *frame;
	int r;

	p = qbuf_extend(in, QFT_SEAL_LEN_SIZE);
	if (!p)
		return -ENOMEM;
	r = read_all(c->rfd, p, QFT_SEAL_LEN_SIZE, &got);
	if (r < 0)
		return r == -EPIPE && got ? -EIO : r;
	/* Bound the body before allocating anything the peer asked for. */
	r = qft_seal_body_len(p, &body);
	if (r < 0)
		return r;
	p = qbuf_extend(in, body);
	if (!p)
		return -ENOMEM;
	r = read_all(c->rfd, p, body, &got);
	if (r < 0)
		return r == -EPIPE ? -EIO : r;
	r = qft_open_record(c->rx, in->data, in->len, &frame, &flen);
	if (r < 0)
		return r;
	/* Callers find the frame at the start of the buffer, as when plain. */
	memmove(in->data, frame, flen);
	in->len = flen;
	r = qft_hdr_decode(h, in->data, flen);
	if (r < 0)
		return r;
	return flen - QFT_HDR_SIZE == h->len ? 0 : -EBADMSG;
}

int qft_chan_recv(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h)
{
	size_t got;
	uint8_t *p;
	int r;

	qbuf_reset(in);
	if (c->rx)
		return recv_sealed(c, in, h);
	p = qbuf_extend(in, QFT_HDR_SIZE);
	if (!p)
		return -ENOMEM;
	r = read_all(c->rfd, p, QFT_HDR_SIZE, &got);
	if (r < 0)
		return r == -EPIPE && got ? -EIO : r;
	/* Check the length before allocating anything the peer asked for. */
	r = qft_hdr_decode(h, in->data, QFT_HDR_SIZE);
	if (r < 0)
		return r;
	p = qbuf_extend(in, h->len);
	if (!p)
		return -ENOMEM;
	r = read_all(c->rfd, p, h->len, &got);
	if (r == -EPIPE)
		return -EIO;
	return r;
}
