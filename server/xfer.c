// SPDX-License-Identifier: MIT
/* READ and WRITE through the I/O engine (see xfer.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>

#include "buf.h"
#include "chan.h"
#include "errmap.h"
#include "log.h"
#include "ops.h"
#include "pulse.h"
#include "xfer.h"

/*
 * Write-out behind a stream (see writeout_behind): started every
 * WRITEOUT_CHUNK of sequential data, and waited for once WRITEOUT_LAG
 * behind the newest data, so at most that much of a stream is ever dirty
 * or in flight and close()'s fdatasync waits only for that tail.  The lag
 * keeps the disk queue full while the stream goes on; the chunk keeps the
 * calls few (one per 4 MiB).
 */
#define WRITEOUT_CHUNK (4ull << 20)
#define WRITEOUT_LAG   (32ull << 20)

/* Completions taken from the engine per call. */
#define REAP_BATCH SRV_XFER_BUFS
/* Room for the head of a READ reply frame; it is 24 bytes. */
#define READ_HEAD_MAX 64

/*
 * A successful READ reply is its head (frame header, status, the data
 * blob's length) followed by the data, which is the frame's last field.
 * The data is read into a pool buffer right behind room for that head,
 * so the frame is sent from where it lies instead of being copied into
 * s->out (a MiB per READ).  The head is encoded by qft_msg_encode(); only
 * the two lengths, the frame's (offset 0) and the blob's (the head's last
 * four bytes), are filled in once the read's size is known.
 */
static void encode_read_head(uint8_t *p, size_t head, uint64_t id,
			     uint32_t n)
{
	struct qbuf b = { .data = p, .len = 0, .cap = head, .limit = head };
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_READ, id);
	m.flags = QFT_F_REPLY;
	/* Cannot fail: the same message measured `head` at start. */
	(void)qft_msg_encode(&b, &m);
	qft_store32(p, (uint32_t)(head - QFT_HDR_SIZE) + n);
	qft_store32(p + head - 4, n);
}

/* The head's size, checked to have the layout above; 0 turns the
 * in-place replies off (they then go through s->out). */
static size_t measure_read_head(void)
{
	uint8_t p[READ_HEAD_MAX];
	struct qbuf b = { .data = p, .len = 0, .cap = sizeof(p),
			  .limit = sizeof(p) };
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_READ, 0);
	m.flags = QFT_F_REPLY;
	if (qft_msg_encode(&b, &m) < 0 || b.len < QFT_HDR_SIZE + 4 ||
	    qft_load32(p) != b.len - QFT_HDR_SIZE ||
	    qft_load32(p + b.len - 4) != 0)
		return 0;
	return b.len;
}

int srv_xfer_init(struct srv *s)
{
	struct srv_uring_cfg cfg;
	int r;

	srv_uring_cfg_default(&cfg);
	cfg.backend = s->io_backend;
	/* Every operation holds a buffer, so slots never run out first. */
	cfg.depth = SRV_XFER_BUFS;
	cfg.nbufs = SRV_XFER_BUFS;
	cfg.buf_size = QFT_CHAN_RECV_LIMIT;
	memset(s->streams, 0, sizeof(s->streams));
	s->rx = NULL;
	s->read_head = measure_read_head();
	r = srv_uring_init(&s->io, &cfg);
	if (r < 0) {
		s->io = NULL;
		if (s->io_backend == SRV_IO_URING)
			qft_err("io_uring is not available (%s); use "
				"--io=posix", strerror(-r));
		else
			qft_err("cannot set up file I/O: %s", strerror(-r));
		return r;
	}
	return 0;
}

void srv_xfer_destroy(struct srv *s)
{
	srv_uring_destroy(s->io);
	s->io = NULL;
	s->rx = NULL;
	/* `in` was a view of the pool: nothing of it to free. */
	memset(&s->in, 0, sizeof(s->in));
}

int srv_xfer_fd(const struct srv *s)
{
	return srv_uring_fd(s->io);
}

unsigned srv_xfer_pending(const struct srv *s)
{
	return srv_uring_outstanding(s->io);
}

/*
 * A WRITE of [off, off + len) of handle `h` completed: starts the
 * write-out of the sequential data behind it, and waits for what is more
 * than WRITEOUT_LAG behind, as the big file streams in.  Without it the
 * page cache keeps all of a file dirty until the FLUSH at close, whose
 * fdatasync then writes the whole file while the client waits (a minute
 * and a half for 1 GiB on a 10 MB/s card); with it the disk writes while
 * the data arrives and the stream runs at the pace of the slower of link
 * and disk.  The wait is the storage working, so it sends PROGRESS frames
 * like a sync.  Random writes restart the tracking and get none of this.
 *
 * sync_file_range() reports and clears write-back errors of the file
 * (errseq), which the FLUSH's fdatasync would then not see: such an error
 * is kept in h->err, which FLUSH reports.
 */
/* The wait of writeout_behind, for the pulse's worker (pulse.h). */
struct writeout_wait {
	int fd;
	uint64_t off, len;
};

