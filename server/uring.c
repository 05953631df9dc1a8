// SPDX-License-Identifier: MIT
/*
 * File I/O engine over io_uring, or over pread/pwrite (see uring.h).
 *
 * Each operation lives in one of a fixed array of `depth` slots and moves
 * through the states below; a slot is free again only once its completion
 * has been reaped, which is what bounds both the ring and the memory.
 *
 *   WAITING   queued on its stream, not started: an earlier operation of
 *             the stream that it must not overtake is still in flight
 *   INFLIGHT  an SQE for it is in the ring (uring backend only)
 *   COMPLETE  finished, still on its stream's queue behind an earlier
 *             operation that has not finished
 *   then on the reap queue, in completion order across streams and in
 *   submission order within each, until srv_uring_reap() hands it out.
 *
 * The posix backend goes through the same states, running each operation
 * synchronously when it would be started, so its ordering is trivially
 * the submission order and the two backends share every other line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <liburing.h>

#include "io.h"
#include "log.h"
#include "protocol.h"
#include "uring.h"

enum op_state { OP_FREE, OP_WAITING, OP_INFLIGHT, OP_COMPLETE };
enum buf_owner { BUF_POOL, BUF_CALLER, BUF_ENGINE };

/* One buffer may not exceed what a single read/write SQE can move. */
#define MAX_BUF_SIZE (1u << 30)

struct srv_uring_op {
	struct srv_uring_stream *st;
	struct srv_uring_buf *buf;    /* READ/WRITE */
	uint8_t *data;                /* READ/WRITE: inside buf */
	struct srv_uring_op *next;    /* stream queue, reap queue, free list */
	uint64_t tag;
	uint64_t off;
	size_t len;
	size_t done;                  /* bytes moved so far (uring) */
	int64_t res;                  /* once COMPLETE */
	enum srv_uring_kind kind;
	enum op_state state;
	bool datasync;
	bool direct;                  /* READ/WRITE through st->dfd */
};

struct srv_uring {
	enum srv_io_backend backend;
	struct io_uring ring;         /* backend == SRV_IO_URING */
	int evfd;
	bool evfd_set;                /* we signalled it; not read since */
	int broken;                   /* the ring failed: -errno, sticky */
	unsigned depth;
	unsigned outstanding;         /* slots not free */
	unsigned in_kernel;           /* slots INFLIGHT */
	struct srv_uring_op *ops;     /* depth slots */
	struct srv_uring_op *free_ops;
	struct srv_uring_op *reap_head, *reap_tail;
	struct srv_uring_buf *bufs;   /* nbufs */
	struct srv_uring_buf *free_bufs;
	unsigned nbufs;
	unsigned nfree;
	uint64_t direct_rd, direct_wr; /* done through a direct descriptor */
	uint8_t *mem;                 /* nbufs * buf_size, page-aligned */
};

static const char *const backend_names[] = {
	[SRV_IO_AUTO] = "auto",
	[SRV_IO_URING] = "uring",
	[SRV_IO_POSIX] = "posix",
};

void srv_uring_cfg_default(struct srv_uring_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->backend = SRV_IO_AUTO;
	cfg->depth = SRV_URING_DEFAULT_DEPTH;
	cfg->nbufs = SRV_URING_DEFAULT_NBUFS;
	cfg->buf_size = QFT_MAX_DATA;
}

