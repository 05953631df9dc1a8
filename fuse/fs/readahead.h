/* SPDX-License-Identifier: MIT */
/*
 * The two bulk streams of an open file (struct qc_file, file.h).
 *
 * Write-behind (qc_wb_): a WRITE is answered to the kernel as soon as it
 * is sent; wb.bytes counts what the server has not acknowledged yet,
 * bounded by fs->window.  Each WRITE is a change in flight of the handle
 * base (handle.h), where the first failed one's error stays sticky and
 * is returned by every later write, fsync and flush until a flush
 * reports it.
 *
 * Read-ahead (qc_ra_): on the second read in a row that continues the
 * previous one, READs for the chunks ahead of the reader are sent without
 * waiting and their replies kept, in order, on ra.head..ra.tail; reads
 * inside that window are served from them, anything else stops the
 * stream.
 *
 * The window decisions (qc_ra_admit, qc_ra_fill, qc_ra_pin,
 * qc_ra_collect, qc_ra_complete, qc_ra_drop, qc_wb_must_wait,
 * qc_wb_account, qc_wb_complete) change only the file's stream state, its
 * changes in flight (handle.h) and fs->ra_bytes, send nothing and never
 * wait: tests/unit/test_stream.c
 * drives them without a connection.  They run with the file's lock held.
 * The rest (qc_ra_read, qc_ra_send, qc_ra_invalidate*, qc_wb_write)
 * sends and waits, and takes the locks itself.
 *
 * The completions of both (on the connection's reader thread) take only
 * the file's lock, which nobody holds while sending or waiting for a
 * reply.
 */
#ifndef QC_READAHEAD_H
#define QC_READAHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <fuse_lowlevel.h>

#include "net/conn.h"
#include "protocol.h"

struct qc_fs;
struct qc_file;
struct qn_node;

/* Read-ahead asks for what one READ carries, at multiples of that size. */
#define QC_RA_CHUNK        ((uint64_t)QFT_MAX_DATA)
/* A new stream's credit; it doubles up to fs->readahead while the reader
 * keeps consuming everything. */
#define QC_RA_CREDIT_START ((uint64_t)2 << 20)
/* Read-ahead all handles together may hold: at least this, or two full
 * windows. */
#define QC_RA_TOTAL_MIN    ((uint64_t)64 << 20)
/* How far behind the reader a chunk must be to count as skipped: the
 * kernel's parallel reads (cp's 1 MiB reads and their async read-ahead)
 * arrive in any order, and a late one must still find its chunk. */
#define QC_RA_SKIPPED      (4 * QC_RA_CHUNK)
/* Chunks that one kernel read (at most QC_RA_CHUNK bytes) can span. */
#define QC_RA_MAX_IOV      4

/*
 * One READ of a read-ahead stream.  It lives while it is on its file's
 * list (listed), while its reply is awaited (!done) and while readers use
 * its data (pins); ra_chunk_maybe_free frees it when none of these holds.
 * Fields not marked immutable are guarded by the file's lock.
 */
struct qc_ra_chunk {
	struct qc_ra_chunk *next;  /* file lock: the stream's list, by offset */
	struct qc_ra_chunk *snext; /* owned by the reader that made it: to send */
	struct qc_file *f;      /* immutable */
	uint64_t off;           /* immutable */
	uint32_t len;           /* immutable: bytes asked for */
	uint32_t got;           /* file lock: bytes received (< len: EOF) */
	uint32_t served;        /* file lock: bytes handed to the kernel */
	uint32_t charged;       /* file lock: its part of fs->ra_bytes */
	unsigned pins;          /* file lock: readers using the data */
	bool listed;            /* file lock */
	bool done;              /* file lock: the reply (or error) is in */
	int err;                /* file lock: the READ's error, -errno */
	uint64_t sent_us;       /* immutable once sent: for streams.down */
	uint64_t sent_gen;      /* ... and the link it was sent on */
	struct qc_reply rep;    /* file lock: the data, once done */
};

/* A file's read-ahead stream; every field: the file's lock. */
struct qc_ra {
	uint64_t next;          /* where a sequential read begins next */
	bool on;                /* a read-ahead stream runs */
	bool eof;               /* a chunk came back short */
	uint64_t pos;           /* furthest end of a read in the stream */
	uint64_t end;           /* end of the last chunk asked for */
	uint64_t credit;        /* how far past pos it may ask; kept across
				 * streams, halved by writes that waste it,
				 * doubled by a reader using it */
	uint64_t eaten;         /* consumed since the credit last grew */
	struct qc_ra_chunk *head;
	struct qc_ra_chunk *tail;
};

/* A file's write-behind window; every field: the file's lock.  The
 * WRITEs' count and sticky error are the handle base's changes in flight
 * (handle.h). */
struct qc_wb {
	uint64_t bytes;         /* WRITE bytes sent, not answered */
};

/* Whether no WRITE data is unanswered (the file's lock held). */
static inline bool qc_wb_idle(const struct qc_wb *wb)
{
	return wb->bytes == 0;
}

/*
 * The bandwidth-delay product of one direction of the bulk stream, measured
 * from the calls themselves: the smallest time from sending a WRITE (or a
 * read-ahead READ) to its answer on this link, and the best rate at which
 * answered bytes came back, forgotten after QC_BDP_FORGET_US so that a
 * link that slowed down is measured again.  The call time is kept for the
 * link's life (a new link, after a reconnect, starts over): a busy stream
 * only ever sees call times stretched by its own window, and adopting
 * those would grow the window without end.  The call time includes
 * putting the call's own data on the wire, so the product covers a full
 * call beyond the link's own product: what a window must hold to keep the
 * link busy while the next call is prepared.  Guarded by lock.
 */