static int writeout_wait_run(void *arg)
{
	const struct writeout_wait *w = arg;

	return sync_file_range(w->fd, (off_t)w->off, (off_t)w->len,
			       SYNC_FILE_RANGE_WAIT_BEFORE) < 0 ? -errno : 0;
}

static void writeout_behind(struct srv *s, struct srv_handle *h,
			    uint64_t id, uint64_t off, size_t len)
{
	uint64_t end = off + len, upto;
	int r = 0;

	/*
	 * Nobody waits at close for a lazy handle's data (QFT_O_LAZY), so
	 * the page cache takes it at the link's speed.  Not even the
	 * write-out is started: on a device with a real request queue the
	 * SYNC_FILE_RANGE_WRITE call itself blocks once the queue is full,
	 * which paced the stream all the same (200 MiB onto 10 MB/s: 15.7 s
	 * for the copy with it, 0.3 s without; docs/benchmarks.md).  The
	 * kernel writes the data out behind, and FLUSH or FSYNC sync it
	 * when asked.
	 */
	if (h->lazy)
		return;
	if (h->wb_off)
		return;
	if (off != h->wb_end) {
		h->wb_start = off;
		h->wb_waited = off;
	}
	h->wb_end = end;
	if (end - h->wb_start < WRITEOUT_CHUNK)
		return;
	if (sync_file_range(h->fd, (off_t)h->wb_start,
			    (off_t)(end - h->wb_start),
			    SYNC_FILE_RANGE_WRITE) < 0)
		r = -errno;
	h->wb_start = end;
	if (r == 0 && end - h->wb_waited > WRITEOUT_LAG) {
		struct writeout_wait w = { .fd = h->fd, .off = h->wb_waited };

		upto = end - WRITEOUT_LAG;
		w.len = upto - h->wb_waited;
		r = srv_pulse_run(s->pulse, id, writeout_wait_run, &w);
		h->wb_waited = upto;
	}
	if (r < 0) {
		/* Not for this file (ESPIPE, EINVAL on some file systems),
		 * or its disk failed: either way no more of it. */
		h->wb_off = true;
		if (r != -ESPIPE && r != -EINVAL && r != -EOPNOTSUPP &&
		    r != -ENOSYS && h->err == 0)
			h->err = r;
		qft_debug("write-out behind the stream: off for this file: %s",
			  strerror(-r));
	}
}

/* Builds and sends the reply of one completed operation. */
static int complete(struct srv *s, const struct srv_uring_done *d)
{
	const struct srv_xfer_stream *xs =
		(const void *)((const char *)d->st -
			       offsetof(struct srv_xfer_stream, st));
	bool rd = d->kind == SRV_URING_READ;
	struct srv_handle *h;
	struct qft_msg rep;
	int r;

	if (rd && d->res >= 0 && s->read_head) {
		uint8_t *frame = d->buf->data;

		encode_read_head(frame, s->read_head, d->tag,
				 (uint32_t)d->res);
		qft_debug("READ id %llu: ok", (unsigned long long)d->tag);
		r = qft_chan_send(&s->chan, frame,
				  s->read_head + (size_t)d->res);
		if (r < 0)
			qft_err("closing connection: cannot send reply: %s",
				strerror(-r));
		srv_uring_buf_put(s->io, d->buf);
		return r;
	}
	qft_msg_init(&rep, rd ? QFT_OP_READ : QFT_OP_WRITE, d->tag);
	rep.flags = QFT_F_REPLY;
	if (d->res < 0) {
		rep.status = qft_status_from_errno((int)-d->res);
		/* Kept for FLUSH too, so close() fails even when the client
		 * let this reply go by (write-behind).  A handle cannot
		 * close while it has operations here. */
		if (!rd && srv_handle_get(&s->handles, xs->handle, SRV_H_FILE,
					  &h) == 0 && h->err == 0)
			h->err = (int)d->res;
	} else if (rd) {
		rep.data.p = d->buf->data + s->read_head;
		rep.data.len = (uint32_t)d->res;
	} else {
		rep.count = (uint64_t)d->res;
		if (srv_handle_get(&s->handles, xs->handle, SRV_H_FILE,
				   &h) == 0)
			writeout_behind(s, h, d->tag, d->off, d->len);
	}
	qft_debug("%s id %llu: %s", qft_op_name(rep.op),
		  (unsigned long long)d->tag,
		  d->res < 0 ? strerror((int)-d->res) : "ok");
	r = srv_op_reply(s, &rep);
	srv_uring_buf_put(s->io, d->buf);
	return r;
}