int srv_uring_backend_parse(const char *name, enum srv_io_backend *b)
{
	for (size_t i = 0; i < sizeof(backend_names) / sizeof(backend_names[0]);
	     i++) {
		if (strcmp(name, backend_names[i]) == 0) {
			*b = (enum srv_io_backend)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *srv_uring_backend_name(enum srv_io_backend b)
{
	if ((size_t)b >= sizeof(backend_names) / sizeof(backend_names[0]))
		return "?";
	return backend_names[b];
}

/* True the first time only: a message logged once per process, however
 * many connections (engines) there are. */
static bool first_time(bool *said)
{
	return !__atomic_exchange_n(said, true, __ATOMIC_RELAXED);
}

/*
 * Sets up the ring.  A ring that lacks the READ, WRITE or FSYNC opcodes
 * (kernels before 5.6) counts as unavailable, like a refused one.
 */
static int ring_setup(struct srv_uring *e, const struct srv_uring_cfg *cfg)
{
	int (*init)(unsigned, struct io_uring *, unsigned) =
		cfg->ring_init ? cfg->ring_init : io_uring_queue_init;
	struct io_uring_probe *probe;
	int r;

	r = init(e->depth, &e->ring, 0);
	if (r < 0)
		return r;
	probe = io_uring_get_probe_ring(&e->ring);
	if (!probe || !io_uring_opcode_supported(probe, IORING_OP_READ) ||
	    !io_uring_opcode_supported(probe, IORING_OP_WRITE) ||
	    !io_uring_opcode_supported(probe, IORING_OP_FSYNC)) {
		r = -EOPNOTSUPP;
		goto out_free_probe;
	}
	io_uring_free_probe(probe);
	r = io_uring_register_eventfd(&e->ring, e->evfd);
	if (r < 0)
		goto out_exit_ring;
	return 0;
out_free_probe:
	if (probe)
		io_uring_free_probe(probe);
out_exit_ring:
	io_uring_queue_exit(&e->ring);
	return r;
}

static int pool_setup(struct srv_uring *e, unsigned nbufs, size_t size)
{
	/* Every buffer page-aligned, so that O_DIRECT stays possible later. */
	size_t stride = (size + 4095) & ~(size_t)4095;
	void *mem;
	int r;

	e->bufs = calloc(nbufs, sizeof(*e->bufs));
	if (!e->bufs)
		return -ENOMEM;
	r = posix_memalign(&mem, 4096, (size_t)nbufs * stride);
	if (r)
		return -r;
	e->mem = mem;
	e->nbufs = nbufs;
	for (unsigned i = nbufs; i-- > 0;) {
		struct srv_uring_buf *b = &e->bufs[i];

		b->data = e->mem + (size_t)i * stride;
		b->cap = size;
		b->owner = BUF_POOL;
		b->next_free = e->free_bufs;
		e->free_bufs = b;
	}
	e->nfree = nbufs;
	return 0;
}

int srv_uring_init(struct srv_uring **ep, const struct srv_uring_cfg *cfg)
{
	enum srv_io_backend want = cfg->backend;
	static bool said;
	struct srv_uring *e;
	int r;

	if (cfg->depth == 0 || cfg->depth > SRV_URING_MAX_DEPTH ||
	    cfg->nbufs == 0 || cfg->nbufs > SRV_URING_MAX_NBUFS ||
	    cfg->buf_size == 0 || cfg->buf_size > MAX_BUF_SIZE ||
	    (size_t)cfg->backend >= sizeof(backend_names) /
				    sizeof(backend_names[0]))
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->evfd = -1;
	e->depth = cfg->depth;
	e->backend = SRV_IO_POSIX;
	e->ops = calloc(cfg->depth, sizeof(*e->ops));
	if (!e->ops) {
		r = -ENOMEM;
		goto out_destroy;
	}
	for (unsigned i = cfg->depth; i-- > 0;) {
		e->ops[i].next = e->free_ops;
		e->free_ops = &e->ops[i];
	}
	if ((r = pool_setup(e, cfg->nbufs, cfg->buf_size)) < 0)
		goto out_destroy;
	e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->evfd < 0) {
		r = -errno;
		goto out_destroy;
	}
	if (want != SRV_IO_POSIX) {
		r = ring_setup(e, cfg);
		if (r == 0) {
			e->backend = SRV_IO_URING;
		} else if (want == SRV_IO_URING) {
			goto out_destroy;
		} else if (first_time(&said)) {
			/* Containers and kernel.io_uring_disabled refuse
			 * io_uring with EPERM, old or trimmed kernels with
			 * ENOSYS: the data still flows, only slower. */
			qft_warn("io_uring unavailable (%s%s): using "
				 "pread/pwrite", strerror(-r),
				 r == -EPERM ? ": kernel.io_uring_disabled or "
				 "a seccomp policy" : "");
		}
	}
	qft_debug("file I/O: %s, depth %u, %u buffers of %zu bytes",
		  e->backend == SRV_IO_URING ? "io_uring" : "pread/pwrite",
		  e->depth, e->nbufs, cfg->buf_size);
	*ep = e;
	return 0;
out_destroy:
	srv_uring_destroy(e);
	return r;
}

enum srv_io_backend srv_uring_backend(const struct srv_uring *e)
{
	return e->backend;
}

int srv_uring_fd(const struct srv_uring *e)
{
	return e->evfd;
}

void srv_uring_direct_ops(const struct srv_uring *e, uint64_t *rd,
			  uint64_t *wr)
{
	*rd = e->direct_rd;
	*wr = e->direct_wr;
}

unsigned srv_uring_outstanding(const struct srv_uring *e)
{
	return e->outstanding;
}

struct srv_uring_buf *srv_uring_buf_get(struct srv_uring *e)
{
	struct srv_uring_buf *b = e->free_bufs;

	if (!b)
		return NULL;
	e->free_bufs = b->next_free;
	e->nfree--;
	b->next_free = NULL;
	b->owner = BUF_CALLER;
	return b;
}

static bool buf_ours(const struct srv_uring *e, const struct srv_uring_buf *b)
{
	return b && b >= e->bufs && b < e->bufs + e->nbufs;
}

void srv_uring_buf_put(struct srv_uring *e, struct srv_uring_buf *b)
{
	/* A buffer in flight or already free would corrupt the list. */
	if (!buf_ours(e, b) || b->owner != BUF_CALLER)
		return;
	b->owner = BUF_POOL;
	b->next_free = e->free_bufs;
	e->free_bufs = b;
	e->nfree++;
}

unsigned srv_uring_bufs_free(const struct srv_uring *e)
{
	return e->nfree;
}

void srv_uring_stream_init(struct srv_uring_stream *st, int fd)
{
	memset(st, 0, sizeof(*st));
	st->fd = fd;
	st->dfd = -1;
}

bool srv_uring_dio_fits(const struct srv_uring_dio *dio, uint64_t off,
			size_t len, const void *mem)
{
	if (!dio->mem_align || !dio->off_align || len == 0 ||
	    len < dio->min_len)
		return false;
	return (off & (dio->off_align - 1)) == 0 &&
	       (len & (dio->off_align - 1)) == 0 &&
	       ((uintptr_t)mem & (dio->mem_align - 1)) == 0;
}

/*
 * The descriptor for (the rest of) `op`: a direct one only from its
 * start, because what continues a short transfer (end of file) starts at
 * an unaligned offset.
 */
static int op_fd(const struct srv_uring_op *op)
{
	return op->direct && op->done == 0 && op->st->dfd >= 0 ?
	       op->st->dfd : op->st->fd;
}

/* Makes the eventfd readable when completions wait to be reaped. */
static void notify(struct srv_uring *e)
{
	if (e->reap_head && !e->evfd_set) {
		/* Cannot fail short of overflowing a 64-bit counter. */
		(void)eventfd_write(e->evfd, 1);
		e->evfd_set = true;
	}
}

static void op_complete(struct srv_uring *e, struct srv_uring_op *op,
			int64_t res)
{
	if (res > 0 && op->direct && op->st->dfd >= 0) {
		if (op->kind == SRV_URING_READ)
			e->direct_rd++;
		else
			e->direct_wr++;
	}
	op->res = res;
	op->state = OP_COMPLETE;
	if (res < 0 && op->kind != SRV_URING_READ && op->st->err == 0)
		op->st->err = (int)res;
}

/* Moves the finished operations at the front of a stream's queue to the
 * reap queue, so that each stream's completions keep its order. */
static void stream_settle(struct srv_uring *e, struct srv_uring_stream *st)
{
	while (st->head && st->head->state == OP_COMPLETE) {
		struct srv_uring_op *op = st->head;

		st->head = op->next;
		if (!st->head)
			st->tail = NULL;
		op->next = NULL;
		if (e->reap_tail)
			e->reap_tail->next = op;
		else
			e->reap_head = op;
		e->reap_tail = op;
	}
}

static bool overlap(const struct srv_uring_op *a, const struct srv_uring_op *b)
{
	return a->off < b->off + b->len && b->off < a->off + a->len;
}

/* Whether `op` must not start while `prev`, earlier on its stream, runs. */
static bool must_wait(const struct srv_uring_op *op,
		      const struct srv_uring_op *prev)
{
	if (prev->state != OP_INFLIGHT)
		return false;
	switch (op->kind) {
	case SRV_URING_SYNC:
		return prev->kind == SRV_URING_WRITE;
	case SRV_URING_WRITE:
		/* A write past a read's range still moves end of file. */
		return prev->kind == SRV_URING_READ ||
		       (prev->kind == SRV_URING_WRITE && overlap(op, prev));
	case SRV_URING_READ:
		return prev->kind == SRV_URING_WRITE;
	}
	return true;
}

/* Puts the SQE for (the rest of) an operation in the ring. */
static int sqe_prep(struct srv_uring *e, struct srv_uring_op *op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	int fd = op_fd(op);

	/* At most `depth` operations are in flight and the SQ has `depth`
	 * entries, so this only fails if earlier submits were refused. */
	if (!sqe) {
		io_uring_submit(&e->ring);
		sqe = io_uring_get_sqe(&e->ring);
		if (!sqe)
			return -EBUSY;
	}
	switch (op->kind) {
	case SRV_URING_READ:
		io_uring_prep_read(sqe, fd, op->data + op->done,
				   (unsigned)(op->len - op->done),
				   op->off + op->done);
		break;
	case SRV_URING_WRITE:
		io_uring_prep_write(sqe, fd, op->data + op->done,
				    (unsigned)(op->len - op->done),
				    op->off + op->done);
		break;
	case SRV_URING_SYNC:
		io_uring_prep_fsync(sqe, fd,
				    op->datasync ? IORING_FSYNC_DATASYNC : 0);
		break;
	}
	io_uring_sqe_set_data(sqe, op);
	return 0;
}

/* A direct transfer: one call through the direct descriptor, and what it
 * left (end of file, or a short write) through the buffered one. */
static int64_t posix_direct(struct srv_uring_op *op)
{
	bool rd = op->kind == SRV_URING_READ;
	ssize_t n, m;

	n = rd ? srv_io_read_once(op->st->dfd, op->data, op->len, op->off) :
		 srv_io_write_once(op->st->dfd, op->data, op->len, op->off);
	if (n == -EINVAL) { /* refused after all, as in handle_cqe() */
		op->direct = false;
		n = 0;
	}
	else if (n < 0 || (size_t)n == op->len || (n == 0 && rd))
		return n;
	m = rd ? srv_io_read(op->st->fd, op->data + n, op->len - (size_t)n,
			     op->off + (uint64_t)n) :
		 srv_io_write(op->st->fd, op->data + n, op->len - (size_t)n,
			      op->off + (uint64_t)n);
	return m < 0 ? m : n + m;
}

static int64_t posix_run(struct srv_uring_op *op)
{
	if (op->direct && op->st->dfd >= 0)
		return posix_direct(op);
	switch (op->kind) {
	case SRV_URING_READ:
		return srv_io_read(op->st->fd, op->data, op->len, op->off);
	case SRV_URING_WRITE:
		return srv_io_write(op->st->fd, op->data, op->len, op->off);
	case SRV_URING_SYNC:
		return srv_io_sync(op->st->fd, op->datasync);
	}
	return -EINVAL;
}

static void op_start(struct srv_uring *e, struct srv_uring_op *op)
{
	int r;

	if (op->kind != SRV_URING_SYNC && op->len == 0) {
		op_complete(e, op, 0);
		return;
	}
	if (e->backend == SRV_IO_POSIX) {
		op_complete(e, op, posix_run(op));
		return;
	}
#ifdef QFT_FAULT_INJECTION
	/* The posix backend meets the same faults inside srv_io_*(). */
	if ((r = srv_io_fault(op->st->fd, op->kind == SRV_URING_READ ?
			      SRV_IO_FAULT_READ : op->kind == SRV_URING_WRITE ?
			      SRV_IO_FAULT_WRITE : SRV_IO_FAULT_SYNC,
			      op->off, op->len)) < 0) {
		op_complete(e, op, r);
		return;
	}
#endif
	if ((r = sqe_prep(e, op)) < 0) {
		op_complete(e, op, r);
		return;
	}
	op->state = OP_INFLIGHT;
	e->in_kernel++;
}

/* Starts a stream's waiting operations in order, up to the first one
 * that must still wait, then hands finished ones to the reap queue. */
static void stream_run(struct srv_uring *e, struct srv_uring_stream *st)
{
	for (struct srv_uring_op *op = st->head; op; op = op->next) {
		if (op->state != OP_WAITING)
			continue;
		for (struct srv_uring_op *prev = st->head; prev != op;
		     prev = prev->next)
			if (must_wait(op, prev))
				goto settle;
		op_start(e, op);
	}
settle:
	stream_settle(e, st);
}

/* Hands queued SQEs to the kernel. */
static void flush_sq(struct srv_uring *e)
{
	int r;

	do
		r = io_uring_submit(&e->ring);
	while (r == -EINTR);
	/* -EAGAIN, -EBUSY: the kernel is short of memory or has completions
	 * to post first; the SQEs stay queued and leave with the next
	 * submit.  Anything else means the ring is unusable. */
	if (r < 0 && r != -EAGAIN && r != -EBUSY && !e->broken)
		e->broken = r;
}

static void handle_cqe(struct srv_uring *e, struct srv_uring_op *op, int res)
{
	e->in_kernel--;
	if (op->kind == SRV_URING_SYNC) {
		op_complete(e, op, res < 0 ? res : 0);
	} else if (res == -EINTR) {
		goto again;
	} else if (res == -EINVAL && op_fd(op) != op->st->fd) {
		/* The file system refused this direct transfer after all
		 * (its alignment is not what statx said): buffered. */
		op->direct = false;
		goto again;
	} else if (res < 0) {
		op_complete(e, op, res);
	} else if (res == 0) {
		/* EOF for a read; a write that makes no progress would loop
		 * forever, and a regular file never does that. */
		op_complete(e, op, op->kind == SRV_URING_READ ?
				(int64_t)op->done : -EIO);
	} else {
		op->done += (size_t)res;
		if (op->done < op->len)
			goto again; /* short, but not at EOF: continue */
		op_complete(e, op, (int64_t)op->len);
	}
	/* What waited for this operation may start now. */
	stream_run(e, op->st);
	return;
again:
	if ((res = sqe_prep(e, op)) < 0) {
		op_complete(e, op, res);
		stream_run(e, op->st);
		return;
	}
	op->state = OP_INFLIGHT;
	e->in_kernel++;
}

/* Processes every CQE the ring holds, without blocking. */
static void harvest(struct srv_uring *e)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&e->ring, head, cqe) {
		handle_cqe(e, io_uring_cqe_get_data(cqe), cqe->res);
		n++;
	}
	io_uring_cq_advance(&e->ring, n);
	flush_sq(e);
}

