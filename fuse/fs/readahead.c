// SPDX-License-Identifier: MIT
/* Read-ahead of an open file (see readahead.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "net/conn.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "log.h"
#include "msg.h"
#include "fs/handle.h"
#include "fs/node.h"
#include "protocol.h"
#include "fs/steps.h"
#include "fs/bdp.h"
#include "fs/readahead.h"

uint64_t qc_ra_limit(struct qc_fs *fs)
{
	uint64_t dflt = QC_READAHEAD_DEFAULT < fs->readahead ?
		QC_READAHEAD_DEFAULT : fs->readahead;

	if (!fs->streams.ra_auto || fs->readahead == 0)
		return fs->readahead;
	return qc_bdp_size(&fs->streams.down, dflt, fs->readahead);
}

void qc_ra_init(struct qc_ra *ra)
{
	memset(ra, 0, sizeof(*ra));
	/* No read continues "the previous one" before there is one. */
	ra->next = UINT64_MAX;
	ra->credit = QC_RA_CREDIT_START;
}

/* Frees c once nothing holds it any more; file lock held (or f unshared). */
static void ra_chunk_maybe_free(struct qc_ra_chunk *c)
{
	if (c->listed || !c->done || c->pins)
		return;
	atomic_fetch_sub(&c->f->fs->ra_bytes, c->charged);
	qc_reply_free(&c->rep);
	free(c);
}

static void ra_unlink_head(struct qc_file *f)
{
	struct qc_ra_chunk *c = f->ra.head;

	f->ra.head = c->next;
	if (!f->ra.head)
		f->ra.tail = NULL;
	c->next = NULL;
	c->listed = false;
	ra_chunk_maybe_free(c);
}

/*
 * Ends the read-ahead stream and drops its data; chunks still awaited are
 * freed by their completion, chunks in use by their last reader.  Another
 * stream needs two reads in a row again.
 */
void qc_ra_stop(struct qc_file *f)
{
	while (f->ra.head)
		ra_unlink_head(f);
	f->ra.on = false;
	f->ra.eof = false;
	f->ra.next = UINT64_MAX;
}

/* A change made f's read-ahead stale: drops it.  File lock held. */
void qc_ra_drop(struct qc_file *f)
{
	bool wasted = false;

	qc_file_assert_locked(f);
	/*
	 * Read-ahead thrown away unread means reads and writes take
	 * turns on this file: ask less far ahead next time, down to
	 * one chunk, so that each turn does not refetch a window.
	 */
	for (struct qc_ra_chunk *c = f->ra.head; c; c = c->next)
		wasted |= !c->done || c->served < c->got;
	if (wasted && f->ra.credit / 2 >= QC_RA_CHUNK)
		f->ra.credit /= 2;
	/* The hole may hold data now. */
	f->ra.data_from = f->ra.hole_at = 0;
	f->ra.zero_from = f->ra.zero_to = f->ra.zero_until = 0;
	f->ra.ext_from = f->ra.ext_to = f->ra.ext_until = 0;
	f->ra.drops++;
	qc_ra_stop(f);
}

static void ra_note_zeros(struct qc_file *f, uint64_t from, uint64_t to,
			  uint64_t until)
{
	f->ra.zero_from = from;
	f->ra.zero_to = to;
	f->ra.zero_until = until;
}

static void ra_note_ext(struct qc_file *f, uint64_t from, uint64_t to,
			uint64_t until)
{
	f->ra.ext_from = from;
	f->ra.ext_to = to;
	f->ra.ext_until = until;
}

void qc_ra_note_seek(struct qc_file *f, bool hole, uint64_t off,
		     uint64_t res, uint64_t next, uint64_t until,
		     uint64_t drops)
{
	qc_file_assert_locked(f);
	if (drops != f->ra.drops || res < off)
		return;
	if (hole) {
		/* [off, res) data, then a hole up to the next data. */
		if (res > off)
			ra_note_ext(f, off, res, until);
		if (next > res)
			ra_note_zeros(f, res, next, until);
	} else {
		/* [off, res) a hole, then data up to the next hole. */
		if (res > off)
			ra_note_zeros(f, off, res, until);
		if (next > res)
			ra_note_ext(f, res, next, until);
	}
}

