/* SPDX-License-Identifier: MIT */
/*
 * A channel moves whole frames over a byte stream (a pipe, a socketpair, a
 * TCP socket).  It is the seam where the data plane's sealing (AEAD) and the
 * ssh tunnel slot in: callers see frames, never bytes.
 *
 * One thread may receive while any number send: qft_chan_send serialises
 * senders on `wlock` so frames never interleave.  Receiving is not locked;
 * only one thread may call qft_chan_recv on a channel.
 *
 * Error convention: 0 or a negative errno.  qft_chan_recv returns -EPIPE
 * on a clean end of stream at a frame boundary, -EBADMSG on a header that
 * fails qft_hdr_decode (too long) or, when sealed, on a record that fails
 * authentication (fatal: the connection must be torn down), -ENOSYS on an
 * unknown opcode, -EIO on a stream cut inside a frame, or the errno of the
 * failed read.
 */
#ifndef QFT_CHAN_H
#define QFT_CHAN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "msg.h"
#include "seal.h"

/* The limit a receive buffer needs: a sealed record of the largest frame. */
#define QFT_CHAN_RECV_LIMIT QFT_SEAL_MAX_RECORD

struct qft_chan {
	int rfd;
	int wfd;
	pthread_mutex_t wlock;   /* serialises writes to wfd */
	int werr;                /* guarded by wlock: sticky send error */
	/* Sealing, once the data plane is authenticated; NULL = plain frames.
	 * tx and sbuf are guarded by wlock (records must leave in counter
	 * order); rx belongs to the single receiver. */
	struct qft_seal *tx;
	struct qft_seal *rx;
	struct qbuf sbuf;
};

int qft_chan_init(struct qft_chan *c, int rfd, int wfd);
/*
 * From now on every frame is sealed with `tx` and every record opened
 * with `rx` (seal.h).  The channel borrows both; they must outlive it.
 * Call before any other thread uses the channel.
 */
void qft_chan_set_seal(struct qft_chan *c, struct qft_seal *tx,
		       struct qft_seal *rx);
/* Closes both descriptors (once, even if they are the same). */
void qft_chan_destroy(struct qft_chan *c);
/* Shuts the stream down so that a blocked receiver wakes with -EPIPE. */
void qft_chan_shutdown(struct qft_chan *c);

/* Writes all n bytes to a blocking fd, retrying on EINTR; 0 or -errno. */
int qft_write_all(int fd, const void *buf, size_t n);

/* Sends one encoded frame (as built by qft_msg_encode). */
int qft_chan_send(struct qft_chan *c, const void *frame, size_t len);
/* Encodes and sends *m, using `scratch` as the encoding buffer. */
int qft_chan_send_msg(struct qft_chan *c, struct qbuf *scratch,
		      const struct qft_msg *m);
/*
 * Receives one frame into `in` (replacing its contents; its limit must be
 * at least QFT_CHAN_RECV_LIMIT) and decodes its header into *h.  The payload is in->data[QFT_HDR_SIZE..in->len).
 */
int qft_chan_recv(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h);

#endif /* QFT_CHAN_H */