/* Blocks until the kernel completes something, then harvests. */
static int wait_some(struct srv_uring *e)
{
	int r;

	if (e->broken)
		return e->broken;
	if (!e->in_kernel)
		return -EIO; /* nothing could ever wake us */
	do
		r = io_uring_submit_and_wait(&e->ring, 1);
	while (r == -EINTR);
	if (r < 0 && r != -EAGAIN && r != -EBUSY) {
		e->broken = r;
		return r;
	}
	harvest(e);
	return 0;
}

static int submit(struct srv_uring *e, struct srv_uring_stream *st,
		  enum srv_uring_kind kind, uint64_t off, size_t len,
		  struct srv_uring_buf *buf, size_t skip, bool datasync,
		  bool direct, uint64_t tag)
{
	struct srv_uring_op *op;

	if (e->broken)
		return e->broken;
	if (kind != SRV_URING_SYNC &&
	    (!buf_ours(e, buf) || buf->owner != BUF_CALLER ||
	     skip > buf->cap || len > buf->cap - skip || off > INT64_MAX ||
	     len > INT64_MAX - off))
		return -EINVAL;
	op = e->free_ops;
	if (!op)
		return -EAGAIN;
	e->free_ops = op->next;
	e->outstanding++;
	memset(op, 0, sizeof(*op));
	op->st = st;
	op->kind = kind;
	op->off = off;
	op->len = len;
	op->datasync = datasync;
	op->direct = direct && kind != SRV_URING_SYNC;
	op->tag = tag;
	op->state = OP_WAITING;
	if (buf) {
		op->buf = buf;
		op->data = buf->data + skip;
		buf->owner = BUF_ENGINE;
	}
	if (st->tail)
		st->tail->next = op;
	else
		st->head = op;
	st->tail = op;
	st->nops++;
	stream_run(e, st);
	if (e->backend == SRV_IO_URING)
		flush_sq(e);
	notify(e);
	return 0;
}

