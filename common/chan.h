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
 * Compression (QFT_F_LZ4, lz4chunk.h) also happens here, once both ends
 * agreed on it in HELLO (qft_chan_set_lz4): a sender's frame whose payload
 * is at least QFT_CHAN_LZ4_MIN bytes is compressed, before sealing, when
 * that pays, and goes as it is otherwise; a receiver expands a compressed
 * frame, after opening its record, before handing it on.  Callers only
 * ever see ordinary frames.
 *
 * Copies.  A frame may be sent as pieces (qft_chan_sendv: a head and the
 * data where it lies); records are sealed from the pieces into one reused
 * record buffer, or, in clear and unsealed, written from them with
 * writev.  A received record's body is read straight into the caller's
 * buffer and opened there.  docs/architecture.md, "The data path".
 *
 * Striping (docs/architecture.md, "Striping").  A stream may also run
 * over more sockets, its stripes, so that one lossy TCP connection's
 * window does not bound it: qft_chan_stripes_add gives the channel the
 * extra sockets, and each side turns its own direction over with the
 * frame that announces it -- qft_chan_send_switch sends that frame the
 * old way and every later one striped; the receiver calls
 * qft_chan_recv_switch once it has read the peer's announcing frame.
 * Striped, the stream's bytes go in chunks of at most
 * QFT_CHAN_STRIPE_CHUNK, each on one stripe (the one with the fewest
 * bytes not yet sent, among the first `use`) behind its number and
 * length; the receiver reads the chunks in number order, so the bytes
 * come out as one stream and records are read and opened as ever.
 * Chunks, not whole records, so that a slow stripe holds up a chunk's
 * worth and the sender never waits for one while others are idle.  Any
 * stripe failing fails the channel.
 *
 * Error convention: 0 or a negative errno.  qft_chan_sendv returns
 * -EINVAL, sending nothing, for pieces that do not make a frame (see
 * there); a failed write is sticky.  qft_chan_recv returns -EPIPE
 * on a clean end of stream at a frame boundary, -EBADMSG on a header that
 * fails qft_hdr_decode (too long), when sealed on a record that fails
 * authentication, and on a compressed frame that was not agreed on or does
 * not expand to at most QFT_MAX_PAYLOAD bytes (all fatal: the connection
 * must be torn down; the channel logs the compression failures itself),
 * -ENOSYS on an unknown opcode, -EIO on a stream cut inside a frame, or
 * the errno of the failed read.
 */
#ifndef QFT_CHAN_H
#define QFT_CHAN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "buf.h"
#include "lz4chunk.h"
#include "msg.h"
#include "seal.h"

/* The limit a receive buffer needs: a sealed record of the largest frame. */
#define QFT_CHAN_RECV_LIMIT QFT_SEAL_MAX_RECORD

/*
 * Smaller payloads are never compressed: metadata gains a few bytes at
 * best, and a READ reply or a WRITE of a page or more is where the bytes
 * are.
 */
#define QFT_CHAN_LZ4_MIN 4096u
/*
 * compress=auto backs off for this many frames (lz4chunk.h: reprobe) after
 * a run of incompressible ones, rather than lz4chunk's default of 16.  The
 * policy of a channel serves every file in flight, so a long back-off
 * after an archive would leave as many MiB of the next text file
 * uncompressed; and backing off saves little, because the samples that
 * reject noise are cheap (measured per MiB: 7 us of samples, 45 us for a
 * whole attempt on noise, 1.5 ms to compress text).
 */
#define QFT_CHAN_LZ4_REPROBE 4u

/* Sockets of one striped stream, the channel's own included. */
#define QFT_CHAN_MAX_STRIPES 8u
/* A striped chunk: u64 number, u32 length (1 .. QFT_CHAN_STRIPE_CHUNK),
 * the bytes. */
#define QFT_CHAN_STRIPE_HDR 12u
#define QFT_CHAN_STRIPE_CHUNK 65536u

/*
 * Growing the stripes sent on (qft_chan_tx_grow): a verdict every
 * QFT_CHAN_LOSS_PROBE_MS while sending, once at least QFT_CHAN_LOSS_SEGS
 * segments went out since the last; a verdict sees loss when at least
 * QFT_CHAN_LOSS_PPM of them were sent again; QFT_CHAN_LOSS_VERDICTS such
 * verdicts in a row grow the stripes.  In a row, because a link that
 * loses at random loses all the time, while the losses a sender makes
 * itself, filling a bottleneck's queue, come in bursts between long
 * clean stretches -- and more stripes would not help those.
 */
/* A sender whose stripes may grow starts on this many. */
#define QFT_CHAN_STRIPES_START 4u
#define QFT_CHAN_LOSS_PROBE_MS 200u
#define QFT_CHAN_LOSS_SEGS 300u
#define QFT_CHAN_LOSS_PPM 1000u
#define QFT_CHAN_LOSS_VERDICTS 3u

/* Loss seen on a sender's connections: fed the sums of their segments
 * sent and sent again (TCP_INFO). */
