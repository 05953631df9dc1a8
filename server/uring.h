/* SPDX-License-Identifier: MIT */
/*
 * The server's file I/O engine for bulk streams: reads queued ahead of the
 * socket (read-ahead) and writes queued behind it (write-behind), over
 * io_uring, or over pread/pwrite when io_uring is unavailable or not
 * wanted.  Both backends have the same API and the same completion
 * interface, so the caller's code does not know which one runs.
 *
 * Model.  The caller submits operations (READ, WRITE, SYNC); each belongs
 * to a stream, struct srv_uring_stream, one per open file, and carries a
 * caller's tag.  Every accepted operation comes back exactly once, as a
 * struct srv_uring_done from srv_uring_reap().
 *
 *  - Completions of one stream come back in the order the operations were
 *    submitted (those of different streams interleave freely), so a
 *    read-ahead stream can send its chunks as they arrive and a
 *    write-behind stream can acknowledge cumulatively.
 *  - Within a stream, operations take effect as if run one after the
 *    other in submission order: a write waits for in-flight writes of
 *    the stream that overlap it and for every in-flight read, a read for
 *    every in-flight write (a write anywhere may move end of file, which
 *    decides what a read returns, even where their ranges do not meet),
 *    and a SYNC for every write before it (it is held in the engine, not
 *    in the kernel, until they have completed: no IOSQE_IO_DRAIN, which
 *    would stall every other file too, and no links, which would cancel
 *    the rest of a chain after one short write).  Operations start in
 *    submission order, so one queued behind a waiting operation waits
 *    too; reads run concurrently with reads, and non-overlapping writes
 *    with writes, up to the queue depth.  Ordering holds within one
 *    stream only: two streams on the same file are not ordered against
 *    each other.
 *  - A READ returns fewer bytes than asked only at end of file; a short
 *    transfer that is not EOF is continued by the engine, as is a short
 *    write.  Errors are negative errno values.
 *  - The first failed WRITE or SYNC of a stream is kept in st->err, so
 *    that an error the caller could not answer at once (write-behind has
 *    no reply per write) still reaches the next FSYNC, FLUSH or CLOSE.
 *
 * Memory is bounded: at most cfg.depth operations are outstanding
 * (submitted and not yet reaped), and data lives only in the pool's
 * cfg.nbufs buffers of cfg.buf_size bytes.  Submitting when `depth`
 * operations are outstanding fails with -EAGAIN and consumes nothing:
 * reap, then retry.
 *
 * Buffers.  srv_uring_buf_get() hands a pool buffer to the caller;
 * submitting a READ or WRITE with it passes it to the engine, and its
 * completion passes it back (for a READ, holding the data), to be reused
 * or returned with srv_uring_buf_put().  The engine never recycles a
 * buffer on its own.
 *
 * Event loop.  srv_uring_fd() is an eventfd that becomes readable when
 * there may be completions to reap; poll it next to the socket and call
 * srv_uring_reap(..., false) when it fires.  It may fire spuriously (reap
 * then returns 0).  With the posix backend an operation is performed
 * synchronously inside the submitting call and its completion is queued,
 * so the same loop works unchanged.
 *
 * Backends.  SRV_IO_AUTO uses io_uring when the kernel allows it and
 * otherwise, after one log line "io_uring unavailable (<reason>): using
 * pread/pwrite" per process, pread/pwrite.  SRV_IO_URING fails instead of
 * falling back (for --io=uring: a benchmark must not silently measure the
 * other path); SRV_IO_POSIX never touches io_uring.  The engine reads no
 * environment: the server's main() decides between --io and
 * QFTFS_SERVER_IO (SRV_URING_ENV) and passes the result.
 *
 * Nothing is locked: one engine belongs to one thread (the server's event
 * loop).  Error convention: 0 (or a count) or a negative errno.
 */
#ifndef SRV_URING_H
#define SRV_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct io_uring;
struct srv_uring;
struct srv_uring_op;

enum srv_io_backend {
	SRV_IO_AUTO = 0,
	SRV_IO_URING,
	SRV_IO_POSIX,
};

#define SRV_URING_DEFAULT_DEPTH 8u
#define SRV_URING_DEFAULT_NBUFS 16u
#define SRV_URING_MAX_DEPTH     4096u
#define SRV_URING_MAX_NBUFS     4096u
/* The environment variable qftfs-server reads when --io is not given. */
#define SRV_URING_ENV           "QFTFS_SERVER_IO"