bool qc_ra_seek_known(struct qc_file *f, bool hole, uint64_t off,
		      uint64_t now, uint64_t *res)
{
	qc_file_assert_locked(f);
	if (f->ra.ext_to && off >= f->ra.ext_from && off < f->ra.ext_to &&
	    now < f->ra.ext_until) {
		*res = hole ? f->ra.ext_to : off;
		return true;
	}
	if (f->ra.zero_to && off >= f->ra.zero_from && off < f->ra.zero_to &&
	    now < f->ra.zero_until) {
		*res = hole ? off : f->ra.zero_to;
		return true;
	}
	return false;
}

/* Whether [off, end) of f lies in a hole the server told of lately
 * (qc_ra.zero_*). */
static bool ra_in_hole(struct qc_file *f, uint64_t off, uint64_t end)
{
	bool in;

	pthread_mutex_lock(&f->lock);
	in = f->ra.zero_to && off >= f->ra.zero_from &&
	     end <= f->ra.zero_to && qc_now_ns() < f->ra.zero_until;
	pthread_mutex_unlock(&f->lock);
	return in;
}

/* What a read inside a hole gets (the kernel asks for QFT_MAX_DATA at
 * most). */
static const char ra_zeros[QFT_MAX_DATA];

void qc_ra_note_hole(struct qc_file *f, uint64_t from, uint64_t hole)
{
	pthread_mutex_lock(&f->lock);
	f->ra.data_from = from;
	f->ra.hole_at = hole;
	pthread_mutex_unlock(&f->lock);
}

/*
 * How far the stream may ask ahead of a reader at ra.pos (`want`), where
 * a hole the server told of (qc_ra_note_hole) ends the data: no further
 * than the hole for a reader inside the data before it, and no further
 * than the reader itself inside the hole.  A reader well past the hole
 * reads on as any other, and the hint is forgotten.  File lock held.
 */
static uint64_t ra_hole_want(struct qc_file *f, uint64_t want)
{
	uint64_t at = f->ra.hole_at;

	if (!at || f->ra.pos <= f->ra.data_from)
		return want;
	if (f->ra.pos > at + QC_RA_CREDIT_START) {
		f->ra.data_from = f->ra.hole_at = 0;
		return want;
	}
	if (f->ra.pos <= at)
		return want < at ? want : at;
	return f->ra.pos;
}

/* Table lock held, then the file's: the one lock order. */
static bool invalidate_one(struct qn_file *nf, void *ctx)
{
	struct qc_file *f = (struct qc_file *)nf;

	(void)ctx;
	if (f->dir)
		return false;
	pthread_mutex_lock(&f->lock);
	qc_ra_drop(f);
	pthread_mutex_unlock(&f->lock);
	return false;
}

/*
 * Drops the read-ahead data of every open file of n, which a write or a
 * truncation through this mount has just made stale.  Called after that
 * request was sent, so a chunk asked for later is fresh, and before the
 * kernel hears back, so no read issued after it can be served old data.
 */
void qc_ra_invalidate(struct qc_fs *fs, struct qn_node *n)
{
	qn_for_each_file(&fs->nodes, n, invalidate_one, NULL);
}

/* The same for the node of an open file (whose node is stable while the
 * kernel holds the file, but read under the table lock all the same). */
void qc_ra_invalidate_file(struct qc_fs *fs, struct qc_file *f)
{
	qc_ra_invalidate(fs, qn_file_node(&fs->nodes, &f->nf));
}

static void read_plain(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		       size_t size, uint64_t off)
{
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_READ, 0);
	m.offset = off;
	m.length = size;
	r = qc_file_call(fs, f, &m, &rep);
	if (r < 0) {
		fuse_reply_err(req, -qc_file_error(f, r));
		return;
	}
	if (rep.msg.data.len > size) {
		/* More than asked for is a broken server, not data. */
		qft_err("READ of %zu bytes at %llu: the server sent %u bytes; "
			"failing the read with EIO", size,
			(unsigned long long)off, rep.msg.data.len);
		fuse_reply_err(req, EIO);
	} else {
		fuse_reply_buf(req, (const char *)rep.msg.data.p,
			       rep.msg.data.len);
	}
	qc_reply_free(&rep);
}

/*
 * Whether a read at `off` starts the data the server just said lies
 * before a hole (qc_ra_note_hole): cp --sparse reads such an extent
 * whole, so its stream starts at once instead of at the second read.
 */
static bool ra_extent_start(const struct qc_file *f, uint64_t off)
{
	return f->ra.hole_at && off == f->ra.data_from &&
	       off < f->ra.hole_at;
}