int srv_uring_read(struct srv_uring *e, struct srv_uring_stream *st,
		   uint64_t off, size_t len, struct srv_uring_buf *buf,
		   uint64_t tag)
{
	return submit(e, st, SRV_URING_READ, off, len, buf, 0, false, false,
		      tag);
}

int srv_uring_read_into(struct srv_uring *e, struct srv_uring_stream *st,
			uint64_t off, uint8_t *data, size_t len,
			struct srv_uring_buf *buf, unsigned flags,
			uint64_t tag)
{
	if (!buf_ours(e, buf) || data < buf->data ||
	    data > buf->data + buf->cap)
		return -EINVAL;
	return submit(e, st, SRV_URING_READ, off, len, buf,
		      (size_t)(data - buf->data), false,
		      (flags & SRV_URING_DIRECT) != 0, tag);
}

int srv_uring_write(struct srv_uring *e, struct srv_uring_stream *st,
		    uint64_t off, size_t len, struct srv_uring_buf *buf,
		    uint64_t tag)
{
	return submit(e, st, SRV_URING_WRITE, off, len, buf, 0, false, false,
		      tag);
}

int srv_uring_write_from(struct srv_uring *e, struct srv_uring_stream *st,
			 uint64_t off, const uint8_t *data, size_t len,
			 struct srv_uring_buf *buf, unsigned flags,
			 uint64_t tag)
{
	if (!buf_ours(e, buf) || data < buf->data ||
	    data > buf->data + buf->cap)
		return -EINVAL;
	return submit(e, st, SRV_URING_WRITE, off, len, buf,
		      (size_t)(data - buf->data), false,
		      (flags & SRV_URING_DIRECT) != 0, tag);
}