int srv_xfer_reap(struct srv *s, bool wait)
{
	struct srv_uring_done done[REAP_BATCH];
	int n, r;

	n = srv_uring_reap(s->io, done, REAP_BATCH, wait);
	if (n < 0) {
		qft_err("closing connection: the io_uring ring failed: %s",
			strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		if ((r = complete(s, &done[i])) < 0) {
			/* Closing: the rest only needs its buffers back. */
			while (++i < n)
				srv_uring_buf_put(s->io, done[i].buf);
			return r;
		}
	}
	return n;
}

int srv_xfer_drain(struct srv *s)
{
	int r;

	while (srv_uring_outstanding(s->io)) {
		r = srv_xfer_reap(s, true);
		if (r < 0)
			return r;
		if (r == 0) {
			/* Nothing in the kernel, yet not done: a bug, and
			 * waiting would be forever. */
			qft_err("closing connection: file I/O stalled with %u "
				"operations pending",
				srv_uring_outstanding(s->io));
			return -EIO;
		}
	}
	return 0;
}

int srv_xfer_rx(struct srv *s)
{
	int r;

	while (!s->rx) {
		s->rx = srv_uring_buf_get(s->io);
		if (s->rx)
			break;
		/* The pool is empty: the backpressure on the client. */
		if ((r = srv_xfer_reap(s, true)) < 0)
			return r;
		if (r == 0 && !srv_uring_outstanding(s->io)) {
			qft_err("closing connection: no receive buffer free");
			return -ENOBUFS;
		}
	}
	/* A qbuf whose limit is its capacity never reallocates: the channel
	 * fills the pool buffer in place. */
	s->in.data = s->rx->data;
	s->in.len = 0;
	s->in.cap = s->rx->cap;
	s->in.limit = s->rx->cap;
	return 0;
}

/* Whether another handle of the file behind `h` has operations queued. */
static bool other_handle_busy(struct srv *s, uint64_t num,
			      const struct srv_handle *h)
{
	for (unsigned i = 0; i < SRV_XFER_BUFS; i++) {
		struct srv_xfer_stream *xs = &s->streams[i];
		struct srv_handle *o;

		if (srv_uring_stream_idle(&xs->st) || xs->handle == num)
			continue;
		if (srv_handle_get(&s->handles, xs->handle, SRV_H_FILE,
				   &o) == 0 && o->dev == h->dev &&
		    o->ino == h->ino)
			return true;
	}
	return false;
}

/* The stream of handle `num`; there is always an idle one to take,
 * because busy streams never outnumber the buffers out. */
static struct srv_xfer_stream *stream_of(struct srv *s, uint64_t num, int fd)
{
	struct srv_xfer_stream *idle = NULL;

	for (unsigned i = 0; i < SRV_XFER_BUFS; i++) {
		struct srv_xfer_stream *xs = &s->streams[i];

		if (xs->handle == num && !srv_uring_stream_idle(&xs->st))
			return xs;
		if (!idle && srv_uring_stream_idle(&xs->st))
			idle = xs;
	}
	if (idle) {
		/* The number may have been closed and reopened since. */
		idle->handle = num;
		srv_uring_stream_init(&idle->st, fd);
	}
	return idle;
}

int srv_xfer_submit(struct srv *s, const struct qft_msg *req)
{
	bool rd = req->op == QFT_OP_READ;
	struct srv_xfer_stream *xs;
	struct srv_uring_buf *buf;
	struct srv_handle *h;
	uint64_t len;
	int r;

	if (!rd && req->op != QFT_OP_WRITE)
		return 0;
	/* Errors (EBADF), devices and appends take the plain path. */
	if (srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h) < 0 ||
	    !h->regular || h->append || (!rd && req->data.len == 0))
		return 0;
	if (other_handle_busy(s, req->handle, h) &&
	    (r = srv_xfer_drain(s)) < 0)
		return r;
	/* Reaping never opens or closes a handle, so `h` stays valid. */
	while (srv_uring_outstanding(s->io) >= SRV_XFER_BUFS ||
	       (rd && srv_uring_bufs_free(s->io) == 0)) {
		if (!srv_uring_outstanding(s->io)) {
			qft_err("closing connection: no I/O buffer free");
			return -ENOBUFS;
		}
		if ((r = srv_xfer_reap(s, true)) < 0)
			return r;
	}
	xs = stream_of(s, req->handle, h->fd);
	if (!xs) {
		qft_err("closing connection: no I/O stream free");
		return -ENOBUFS;
	}
	if (rd) {
		/* The decoder bounds length and offset separately, not
		 * their sum; past 2^63-1 a file has nothing to read. */
		len = req->length;
		if (len > (uint64_t)INT64_MAX - req->offset)
			len = (uint64_t)INT64_MAX - req->offset;
		buf = srv_uring_buf_get(s->io);
		r = srv_uring_read_into(s->io, &xs->st, req->offset,
					buf->data + s->read_head, (size_t)len,
					buf, req->id);
		if (r < 0)
			srv_uring_buf_put(s->io, buf);
	} else {
		/* Even a failed write may have changed part of the file. */
		h->dirty = true;
		r = srv_uring_write_from(s->io, &xs->st, req->offset,
					 req->data.p, req->data.len, s->rx,
					 req->id);
		if (r == 0) {
			/* The frame's buffer now belongs to the write. */
			s->rx = NULL;
			memset(&s->in, 0, sizeof(s->in));
		}
	}
	if (r < 0) {
		qft_err("closing connection: cannot queue %s id %llu: %s",
			qft_op_name(req->op), (unsigned long long)req->id,
			strerror(-r));
		return r;
	}
	return 1;
}