/* A stream from `off`.  File lock held. */
static void ra_start(struct qc_fs *fs, struct qc_file *f, uint64_t off)
{
	qft_debug("handle %llu: sequential reads, read-ahead from %llu",
		  (unsigned long long)f->nf.handle, (unsigned long long)off);
	f->ra.on = true;
	f->ra.eof = false;
	f->ra.end = off;
	f->ra.pos = off;
	if (f->ra.credit > qc_ra_limit(fs))
		f->ra.credit = qc_ra_limit(fs);
	f->ra.eaten = 0;
}

/*
 * Whether a read of [off, end) belongs to the read-ahead stream: it starts
 * one on the second read in a row that begins where the previous ended,
 * and stops it on a read further past its window than the window would
 * grow for it (random access).  Reads inside the window are accepted in
 * any order, since the kernel's parallel
 * read-ahead requests reach us in whatever order our threads take them.
 * For the same reason a read behind the window is no sign that the reader
 * left the stream: a late one of those parallel reads may fall in a chunk
 * dropped as skipped when a later one arrived first.  It is served on its
 * own and the stream goes on (a reader going backwards wastes no more
 * than what was asked for already, since only admitted reads ask for
 * more).  File lock held.
 */
bool qc_ra_admit(struct qc_fs *fs, struct qc_file *f, uint64_t off,
		 uint64_t end)
{
	qc_file_assert_locked(f);
	if (f->ra.on) {
		uint64_t lo = f->ra.head ? f->ra.head->off : f->ra.end;

		if (off < lo)
			return false;
		/* Ahead of the window, but no further than it would reach
		 * had the reader come that far: one of the kernel's parallel
		 * reads overtook its neighbours (the opening ones do, past
		 * the chunk OPEN brought).  Stopping would drop chunks those
		 * neighbours still need, which they then fetch again. */
		if (off > f->ra.end && off - f->ra.end > f->ra.credit) {
			qft_debug("handle %llu: read at %llu outside the "
				  "read-ahead window, stopped",
				  (unsigned long long)f->nf.handle,
				  (unsigned long long)off);
			qc_ra_stop(f);
			f->ra.next = end;
			f->ra.credit = QC_RA_CREDIT_START;
			if (!ra_extent_start(f, off))
				return false;
			ra_start(fs, f, off);
		}
	} else {
		bool seq = off == f->ra.next || ra_extent_start(f, off);

		f->ra.next = end;
		if (!seq)
			return false;
		ra_start(fs, f, off);
	}
	if (end > f->ra.pos)
		f->ra.pos = end;
	/* Chunks far behind the reader were skipped, not read. */
	while (f->ra.head &&
	       f->ra.head->off + f->ra.head->len + QC_RA_SKIPPED <= off)
		ra_unlink_head(f);
	return true;
}

/*
 * Adds chunks up to `ra_credit` past the reader and returns them, linked
 * by snext, for the caller to send once it dropped the lock.  What the
 * reader asked for is always requested; beyond it only within the budget
 * of all handles together.  File lock held.
 */
struct qc_ra_chunk *qc_ra_fill(struct qc_fs *fs, struct qc_file *f)
{
	uint64_t limit = qc_ra_limit(fs);
	uint64_t want = f->ra.pos + f->ra.credit;
	uint64_t budget = 2 * limit > QC_RA_TOTAL_MIN ?
		2 * limit : QC_RA_TOTAL_MIN;
	struct qc_ra_chunk *first = NULL, **tail = &first;
	uint64_t hole;

	qc_file_assert_locked(f);
	want = ra_hole_want(f, want);
	hole = f->ra.hole_at;
	while (!f->ra.eof && f->ra.end < want) {
		uint64_t len = QC_RA_CHUNK - f->ra.end % QC_RA_CHUNK;
		struct qc_ra_chunk *c;

		/* A chunk ends where the data does, and inside a hole asks
		 * for what the reader asked only. */
		if (hole && f->ra.end < hole && f->ra.end + len > hole)
			len = hole - f->ra.end;
		if (hole && f->ra.end >= hole && f->ra.end + len > want)
			len = want - f->ra.end;

		if (f->ra.end >= f->ra.pos &&
		    atomic_load(&fs->ra_bytes) + len > budget)
			break;
		c = calloc(1, sizeof(*c));
		if (!c)
			break;
		c->f = f;
		c->off = f->ra.end;
		c->len = (uint32_t)len;
		c->charged = (uint32_t)len;
		c->listed = true;
		atomic_fetch_add(&fs->ra_bytes, len);
		if (f->ra.tail)
			f->ra.tail->next = c;
		else
			f->ra.head = c;
		f->ra.tail = c;
		f->ra.end += len;
		qc_file_hold(f);
		*tail = c;
		tail = &c->snext;
	}
	return first;
}