struct qft_chan_loss {
	bool primed;             /* segs and resent hold a sample */
	uint64_t segs, resent;   /* the sums at the last verdict */
	unsigned lossy;          /* verdicts in a row that saw loss */
};

/*
 * One sample of the sums: true when the stripes should grow, which is
 * also the last verdict's (the counts start again after it).  Pure, for
 * the unit tests.
 */
bool qft_chan_loss_step(struct qft_chan_loss *g, uint64_t segs,
			uint64_t resent);

/* What compression did on one channel (payload bytes, headers excluded). */
struct qft_chan_lz4_stats {
	uint64_t tx_bytes;    /* payload bytes of the frames sent */
	uint64_t tx_wire;     /* ... as they went out (compressed or not) */
	uint64_t tx_frames;   /* frames sent */
	uint64_t tx_lz4;      /* ... of which compressed */
	uint64_t rx_bytes;    /* payload bytes of the frames received */
	uint64_t rx_wire;     /* ... as they came in */
	uint64_t rx_frames;
	uint64_t rx_lz4;
};

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
	/* The frame or record being sent when it is not the caller's frame
	 * as it is (sealed, compressed); wlock. */
	struct qbuf sbuf;
	/* A payload split over several pieces, gathered for lz4; wlock. */
	struct qbuf gbuf;
	/* Compression: txz (mode QFT_LZ4_NONE = send every frame as it is)
	 * and the tx counts are guarded by wlock; rx_lz4, zbuf (a compressed
	 * payload being expanded) and the rx counts belong to the receiver. */
	struct qft_lz4_policy txz;
	bool rx_lz4;             /* QFT_F_LZ4 frames are accepted */
	bool lz4_on;             /* set_lz4 was called: log the counts */
	struct qbuf zbuf;
	struct qft_chan_lz4_stats st;

	/* Striping: stripe i > 0 is sfd[i], stripe 0 the channel's own
	 * descriptors.  nstripes (1: none) and sfd are set under wlock
	 * before either switch and then fixed; the tx fields are wlock's,
	 * the rx fields the receiver's. */
	unsigned nstripes;
	int sfd[QFT_CHAN_MAX_STRIPES];
	bool tx_striped;
	unsigned tx_use;         /* stripes sent on: the first tx_use */
	unsigned tx_max;         /* ... and the most it may grow to */
	int64_t tx_probe_ns;     /* when loss is looked at next */
	struct qft_chan_loss tx_loss;
	unsigned tx_next;        /* where the search for one starts */
	uint64_t tx_seq;         /* the next chunk's number */
	uint64_t tx_chunks[QFT_CHAN_MAX_STRIPES]; /* sent on each */
	bool rx_striped;
	uint64_t rx_seq;         /* the number of the chunk due */
	unsigned rx_cur;         /* the stripe of the chunk being read */
	uint32_t rx_left;        /* its bytes not read yet */
	bool rx_known[QFT_CHAN_MAX_STRIPES]; /* its next header was read */
	uint64_t rx_head[QFT_CHAN_MAX_STRIPES]; /* its next chunk's number */
	uint32_t rx_hlen[QFT_CHAN_MAX_STRIPES]; /* ... and length */
	uint64_t rx_chunks[QFT_CHAN_MAX_STRIPES]; /* read from each */
};

int qft_chan_init(struct qft_chan *c, int rfd, int wfd);
/*
 * From now on every frame is sealed with `tx` and every record opened
 * with `rx` (seal.h).  The channel borrows both; they must outlive it.
 * Call before any other thread uses the channel.
 */
void qft_chan_set_seal(struct qft_chan *c, struct qft_seal *tx,
		       struct qft_seal *rx);
/*
 * Turns compression on, once HELLO agreed on QFT_FEAT_LZ4: from now on
 * QFT_F_LZ4 frames are accepted, and frames are sent compressed by
 * `mode`'s policy (QFT_LZ4_ALWAYS or QFT_LZ4_AUTO; QFT_LZ4_NONE only
 * receives).  Call it between two receives, from the receiving thread or
 * before the receiver starts; no frame sent before it is compressed.
 */
void qft_chan_set_lz4(struct qft_chan *c, enum qft_lz4_mode mode);
/*
 * HELLO negotiation (QFT_FEAT_LZ4*, protocol.h), one function per step so
 * that both programs agree by construction:
 *   client: features = qft_chan_lz4_offer(mode) in its HELLO;
 *   server: reply features = qft_chan_lz4_accept(chan, asked, allow),
 *           which turns compression on for the server's channel;
 *   client: qft_chan_lz4_agreed(chan, mode, replied) on the reply, which
 *           turns it on for the client's channel when the server accepted.
 * Unknown bits are ignored at every step.  accept and agreed return the
 * mode now in force for sending (QFT_LZ4_NONE when compression is off);
 * agreed logs one line when the server refused what was asked.
 */
uint32_t qft_chan_lz4_offer(enum qft_lz4_mode mode);
enum qft_lz4_mode qft_chan_lz4_accept(struct qft_chan *c, uint32_t asked,
				      bool allow, uint32_t *reply);
