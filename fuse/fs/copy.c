// SPDX-License-Identifier: MIT
/* Server-side copy and holes (see copy.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "fs/copy.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/node.h"
#include "fs/readahead.h"
#include "fs/stats.h"
#include "msg.h"
#include "net/conn.h"
#include "protocol.h"

/*
 * Waits until the changes sent through f (WRITEs behind the window,
 * pipelined steps) are answered: 0, or the error one of them met, which
 * stays sticky for the next write, fsync or close to report as well.
 */
static int settle(struct qc_file *f)
{
	struct qc_file_mark mk;

	qc_file_mark(f, false, &mk);
	if (mk.failed)
		return mk.failed;
	if (!mk.pending)
		return mk.err;
	return qc_file_collect(f, mk.issued, false);
}

/*
 * The link both files' handles are numbers of, with the handles: -EAGAIN
 * when one was re-opened on another link meanwhile (the caller asks
 * again).
 */
static int both_handles(struct qc_fs *fs, struct qc_file *in,
			struct qc_file *out, uint64_t *gen,
			uint64_t *hin, uint64_t *hout)
{
	uint64_t gen2;
	int r;

	if ((r = qc_file_handle(fs, in, gen, hin)) < 0 ||
	    (r = qc_file_handle(fs, out, &gen2, hout)) < 0)
		return r;
	return *gen == gen2 ? 0 : -EAGAIN;
}

int qc_copy_range(struct qc_fs *fs, struct qc_file *in, uint64_t off_in,
		  struct qc_file *out, uint64_t off_out, uint64_t len,
		  uint64_t *copied)
{
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen = 0;
	int r = -EIO;

	*copied = 0;
	if (len > QFT_MAX_COPY)
		len = QFT_MAX_COPY;
	if ((r = settle(in)) < 0 || (out != in && (r = settle(out)) < 0))
		return r;
	qft_msg_init(&m, QFT_OP_COPY, 0);
	m.offset = off_in;
	m.offset2 = off_out;
	m.length = len;
	for (int tries = 0; tries < 3; tries++) {
		r = both_handles(fs, in, out, &gen, &m.handle, &m.handle2);
		if (r == -EAGAIN)
			continue;
		if (r < 0)
			return r;
		/* A server that does not know COPY would close on it; the
		 * kernel copies through reads and writes instead. */
		if (!(qc_conn_features(fs->conn, gen) & QFT_FEAT_COPY))
			return -EOPNOTSUPP;
		/* What the next flush must make durable, and attributes
		 * that change under the kernel's feet. */
		qc_file_changed(out, true);
		qn_file_attr_stale(&fs->nodes, &out->nf);
		r = qc_call_gen(fs->conn, gen, &m, &rep);
		if (r != -ENOTCONN)
			break;
	}
	if (r == -ENOTCONN)
		r = -EIO;
	/* Even a failed copy may have written part of the range: the
	 * destination's read-ahead holds bytes from before. */
	qc_ra_invalidate_file(fs, out);
	if (r < 0)
		return qc_file_error(out, qc_conn_user_err(r));
	if (rep.msg.count > len) {
		qc_reply_free(&rep);
		return -EIO;
	}
	*copied = rep.msg.count;
	/* The size and mtime the next open compares its pages with. */
	qn_file_note_attr(&fs->nodes, &out->nf, &rep.msg.attr, false);
	qc_reply_free(&rep);
	qc_stat_inc(&fs->stats, QC_STAT_COPIES);
	qc_stat_add(&fs->stats, QC_STAT_COPIED, *copied);
	return 0;
}

int qc_copy_seek_solid(uint64_t size, uint64_t off, bool hole,
		       uint64_t *res)
{
	if (off >= size)
		return -ENXIO;
	*res = hole ? size : off;
	return 0;
}

/* What a file system without holes answers, from the server's size. */
static int seek_by_size(struct qc_fs *fs, struct qc_file *f, uint64_t off,
			bool hole, uint64_t *res)
{
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t size;
	int r;

	qft_msg_init(&m, QFT_OP_FSTAT, 0);
	r = qc_file_call(fs, f, &m, &rep);
	if (r < 0)
		return qc_file_error(f, qc_conn_user_err(r));
	size = rep.msg.attr.size;
	qc_reply_free(&rep);
	return qc_copy_seek_solid(size, off, hole, res);
}

/* A SEEK_DATA sent after a SEEK_HOLE found a hole at `hole`. */
struct hole_probe {
	struct qc_file *f;
	uint64_t hole;
	uint64_t until;         /* the answer holds until then */
	uint64_t drops;         /* qc_ra.drops when it was sent */
};

