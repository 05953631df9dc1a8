/* SPDX-License-Identifier: MIT */
/*
 * Read-ahead of an open file (qc_ra_): on the second read in a row that
 * continues the previous one, READs for the chunks ahead of the reader
 * are sent without waiting and their replies kept, in order, on
 * ra.head..ra.tail; reads inside that window are served from them,
 * anything else stops the stream.
 *
 * The window decisions (qc_ra_admit, qc_ra_fill, qc_ra_pin,
 * qc_ra_collect, qc_ra_complete, qc_ra_drop) change only the file's
 * stream state, its changes in flight (handle.h) and fs->ra_bytes, send
 * nothing and never wait: tests/unit/test_stream.c drives them without a
 * connection.  They run with the file's lock held.  The rest
 * (qc_ra_read, qc_ra_send, qc_ra_invalidate*) sends and waits, and takes
 * the locks itself.
 *
 * The completions (on the connection's reader thread) take only the
 * file's lock, which nobody holds while sending or waiting for a reply.
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
	/*
	 * The server's SEEK_HOLE answered hole_at from data_from (0, 0:
	 * none): a reader inside [data_from, hole_at) -- cp --sparse
	 * reading one extent -- gets no read-ahead past the hole, and in
	 * the hole only what it asks for, so that the zeros a sparse copy
	 * skips do not cross the link.  Only a hint: forgotten by a write,
	 * and by a reader well past the hole.
	 */
	uint64_t data_from, hole_at;
	/*
	 * A hole the server told of (SEEK_HOLE, then SEEK_DATA after it):
	 * a read wholly inside [zero_from, zero_to) is answered with zeros
	 * here until zero_until (qc_now_ns: attr_timeout after the SEEK was
	 * sent, as attributes are trusted), unless a write through the
	 * mount drops it first: the kernel's own read-ahead past the end of
	 * an extent that cp --sparse reads costs nothing on the link.
	 */
	uint64_t zero_from, zero_to, zero_until;
	/*
	 * Data the server told of: [ext_from, ext_to) is data and a hole
	 * begins at ext_to, until ext_until (as zero_until).  With the hole
	 * above, the next SEEK_HOLE from inside the data (cp asks it right
	 * after SEEK_DATA) and the next SEEK_DATA from inside the hole are
	 * answered here (qc_ra_seek_known).
	 */
	uint64_t ext_from, ext_to, ext_until;
	/* Drops so far: an answer to a SEEK sent before the last drop (a
	 * write) may be stale, and is not kept. */
	uint64_t drops;
	struct qc_ra_chunk *head;
	struct qc_ra_chunk *tail;
};

/* The read-ahead limit in force now. */
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
/* The server said [from, hole) of f is data and a hole starts at `hole`
 * (SEEK_HOLE): takes the lock. */
void qc_ra_note_hole(struct qc_file *f, uint64_t from, uint64_t hole);
/*
 * File lock held: what a SEEK's reply said, sent when qc_ra.drops was
 * `drops` (read under the lock) and attr_timeout before `until`: from
 * `off`, the data (`hole` false) or hole (`hole` true) begins at `res`,
 * and what follows it at `next` (0: nothing, or not told).  The holes
 * and data it shows are kept (qc_ra.zero_*, ext_*) unless a write
 * dropped the read-ahead since.
 */
void qc_ra_note_seek(struct qc_file *f, bool hole, uint64_t off,
		     uint64_t res, uint64_t next, uint64_t until,
		     uint64_t drops);
/* File lock held: the answer to SEEK_DATA (`hole` false) or SEEK_HOLE
 * from `off` that the kept replies give at `now`, if they do. */
bool qc_ra_seek_known(struct qc_file *f, bool hole, uint64_t off,
		      uint64_t now, uint64_t *res);

#endif /* QC_READAHEAD_H */