struct srv_uring_cfg {
	enum srv_io_backend backend;
	unsigned depth;      /* outstanding operations; ring entries */
	unsigned nbufs;      /* buffers in the pool */
	size_t buf_size;     /* bytes per buffer, the largest READ/WRITE */
	/*
	 * Test hook: called instead of io_uring_queue_init() (same
	 * signature and return convention), e.g. to make it fail with
	 * -EPERM as a container would.  NULL for the real one.
	 */
	int (*ring_init)(unsigned entries, struct io_uring *ring,
			 unsigned flags);
};

/* A pool buffer.  `data` is page-aligned and holds `cap` bytes. */
struct srv_uring_buf {
	uint8_t *data;
	size_t cap;
	/* Engine-private. */
	struct srv_uring_buf *next_free;
	uint8_t owner;
};

/*
 * One open file's queue.  The caller owns the struct (typically inside
 * its handle), sets it up with srv_uring_stream_init(), and may free it or
 * close `fd` only once srv_uring_stream_idle() is true: every operation
 * submitted on it has been reaped.
 */
struct srv_uring_stream {
	int fd;
	/*
	 * The same file opened again with O_DIRECT, or -1 (the default):
	 * operations submitted with SRV_URING_DIRECT go through it, the rest
	 * through `fd`.  Owned by the caller, like `fd`.
	 */
	int dfd;
	/*
	 * First error (-errno) of a WRITE or SYNC on this stream, or 0.  The
	 * engine only ever sets it when it is 0; the caller reads it, and
	 * clears it once it has reported it.
	 */
	int err;
	/* Engine-private: operations not yet completed or not yet handed to
	 * the reap queue, in submission order; and the count not reaped. */
	struct srv_uring_op *head, *tail;
	unsigned nops;
};

enum srv_uring_kind {
	SRV_URING_READ = 1,
	SRV_URING_WRITE,
	SRV_URING_SYNC,
};

/* One completed operation, as srv_uring_reap() reports it. */
struct srv_uring_done {
	uint64_t tag;                 /* as given at submission */
	struct srv_uring_stream *st;
	struct srv_uring_buf *buf;    /* READ/WRITE: back to the caller;
				       * SYNC: NULL */
	uint64_t off;
	size_t len;                   /* bytes asked for */
	/*
	 * READ: bytes read, fewer than len only at end of file (0 at or past
	 * it); WRITE: len; SYNC: 0; or a negative errno.  A failed WRITE or
	 * SYNC has also been recorded in st->err if that was 0.
	 */
	int64_t res;
	enum srv_uring_kind kind;
};

/*
 * Direct I/O (O_DIRECT) moves data between the disk and the caller's
 * buffer without the page cache copy, but only for transfers whose file
 * offset and length are multiples of `off_align` and whose memory address
 * is a multiple of `mem_align` (statx STATX_DIOALIGN of the file), and it
 * pays off only for large ones (`min_len`): everything else goes through
 * the page cache.
 */
struct srv_uring_dio {
	uint32_t mem_align;   /* power of two, or 0: no direct I/O */
	uint32_t off_align;   /* power of two, or 0: no direct I/O */
	size_t min_len;
};

/* Whether a transfer of `len` bytes at `off` from or to `mem` may go
 * direct under `dio`. */
bool srv_uring_dio_fits(const struct srv_uring_dio *dio, uint64_t off,
			size_t len, const void *mem);

/* Submission flag: run the READ or WRITE through st->dfd.  The caller has
 * checked it with srv_uring_dio_fits(); a transfer the kernel leaves short
 * (end of file) continues through st->fd. */
#define SRV_URING_DIRECT 1u

/* Defaults: SRV_IO_AUTO, depth 8, 16 buffers of QFT_MAX_DATA bytes. */
void srv_uring_cfg_default(struct srv_uring_cfg *cfg);
/* "auto", "uring", "posix" (for --io=): 0 and *b set, or -EINVAL. */
int srv_uring_backend_parse(const char *name, enum srv_io_backend *b);
const char *srv_uring_backend_name(enum srv_io_backend b);

/*
 * Creates an engine.  -EINVAL on a bad cfg (depth or nbufs 0 or over
 * their maximum, buf_size 0); with SRV_IO_URING, the error that made
 * io_uring unavailable (-EPERM, -ENOSYS, -EOPNOTSUPP, ...); -ENOMEM.
 */