static void probe_done(void *ctx, int err, struct qc_reply *rep)
{
	struct hole_probe *p = ctx;
	struct qc_file *f = p->f;

	pthread_mutex_lock(&f->lock);
	if (err == 0)
		qc_ra_note_seek(f, false, p->hole, rep->msg.offset,
				rep->msg.offset2, p->until, p->drops);
	qc_file_async_done(f);
	free(p);
}

/*
 * Asks where the hole at `hole` ends, not waiting: cp --sparse reads the
 * data before it next, and the kernel's read-ahead runs past its end
 * into the hole; with the answer those reads are zeros answered here
 * (readahead.h, qc_ra.zero_*), and cp's next SEEK_DATA and SEEK_HOLE
 * need no round trip (qc_ra.ext_*).  A hole that runs to the end of the
 * file gets no answer worth keeping (ENXIO).
 */
static void probe_hole(struct qc_fs *fs, struct qc_file *f, uint64_t gen,
		       uint64_t handle, uint64_t hole)
{
	struct hole_probe *p;
	struct qft_msg m;
	bool known;

	pthread_mutex_lock(&f->lock);
	known = f->ra.zero_to && f->ra.zero_from <= hole &&
		hole < f->ra.zero_to;
	pthread_mutex_unlock(&f->lock);
	if (known || !(p = malloc(sizeof(*p))))
		return;
	p->f = f;
	p->hole = hole;
	p->until = qc_fs_attr_until(fs);
	qft_msg_init(&m, QFT_OP_SEEK, 0);
	m.handle = handle;
	m.offset = hole;
	m.opflags = QFT_SEEK_DATA;
	pthread_mutex_lock(&f->lock);
	qc_file_hold(f);
	/* A write sent from now on drops the read-ahead after it was sent
	 * (qc_ra_invalidate), so an answer from before it is not kept. */
	p->drops = f->ra.drops;
	pthread_mutex_unlock(&f->lock);
	/* On failure probe_done has run already. */
	(void)qc_call_async(fs->conn, gen, &m, probe_done, p);
}

/*
 * After SEEK_HOLE from `off` found the hole at `at`: a reader of the data
 * up to it (cp --sparse) need not be sent the zeros after it.
 */
static void after_hole(struct qc_fs *fs, struct qc_file *f, uint64_t gen,
		       uint64_t handle, uint64_t off, uint64_t at)
{
	if (at <= off)
		return;
	qc_ra_note_hole(f, off, at);
	if (fs->attr_timeout > 0)
		probe_hole(fs, f, gen, handle, at);
}

/* The answer the replies of the last attr_timeout give, if any. */
static bool seek_known(struct qc_file *f, uint64_t off, bool hole,
		       uint64_t *res)
{
	bool known;

	pthread_mutex_lock(&f->lock);
	known = qc_ra_seek_known(f, hole, off, qc_now_ns(), res);
	pthread_mutex_unlock(&f->lock);
	return known;
}

int qc_copy_seek(struct qc_fs *fs, struct qc_file *f, uint64_t off,
		 bool hole, uint64_t *res)
{
	uint64_t gen, until = 0, drops = 0;
	struct qc_reply rep;
	struct qft_msg m;
	int r = -EIO;

	qft_msg_init(&m, QFT_OP_SEEK, 0);
	m.offset = off;
	m.opflags = hole ? QFT_SEEK_HOLE : QFT_SEEK_DATA;
	for (int tries = 0; tries < 3; tries++) {
		if ((r = qc_file_handle(fs, f, &gen, &m.handle)) < 0)
			return r;
		if (!(qc_conn_features(fs->conn, gen) & QFT_FEAT_HOLES))
			return seek_by_size(fs, f, off, hole, res);
		/* cp asks SEEK_HOLE from the data SEEK_DATA found, and
		 * SEEK_DATA from the hole after it: both often told. */
		if (seek_known(f, off, hole, res)) {
			qc_stat_inc(&fs->stats, QC_STAT_SEEKS_LOCAL);
			if (hole)
				after_hole(fs, f, gen, m.handle, off, *res);
			return 0;
		}
		pthread_mutex_lock(&f->lock);
		drops = f->ra.drops;
		pthread_mutex_unlock(&f->lock);
		until = qc_fs_attr_until(fs);
		r = qc_call_gen(fs->conn, gen, &m, &rep);
		if (r != -ENOTCONN)
			break;
	}
	if (r == -ENOTCONN)
		r = -EIO;
	if (r < 0)
		return qc_file_error(f, qc_conn_user_err(r));
	*res = rep.msg.offset;
	pthread_mutex_lock(&f->lock);
	qc_ra_note_seek(f, hole, off, *res, rep.msg.offset2, until, drops);
	pthread_mutex_unlock(&f->lock);
	qc_reply_free(&rep);
	if (hole)
		after_hole(fs, f, gen, m.handle, off, *res);
	qc_stat_inc(&fs->stats, QC_STAT_SEEKS);
	return 0;
}