#define QC_BDP_FORGET_US    ((uint64_t)10000000)
/* A rate is measured over at least this long (and one call time). */
#define QC_BDP_INTERVAL_US  ((uint64_t)20000)
/* A window or credit sized from the product: this many products... */
#define QC_BDP_GAIN         2
/* ... and never less than this: a few calls in flight at all times. */
#define QC_BDP_MIN          ((uint64_t)4 * QFT_MAX_DATA)
struct qc_bdp {
	pthread_mutex_t lock;
	uint64_t gen;           /* the link measured */
	uint64_t rtt_us;        /* smallest call time, 0 = none yet */
	uint64_t bw;            /* best rate, bytes/s, 0 = none yet */
	uint64_t bw_at;
	uint64_t bytes;         /* answered so far */
	uint64_t mark_us;       /* start of the rate's current interval */
	uint64_t mark_bytes;    /* bytes at mark_us */
};

/*
 * The mount's streams (struct qc_fs.streams), owned by this module: the
 * link-measured estimates of WRITE (up) and read-ahead READ (down) calls,
 * and whether the window and read-ahead are sized from them.
 */
struct qc_streams {
	struct qc_bdp up;
	struct qc_bdp down;
	bool window_auto;       /* set once before the mount serves */
	bool ra_auto;           /* ... (qc_stream_set_auto) */
};

/* The estimates' locks, nothing measured; leaves the auto settings (which
 * the options may have made already). */
void qc_stream_init(struct qc_streams *sm);
void qc_stream_destroy(struct qc_streams *sm);

/* Forgets everything measured. */
void qc_bdp_reset(struct qc_bdp *b);
/* A call of `len` bytes sent on link `gen` at sent_us was answered at
 * now_us. */
void qc_bdp_sample(struct qc_bdp *b, uint64_t gen, uint64_t sent_us,
		   uint64_t now_us, uint32_t len);
/*
 * QC_BDP_GAIN products, at least QC_BDP_MIN and at most `max`; `dflt`
 * until both the call time and the rate are known.
 */
uint64_t qc_bdp_size(struct qc_bdp *b, uint64_t dflt, uint64_t max);
/*
 * Whether the mount sizes its write-behind window and read-ahead from the
 * measured products (the size was not given with -o window= / -o
 * readahead=); fs->window / fs->readahead are then the ceiling.
 */
void qc_stream_set_auto(struct qc_fs *fs, bool window, bool readahead);
/* The write-behind window and read-ahead limit in force now. */
uint64_t qc_wb_window(struct qc_fs *fs);
uint64_t qc_ra_limit(struct qc_fs *fs);

/* A stream that has seen no read yet. */
void qc_ra_init(struct qc_ra *ra);

/* Window decisions: the file's lock held (see above). */
void qc_ra_stop(struct qc_file *f);
bool qc_ra_admit(struct qc_fs *fs, struct qc_file *f, uint64_t off,
		 uint64_t end);
struct qc_ra_chunk *qc_ra_fill(struct qc_fs *fs, struct qc_file *f);
void qc_ra_complete(struct qc_ra_chunk *c, int err, struct qc_reply *rep);
int qc_ra_pin(struct qc_file *f, uint64_t off, uint64_t end,
	      struct qc_ra_chunk **pinned);
ssize_t qc_ra_collect(struct qc_fs *fs, struct qc_file *f, uint64_t off,
		      uint64_t end, struct qc_ra_chunk **pinned, int npin,
		      struct iovec *iov, int *niov);
/* Drops the pins qc_ra_pin took (freeing chunks nothing holds any more). */
void qc_ra_unpin(struct qc_ra_chunk **pinned, int npin);
/* Ends the stream because a change made its data stale, asking less far
 * ahead next time if data was thrown away unread. */
void qc_ra_drop(struct qc_file *f);

/*
 * Starts f's read-ahead stream with the first `asked` bytes of the file
 * that OPEN returned in `rep` (moved out of it), so that reading a small
 * file costs no round trip after the open.  f is not shared yet.
 */
#define QC_OPEN_DATA ((uint32_t)128 << 10)
void qc_ra_prime(struct qc_fs *fs, struct qc_file *f, uint32_t asked,
		 struct qc_reply *rep);

/* Sending; no lock held. */
void qc_ra_send(struct qc_fs *fs, uint64_t gen, uint64_t handle,
		struct qc_ra_chunk *c);
/*
 * Answers a kernel read of `size` bytes at `off` on f: from the read-ahead
 * stream when the read belongs to it (and the mount reads ahead), with a
 * plain READ otherwise.  Replies to req exactly once.
 */
void qc_ra_read(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		size_t size, off_t off);
void qc_ra_invalidate(struct qc_fs *fs, struct qn_node *n);
void qc_ra_invalidate_file(struct qc_fs *fs, struct qc_file *f);

/* Write-behind decisions: the file's lock held. */
/* Whether a WRITE of `len` bytes must wait for room in the window (not
 * after an error: the write then fails at once). */
bool qc_wb_must_wait(const struct qc_file *f, uint64_t window, uint32_t len);
/* Counts a WRITE of `len` about to be sent as a change in flight, or
 * returns the sticky error that forbids it. */
int qc_wb_account(struct qc_file *f, uint32_t len);
/* Counts a WRITE of `len` as answered with `err` (0 or -errno). */
void qc_wb_complete(struct qc_file *f, uint32_t len, int err);

/*
 * Sends a WRITE of buf[0..len) at `off` behind the window (waiting for
 * room), or waits for its answer when the window is 0.  0, or the -errno
 * to answer the kernel's write with (a sticky error of an earlier WRITE).
 */
int qc_wb_write(struct qc_fs *fs, struct qc_file *f, const char *buf,
		uint32_t len, off_t off);
#endif /* QC_READAHEAD_H */