int srv_uring_init(struct srv_uring **ep, const struct srv_uring_cfg *cfg);
/*
 * Waits for every operation the kernel still has, then frees the engine,
 * its ring, its eventfd and every pool buffer (including those the caller
 * holds).  Completions not reaped are dropped.  NULL is harmless.
 */
void srv_uring_destroy(struct srv_uring *e);

/* SRV_IO_URING or SRV_IO_POSIX: what runs, never SRV_IO_AUTO. */
enum srv_io_backend srv_uring_backend(const struct srv_uring *e);
/* The eventfd to poll for POLLIN (see above); owned by the engine. */
int srv_uring_fd(const struct srv_uring *e);
/* READs and WRITEs that went through a stream's direct descriptor
 * (SRV_URING_DIRECT, not refused), since the engine started. */
void srv_uring_direct_ops(const struct srv_uring *e, uint64_t *rd,
			  uint64_t *wr);
/* Operations submitted and not yet reaped (<= depth). */
unsigned srv_uring_outstanding(const struct srv_uring *e);

/* A free pool buffer, or NULL when all are out: reap and put some back. */
struct srv_uring_buf *srv_uring_buf_get(struct srv_uring *e);
/* Returns a buffer the caller holds; anything else is ignored. */
void srv_uring_buf_put(struct srv_uring *e, struct srv_uring_buf *b);
unsigned srv_uring_bufs_free(const struct srv_uring *e);

void srv_uring_stream_init(struct srv_uring_stream *st, int fd);
static inline bool srv_uring_stream_idle(const struct srv_uring_stream *st)
{
	return st->nops == 0;
}
/*
 * Blocks until every operation submitted on `st` has completed.  Their
 * completions (and any others that arrive meanwhile) stay queued for
 * srv_uring_reap().  For closing a file: wait, reap, then close.
 */
int srv_uring_stream_wait(struct srv_uring *e, struct srv_uring_stream *st);

/*
 * Reads buf->data[0..len) from st->fd at `off`.  len <= buf->cap and
 * off + len <= INT64_MAX, else -EINVAL; -EAGAIN when `depth` operations
 * are outstanding.  The buffer must be one the caller holds.
 */
int srv_uring_read(struct srv_uring *e, struct srv_uring_stream *st,
		   uint64_t off, size_t len, struct srv_uring_buf *buf,
		   uint64_t tag);
/*
 * Reads into `data`, which lies inside `buf`, leaving room before it: the
 * server reads a READ's data where its reply frame will carry it, so the
 * frame goes out without a copy.  `flags`: 0 or SRV_URING_DIRECT.  The
 * same rules otherwise.
 */
int srv_uring_read_into(struct srv_uring *e, struct srv_uring_stream *st,
			uint64_t off, uint8_t *data, size_t len,
			struct srv_uring_buf *buf, unsigned flags,
			uint64_t tag);
/* Writes buf->data[0..len) at `off`; the same rules. */
int srv_uring_write(struct srv_uring *e, struct srv_uring_stream *st,
		    uint64_t off, size_t len, struct srv_uring_buf *buf,
		    uint64_t tag);
/*
 * Writes `len` bytes from `data`, which lies inside `buf`: the server
 * receives a WRITE frame into a pool buffer and writes its data from
 * there, after the header, without a copy.  `flags` as for
 * srv_uring_read_into().  The same rules otherwise.
 */
int srv_uring_write_from(struct srv_uring *e, struct srv_uring_stream *st,
			 uint64_t off, const uint8_t *data, size_t len,
			 struct srv_uring_buf *buf, unsigned flags,
			 uint64_t tag);
/*
 * fdatasync (datasync) or fsync of st->fd, run once every WRITE submitted
 * on `st` before it has completed.  When its completion arrives, st->err
 * holds the stream's first write or sync error, the right answer to a
 * FLUSH or FSYNC.
 */
int srv_uring_sync(struct srv_uring *e, struct srv_uring_stream *st,
		   bool datasync, uint64_t tag);

/*
 * Moves up to `max` completions into done[] and returns how many.  With
 * `wait`, blocks until at least one is there, unless nothing is
 * outstanding (then 0).  A negative errno means the ring itself failed;
 * the engine can then only be destroyed.
 */
int srv_uring_reap(struct srv_uring *e, struct srv_uring_done *done,
		   unsigned max, bool wait);

#endif /* SRV_URING_H */