int srv_uring_sync(struct srv_uring *e, struct srv_uring_stream *st,
		   bool datasync, uint64_t tag)
{
	return submit(e, st, SRV_URING_SYNC, 0, 0, NULL, 0, datasync, false,
		      tag);
}

int srv_uring_stream_wait(struct srv_uring *e, struct srv_uring_stream *st)
{
	int r = 0;

	/* A stream's queue holds only what has not finished (stream_settle
	 * moves the rest on), and the posix backend finishes at once. */
	while (st->head && (r = wait_some(e)) == 0)
		;
	notify(e);
	return r;
}

int srv_uring_reap(struct srv_uring *e, struct srv_uring_done *done,
		   unsigned max, bool wait)
{
	eventfd_t v;
	unsigned n = 0;

	/* Reset the eventfd before looking, so that a completion arriving
	 * after the look signals it again. */
	(void)eventfd_read(e->evfd, &v);
	e->evfd_set = false;
	if (e->backend == SRV_IO_URING && !e->broken) {
		harvest(e);
		while (wait && !e->reap_head && e->in_kernel)
			if (wait_some(e) < 0)
				break;
	}
	while (n < max && e->reap_head) {
		struct srv_uring_op *op = e->reap_head;
		struct srv_uring_done *d = &done[n++];

		e->reap_head = op->next;
		if (!e->reap_head)
			e->reap_tail = NULL;
		d->tag = op->tag;
		d->st = op->st;
		d->buf = op->buf;
		d->off = op->off;
		d->len = op->len;
		d->res = op->res;
		d->kind = op->kind;
		if (op->buf)
			op->buf->owner = BUF_CALLER;
		op->st->nops--;
		op->state = OP_FREE;
		op->next = e->free_ops;
		e->free_ops = op;
		e->outstanding--;
	}
	notify(e);
	if (n == 0 && e->broken)
		return e->broken;
	return (int)n;
}

void srv_uring_destroy(struct srv_uring *e)
{
	bool leak = false;

	if (!e)
		return;
	if (e->backend == SRV_IO_URING) {
		while (e->in_kernel && wait_some(e) == 0)
			;
		/*
		 * A broken ring may still have requests that will write into
		 * the buffers after the ring is gone: never hand that memory
		 * back to malloc.
		 */
		leak = e->in_kernel != 0;
		io_uring_queue_exit(&e->ring);
	}
	if (e->evfd >= 0)
		close(e->evfd);
	if (!leak)
		free(e->mem);
	free(e->bufs);
	free(e->ops);
	free(e);
}
