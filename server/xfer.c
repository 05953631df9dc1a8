// SPDX-License-Identifier: MIT
/* READ and WRITE through the I/O engine (see xfer.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "buf.h"
#include "chan.h"
#include "errmap.h"
#include "log.h"
#include "ops.h"
#include "path.h"
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
 * Direct I/O (see srv_xfer_direct).  DIO_PAD is the alignment the data of
 * a frame is given in its pool buffer, the largest memory alignment
 * direct I/O may ask for that we honour; DIO_MIN the smallest transfer
 * worth it (below it the page cache copy costs less than a disk request
 * of its own).
 */
#define DIO_PAD 4096u
#define DIO_MIN (256u << 10)
/* The window of a READ stream whose cache state is probed at once. */
#define DIO_PROBE (32ull << 20)

/* cachestat(2), Linux 6.5; the same number on every architecture. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct xfer_cachestat_range {
	uint64_t off, len;
};
struct xfer_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted,
		 nr_recently_evicted;
};

/* --direct: set once by main() before any connection, then read only. */
static enum srv_direct direct_mode = SRV_DIRECT_AUTO;
/* No cachestat(2) here: reads stay buffered (written once, racily but
 * idempotently, by any connection's thread). */
static bool no_cachestat;
static bool said_no_dio;

void srv_xfer_direct(enum srv_direct mode)
{
	direct_mode = mode;
}

int srv_xfer_direct_parse(const char *name, enum srv_direct *mode)
{
	if (strcmp(name, "auto") == 0)
		*mode = SRV_DIRECT_AUTO;
	else if (strcmp(name, "off") == 0)
		*mode = SRV_DIRECT_OFF;
	else
		return -EINVAL;
	return 0;
}

/* The byte at which a WRITE frame's data starts, when it is the frame's
 * last field as checked here; 0 if not (no padding then). */
static size_t measure_write_head(void)
{
	uint8_t p[READ_HEAD_MAX];
	struct qbuf b = { .data = p, .len = 0, .cap = sizeof(p),
			  .limit = sizeof(p) };
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_WRITE, 0);
	if (qft_msg_encode(&b, &m) < 0 || b.len < QFT_HDR_SIZE + 4 ||
	    qft_load32(p) != b.len - QFT_HDR_SIZE ||
	    qft_load32(p + b.len - 4) != 0)
		return 0;
	return b.len;
}

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
	/* Room to move a frame's data to a DIO_PAD boundary. */
	cfg.buf_size = QFT_CHAN_RECV_LIMIT + DIO_PAD;
	memset(s->streams, 0, sizeof(s->streams));
	s->rx = NULL;
	s->read_head = measure_read_head();
	s->write_pad = 0;
	if (direct_mode != SRV_DIRECT_OFF) {
		size_t k = measure_write_head();

		if (k)
			s->write_pad = (DIO_PAD - k % DIO_PAD) % DIO_PAD;
	}
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
	uint64_t rd, wr;

	if (s->io) {
		srv_uring_direct_ops(s->io, &rd, &wr);
		qft_debug("direct I/O: %llu reads, %llu writes",
			  (unsigned long long)rd, (unsigned long long)wr);
	}
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