enum qft_lz4_mode qft_chan_lz4_agreed(struct qft_chan *c,
				      enum qft_lz4_mode mode,
				      uint32_t replied);
/*
 * Copies the counts.  The rx half is exact only from the receiving thread
 * or once it has stopped.
 */
void qft_chan_lz4_stats(struct qft_chan *c, struct qft_chan_lz4_stats *st);
/*
 * Closes both descriptors (once, even if they are the same).  When
 * compression was on, logs one line with what it saved.
 */
void qft_chan_destroy(struct qft_chan *c);
/* Shuts the stream down so that a blocked receiver wakes with -EPIPE. */
void qft_chan_shutdown(struct qft_chan *c);

/*
 * Striping (see above).  stripes_add hands the channel n more sockets
 * (it closes them with its own), 1 <= n < QFT_CHAN_MAX_STRIPES, once:
 * -EINVAL otherwise, taking none.  send_switch sends `frame` as any
 * frame and then turns sending over to striping, on the first `use`
 * stripes (1 .. stripes; 1 keeps the data on the channel's own socket
 * but numbered); recv_switch turns receiving over, from the receiving
 * thread.  stripes() says how many sockets the stream has (1: not
 * striped), tx_use() how many of them this side sends on now, rx_used()
 * how many of them chunks came in on.
 */
int qft_chan_stripes_add(struct qft_chan *c, const int *fds, unsigned n);
int qft_chan_send_switch(struct qft_chan *c, const void *frame, size_t len,
			 unsigned use);
void qft_chan_recv_switch(struct qft_chan *c);
/*
 * After send_switch: the stripes sent on may grow to `max` (at most
 * stripes()) once the ones in use lose packets (QFT_CHAN_LOSS_*, judged
 * from TCP_INFO while sending): all of them at once, logged, for good.
 * max at or below the use sent with keeps the use fixed.
 */
void qft_chan_tx_grow(struct qft_chan *c, unsigned max);
/*
 * Each side's choice for what it sends over `conns` stripes: the use to
 * switch with and the most it may grow to.  All of them when the user
 * asked for the stripes (`all`); one when the sender has bbr (`bbr`),
 * which keeps one connection's rate under loss; else
 * QFT_CHAN_STRIPES_START at first, and all once those lose packets.
 */
void qft_chan_stripes_choose(unsigned conns, bool all, bool bbr,
			     unsigned *use, unsigned *max);
unsigned qft_chan_stripes(struct qft_chan *c);
/* Closes the stripes and turns striping off both ways, for a channel
 * moved to a new socket (a resumed lane); receiving thread. */
void qft_chan_stripes_drop(struct qft_chan *c);
/* Shuts the sending side of every socket of the stream: the peer reads
 * the end of it.  wlock held. */
void qft_chan_end_locked(struct qft_chan *c);
unsigned qft_chan_tx_use(struct qft_chan *c);
/* Receiving thread, or once it stopped (else a moment late). */
unsigned qft_chan_rx_used(const struct qft_chan *c);
/*
 * The descriptors a receiver waiting for the next frame should poll: the
 * channel's own, or when striped the stripe of the chunk being read or
 * known to hold the next one, else every stripe whose next chunk is not
 * known yet.  Fills
 * fds[0..max) and returns how many (at least 1).  Receiving thread only.
 */
int qft_chan_rx_fds(struct qft_chan *c, int *fds, int max);

/* Writes all n bytes to a blocking fd, retrying on EINTR; 0 or -errno. */
int qft_write_all(int fd, const void *buf, size_t n);

/* Sends one encoded frame (as built by qft_msg_encode). */
int qft_chan_send(struct qft_chan *c, const void *frame, size_t len);
/*
 * Sends the frame that is the concatenation of iov[0..n), 1 <= n <=
 * QFT_CHAN_MAX_IOV, of which iov[0] holds at least the frame header
 * (whose length must be what follows it: -EINVAL otherwise), so that a
 * frame's head and its data need not be gathered first
 * (qft_msg_encode_head).  Nothing is copied on the way unless the frame
 * is compressed or encrypted: an encrypted record is sealed from the
 * pieces into the channel's one record buffer; plain frames and records
 * in clear (cipher none) go out with writev.  The pieces may be reused
 * once it returns.
 */
#define QFT_CHAN_MAX_IOV 4
int qft_chan_sendv(struct qft_chan *c, const struct iovec *iov, int n);
/* Encodes and sends *m, using `scratch` as the encoding buffer. */
int qft_chan_send_msg(struct qft_chan *c, struct qbuf *scratch,
		      const struct qft_msg *m);
/*
 * Receives one frame into `in` (replacing its contents; its limit must be
 * at least QFT_CHAN_RECV_LIMIT) and decodes its header into *h.  The payload is in->data[QFT_HDR_SIZE..in->len).
 */
int qft_chan_recv(struct qft_chan *c, struct qbuf *in, struct qft_hdr *h);

#endif /* QFT_CHAN_H */