/*
 * Records the outcome of chunk c's READ: its data (moved out of `rep`),
 * or its error.  File lock held.
 */
void qc_ra_complete(struct qc_ra_chunk *c, int err, struct qc_reply *rep)
{
	struct qc_file *f = c->f;

	qc_file_assert_locked(f);
	if (err == 0 && rep->msg.data.len > c->len) {
		qft_err("server sent %u bytes for a READ of %u",
			rep->msg.data.len, c->len);
		err = -EIO;
	}
	c->done = true;
	c->err = err;
	if (err == 0) {
		c->got = rep->msg.data.len;
		c->rep = *rep;
		memset(rep, 0, sizeof(*rep));
		/* The server answers short only at the end of the file. */
		if (c->got < c->len && c->listed)
			f->ra.eof = true;
	}
	/* Readers parked at the end of a file must not hold budget for
	 * data that never came. */
	atomic_fetch_sub(&f->fs->ra_bytes, c->charged - c->got);
	c->charged = c->got;
	ra_chunk_maybe_free(c);
}

void qc_ra_prime(struct qc_fs *fs, struct qc_file *f, uint32_t asked,
		 struct qc_reply *rep)
{
	uint32_t got = rep->msg.data.len;
	struct qc_ra_chunk *c;

	if (got > asked) {
		/* More than asked for is a broken server, not data. */
		qft_err("server sent %u bytes of a file with an OPEN that "
			"asked for %u; reading them again", got, asked);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->f = f;
	c->len = asked;
	c->got = got;
	c->charged = got;
	c->listed = true;
	c->done = true;
	c->rep = *rep;
	memset(rep, 0, sizeof(*rep));
	atomic_fetch_add(&fs->ra_bytes, got);
	pthread_mutex_lock(&f->lock);
	f->ra.head = f->ra.tail = c;
	f->ra.on = true;
	f->ra.eof = got < asked;
	f->ra.end = asked;
	f->ra.pos = 0;
	f->ra.eaten = 0;
	if (f->ra.credit > qc_ra_limit(fs))
		f->ra.credit = qc_ra_limit(fs);
	pthread_mutex_unlock(&f->lock);
}

static void ra_done(void *ctx, int err, struct qc_reply *rep)
{
	struct qc_ra_chunk *c = ctx;
	struct qc_file *f = c->f;

	/* Only full chunks: a short one ends the file, not the link's rate. */
	if (err == 0 && rep->msg.data.len == c->len)
		qc_bdp_sample(&f->fs->streams.down, c->sent_gen, c->sent_us, qc_bdp_now_us(),
			      c->len);
	pthread_mutex_lock(&f->lock);
	qc_ra_complete(c, err, rep);
	qc_file_async_done(f);
}

/* Sends the READs of chunks on handle `handle` of link `gen` (a chunk of
 * a link that is gone completes with -ENOTCONN). */
void qc_ra_send(struct qc_fs *fs, uint64_t gen, uint64_t handle,
		struct qc_ra_chunk *c)
{
	while (c) {
		/* Once sent, the chunk may be completed and freed. */
		struct qc_ra_chunk *next = c->snext;
		struct qft_msg m;

		qft_msg_init(&m, QFT_OP_READ, 0);
		m.handle = handle;
		m.offset = c->off;
		m.length = c->len;
		c->sent_us = qc_bdp_now_us();
		c->sent_gen = gen;
		(void)qc_call_async(fs->conn, gen, &m, ra_done, c);
		c = next;
	}
}

/*
 * Pins the chunks that cover [off, end) and returns how many, or 0 (and
 * pins nothing) when they do not cover it.  A chunk known to end the file
 * or to have failed covers everything after it.  File lock held.
 */
int qc_ra_pin(struct qc_file *f, uint64_t off, uint64_t end,
	      struct qc_ra_chunk **pinned)
{
	uint64_t pos = off;
	int n = 0;

	qc_file_assert_locked(f);
	for (struct qc_ra_chunk *c = f->ra.head; c && pos < end; c = c->next) {
		if (c->off + c->len <= pos)
			continue;
		if (c->off > pos || n == QC_RA_MAX_IOV)
			break;
		pinned[n++] = c;
		pos = c->off + c->len;
		if (c->done && (c->err || c->got < c->len))
			pos = end;
	}
	if (pos < end)
		return 0;
	for (int i = 0; i < n; i++)
		pinned[i]->pins++;
	return n;
}

/*
 * Points `iov` at the bytes of [off, end) in the pinned chunks (all done)
 * and counts them as consumed.  Returns the byte count, which is short
 * only where the file ends, or a chunk's error: a failed READ is never
 * passed off as end of file.  File lock held.
 */
ssize_t qc_ra_collect(struct qc_fs *fs, struct qc_file *f, uint64_t off,
		      uint64_t end, struct qc_ra_chunk **pinned, int npin,
		      struct iovec *iov, int *niov)
{
	uint64_t pos = off, limit;