static bool first_time_xfer(bool *said)
{
	return !__atomic_exchange_n(said, true, __ATOMIC_RELAXED);
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
		uint8_t *frame = d->buf->data + DIO_PAD - s->read_head;

		encode_read_head(frame, s->read_head, d->tag,
				 (uint32_t)d->res);
		qft_debug("READ id %llu: ok", (unsigned long long)d->tag);
		/* READ replies are never kept (replay.h): it runs again. */
		r = s->link_dead ? 0 :
		    qft_chan_send(&s->chan, frame,
				  s->read_head + (size_t)d->res);
		if (r < 0 && s->replay) {
			srv_op_link_down(s);
			r = 0;
		}
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
		rep.data.p = d->buf->data + (s->read_head ? DIO_PAD : 0);
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
	/* A WRITE's data lands on a DIO_PAD boundary (direct I/O). */
	s->in.data = s->rx->data + s->write_pad;
	s->in.len = 0;
	s->in.cap = s->rx->cap - s->write_pad;
	s->in.limit = s->in.cap;
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

/*
 * Opens handle h's direct descriptor, once: the same open file again
 * through /proc/self/fd (the name may have changed or gone since OPEN),
 * with O_DIRECT and the same access mode, if statx says the file system
 * does direct I/O and with which alignment.  Nothing of this is an error:
 * without it the handle stays on the page cache.
 */
static void dio_open(struct srv_handle *h)
{
	char path[SRV_PROC_FD_MAX];
	struct statx stx;
	int fl;

	h->dio_tried = true;
	if (srv_path_proc_fd(path, h->fd) < 0)
		return;
	if (statx(h->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0 ||
	    !(stx.stx_mask & STATX_DIOALIGN) || !stx.stx_dio_mem_align ||
	    !stx.stx_dio_offset_align || stx.stx_dio_mem_align > DIO_PAD ||
	    (stx.stx_dio_mem_align & (stx.stx_dio_mem_align - 1)) ||
	    (stx.stx_dio_offset_align & (stx.stx_dio_offset_align - 1))) {
		qft_debug("direct I/O: not on this file system");
		return;
	}
	if ((fl = fcntl(h->fd, F_GETFL)) < 0)
		return;
	/* O_SYNC and O_DSYNC too: a direct write is not durable by itself. */
	h->dfd = open(path, (fl & (O_ACCMODE | O_SYNC | O_DSYNC)) |
		      O_DIRECT | O_CLOEXEC);
	if (h->dfd < 0) {
		/* A file created without the permission to open it again
		 * (creat(path, 0444)) is this file's business only. */
		if (errno == EACCES || errno == EPERM)
			qft_debug("direct I/O: %s: %s", path, strerror(errno));
		else if (first_time_xfer(&said_no_dio))
			qft_info("direct I/O unavailable (%s: %s): using the "
				 "page cache", path, strerror(errno));
		h->dfd = -1;
		return;
	}
	h->dio_mem_align = stx.stx_dio_mem_align;
	h->dio_off_align = stx.stx_dio_offset_align;
}

/*
 * Whether READs at `off` are to go direct: whether the window of
 * DIO_PROBE bytes from there (up to end of file) is mostly (3/4) not in
 * the page cache.  A direct read goes to the disk for data the cache has
 * (and writes back dirty pages first), a buffered one copies it.  Decided
 * per window, not per READ: each buffered READ has the kernel read ahead
 * of it (read_ahead_kb, even with POSIX_FADV_RANDOM), so the next READ's
 * range would always look cached; the window is much larger than that
 * read-ahead.
 */
static bool window_uncached(struct srv_handle *h, uint64_t off)
{
	struct xfer_cachestat_range cr = { .off = off, .len = DIO_PROBE };
	struct xfer_cachestat cs;
	struct stat st;

	if (__atomic_load_n(&no_cachestat, __ATOMIC_RELAXED) ||
	    fstat(h->fd, &st) < 0 || (uint64_t)st.st_size <= off)
		return false;
	if ((uint64_t)st.st_size - off < cr.len)
		cr.len = (uint64_t)st.st_size - off;
	if (syscall(__NR_cachestat, h->fd, &cr, &cs, 0) < 0) {
		if (errno == ENOSYS || errno == EPERM)
			__atomic_store_n(&no_cachestat, true,
					 __ATOMIC_RELAXED);
		return false;
	}
	return cs.nr_cache * (uint64_t)sysconf(_SC_PAGESIZE) <= cr.len / 4;
}

/* SRV_URING_DIRECT when a READ (rd) or WRITE of `len` bytes at `off`
 * to or from `mem` is to bypass h's page cache, else 0. */
static unsigned dio_flags(struct srv *s, struct srv_handle *h, bool rd,
			  uint64_t off, size_t len, const void *mem)
{
	struct srv_uring_dio dio;

	/*
	 * Reads go direct only on io_uring, which keeps several in flight:
	 * pread with O_DIRECT waits for the disk for every MiB, with no
	 * read-ahead to hide it (docs/benchmarks.md: cold downloads 25 %
	 * slower, more CPU per GB).
	 */
	if (direct_mode == SRV_DIRECT_OFF || len < DIO_MIN ||
	    (rd && srv_uring_backend(s->io) != SRV_IO_URING))
		return 0;
	/* A lazy handle's WRITEs stay in the page cache: nobody waits for
	 * them at close, and a direct write waits for the disk, so a
	 * commit=async copy onto a slow card would go at the card's pace. */
	if (!rd && h->lazy)
		return 0;
	if (!h->dio_tried)
		dio_open(h);
	if (h->dfd < 0)
		return 0;
	dio.mem_align = h->dio_mem_align;
	dio.off_align = h->dio_off_align;
	dio.min_len = DIO_MIN;
	if (!srv_uring_dio_fits(&dio, off, len, mem))
		return 0;
	if (rd && (off < h->dio_rd_from || off >= h->dio_rd_until)) {
		h->dio_rd = window_uncached(h, off);
		h->dio_rd_from = off;
		h->dio_rd_until = off + DIO_PROBE;
	}
	if (rd && !h->dio_rd)
		return 0;
	return SRV_URING_DIRECT;
}

int srv_xfer_submit(struct srv *s, const struct qft_msg *req)
{
	bool rd = req->op == QFT_OP_READ;
	struct srv_xfer_stream *xs;
	struct srv_uring_buf *buf;
	struct srv_handle *h;
	uint8_t *data;
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
	xs->st.dfd = h->dfd;
	if (rd) {
		/* The decoder bounds length and offset separately, not
		 * their sum; past 2^63-1 a file has nothing to read. */
		len = req->length;
		if (len > (uint64_t)INT64_MAX - req->offset)
			len = (uint64_t)INT64_MAX - req->offset;
		buf = srv_uring_buf_get(s->io);
		data = buf->data + (s->read_head ? DIO_PAD : 0);
		r = srv_uring_read_into(s->io, &xs->st, req->offset, data,
					(size_t)len, buf,
					dio_flags(s, h, true, req->offset,
						  (size_t)len, data),
					req->id);
		if (r < 0)
			srv_uring_buf_put(s->io, buf);
	} else {
		/* Even a failed write may have changed part of the file. */
		h->dirty = true;
		r = srv_uring_write_from(s->io, &xs->st, req->offset,
					 req->data.p, req->data.len, s->rx,
					 dio_flags(s, h, false, req->offset,
						   req->data.len, req->data.p),
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
