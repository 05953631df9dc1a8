// SPDX-License-Identifier: MIT
/* Frame transport over a byte stream (see chan.h). */
#include <errno.h>
#include <unistd.h>
#include <sys/socket.h>

#include "chan.h"

int qft_chan_init(struct qft_chan *c, int rfd, int wfd)
{
	int r;

	c->rfd = rfd;
	c->wfd = wfd;
	c->werr = 0;
	r = pthread_mutex_init(&c->wlock, NULL);
	return -r;
}

void qft_chan_destroy(struct qft_chan *c)
{
	if (c->rfd >= 0)
		close(c->rfd);
	if (c->wfd >= 0 && c->wfd != c->rfd)
		close(c->wfd);
	c->rfd = c->wfd = -1;
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

static int write_all(int fd, const uint8_t *p, size_t n)
{
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

int qft_chan_send(struct qft_chan *c, const void *frame, size_t len)
{
	int r;

	pthread_mutex_lock(&c->wlock);
	r = c->werr;
	if (r == 0) {
		r = write_all(c->wfd, frame, len);
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

int qft_chan_recv(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h)
{
	size_t got;
	uint8_t *p;
	int r;

	qbuf_reset(in);
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