	qc_file_assert_locked(f);
	*niov = 0;
	for (int i = 0; i < npin && pos < end; i++) {
		struct qc_ra_chunk *c = pinned[i];
		uint64_t in = pos - c->off, n;

		if (c->err) {
			qc_ra_stop(f);
			return c->err;
		}
		if (in >= c->got)
			break;
		n = c->got - in < end - pos ? c->got - in : end - pos;
		iov[*niov].iov_base = (void *)(c->rep.msg.data.p + in);
		iov[*niov].iov_len = n;
		(*niov)++;
		c->served += (uint32_t)n;
		pos += n;
		if (c->got < c->len)
			break;
	}
	/* Consumed chunks go; each credit's worth consumed doubles it. */
	while (f->ra.head && f->ra.head->done && !f->ra.head->err &&
	       f->ra.head->served >= f->ra.head->got) {
		f->ra.eaten += f->ra.head->len;
		ra_unlink_head(f);
	}
	limit = qc_ra_limit(fs);
	if (f->ra.on && f->ra.eaten >= f->ra.credit && f->ra.credit < limit) {
		f->ra.credit = 2 * f->ra.credit < limit ? 2 * f->ra.credit : limit;
		f->ra.eaten = 0;
	}
	return (ssize_t)(pos - off);
}

void qc_ra_unpin(struct qc_ra_chunk **pinned, int npin)
{
	for (int i = 0; i < npin; i++) {
		pinned[i]->pins--;
		ra_chunk_maybe_free(pinned[i]);
	}
}

void qc_ra_read(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		size_t size, off_t off)
{
	struct qc_ra_chunk *pinned[QC_RA_MAX_IOV], *fresh = NULL;
	struct iovec iov[QC_RA_MAX_IOV];
	uint64_t start = (uint64_t)off, end;
	int npin = 0, niov = 0;
	uint64_t gen, handle;
	ssize_t got;
	int r;

	/* The kernel never asks for more than max_read; a larger request
	 * would just see a short read. */
	if (size > QFT_MAX_DATA)
		size = QFT_MAX_DATA;
	end = start + size;
	if (size == 0 || fs->readahead == 0 || off < 0) {
		read_plain(req, fs, f, size, start);
		return;
	}
	if (ra_in_hole(f, start, end)) {
		fuse_reply_buf(req, ra_zeros, size);
		return;
	}
	/* A stream only on a live handle (re-opened after a reconnect). */
	r = qc_file_handle(fs, f, &gen, &handle);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (qc_ra_admit(fs, f, start, end)) {
		fresh = qc_ra_fill(fs, f);
		npin = qc_ra_pin(f, start, end, pinned);
	}
	gen = f->gen;
	handle = f->nf.handle;
	pthread_mutex_unlock(&f->lock);
	qc_ra_send(fs, gen, handle, fresh);
	if (npin == 0) {
		read_plain(req, fs, f, size, start);
		return;
	}

	pthread_mutex_lock(&f->lock);
	for (int i = 0; i < npin; i++)
		while (!pinned[i]->done)
			pthread_cond_wait(&f->cond, &f->lock);
	got = qc_ra_collect(fs, f, start, end, pinned, npin, iov, &niov);
	if (got > 0) {
		/* Once the kernel has its reply it may release the file while
		 * we still unpin: hold it like an async call. */
		qc_file_hold(f);
		pthread_mutex_unlock(&f->lock);
		fuse_reply_iov(req, iov, niov);
		pthread_mutex_lock(&f->lock);
	}
	qc_ra_unpin(pinned, npin);
	if (got > 0) {
		qc_file_async_done(f);
		return;
	}
	pthread_mutex_unlock(&f->lock);
	if (got < 0 && got != -ENOTCONN)
		fuse_reply_err(req, -qc_file_error(f, (int)got));
	else
		/* Nothing at all where the stream saw the end: ask the
		 * server, in case the file grew since.  Or the chunk was
		 * lost with its link: read it again on the handle re-opened
		 * (or fail with EIO when that cannot be). */
		read_plain(req, fs, f, size, start);
}
