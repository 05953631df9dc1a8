// SPDX-License-Identifier: MIT
/* Open files: making them with their features, the start of every open,
 * and flush, fsync and release above commit=async (see file.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "fs/commit.h"
#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/handle.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"
#include "fs/readahead.h"
#include "fs/steps.h"

/* Lock held: what was read ahead through the handle went with it. */
static void file_handle_gone(struct qc_file *f)
{
	qc_ra_stop(f);
}

static void file_fini(struct qc_file *f)
{
	qc_ra_stop(f);
	qc_dir_ahead_drop(&f->ahead);
}

static const struct qc_file_hooks file_hooks = {
	.handle_gone = file_handle_gone,
	.fini = file_fini,
};

struct qc_file *qc_file_new(struct qc_fs *fs, bool dir, int oflags)
{
	struct qc_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	qc_file_init(f, fs, dir, oflags, &file_hooks);
	qc_ra_init(&f->ra);
	return f;
}

void qc_file_release(struct qc_fs *fs, struct qc_file *f)
{
	if (qc_commit_release(fs, f))
		return;
	qc_step_release(fs, f);
	qc_file_release_now(fs, f);
}

int qc_file_begin(struct qc_fs *fs, bool dir, int oflags,
		  struct qc_file **fp, uint64_t *gen, uint64_t *handle)
{
	struct qc_file *f = qc_file_new(fs, dir, oflags);
	int r;

	if (!f)
		return -ENOMEM;
	r = qc_conn_wait(fs->conn, gen);
	if (r == 0)
		r = qc_handle_alloc(fs->conn, *gen, handle);
	if (r < 0) {
		qc_file_free(f);
		return qc_conn_user_err(r);
	}
	/* Not shared yet: whoever fails the open frees the number (and f)
	 * without looking at it. */
	qc_file_bind(f, *gen, *handle);
	*fp = f;
	return 0;
}

/* A FLUSH or FSYNC sent when f had made `mods` changes succeeded. */
static void file_durable(struct qc_file *f, uint64_t mods)
{
	pthread_mutex_lock(&f->lock);
	qc_file_note_durable(f, mods);
	pthread_mutex_unlock(&f->lock);
}

int qc_file_flush(struct qc_fs *fs, struct qc_file *f)
{
	struct qc_file_mark mk;
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t agen;
	struct qn_node *n;
	int r, werr, failed;

	qc_file_mark(f, true, &mk);
	/* close() of a file that was only read costs no round trip (and
	 * does not fail, even when the file went stale). */
	if (!mk.written && mk.err == 0 && !mk.pending)
		return 0;
	if (mk.failed) {
		/* Reported here (and by every later use): not a write error
		 * left for nobody when the file is freed. */
		pthread_mutex_lock(&f->lock);
		(void)qc_file_take_err(f);
		pthread_mutex_unlock(&f->lock);
		return mk.failed;
	}
	if (fs->commit.on)
		return qc_commit_close(fs, f);
	if (!mk.written) {
		/* Pipelined steps only (a file created, or its mode changed,
		 * and no data): their answers are the outcome. */
		qc_stat_inc(&fs->stats, QC_STAT_CLOSE_WAIT);
		werr = qc_file_collect(f, mk.issued, true);
		pthread_mutex_lock(&f->lock);
		failed = f->failed;
		pthread_mutex_unlock(&f->lock);
		return failed ? failed : werr;
	}
	qc_stat_inc(&fs->stats, QC_STAT_CLOSE_WAIT);
	n = qn_file_node(&fs->nodes, &f->nf);
	agen = qn_attr_gen(&fs->nodes, n);
	qft_msg_init(&m, QFT_OP_FLUSH, 0);
	m.opflags = fs->commit_none ? QFT_FLUSH_NOSYNC : 0;
	r = qc_file_call(fs, f, &m, &rep);
	if (r == 0) {
		/* The kernel drops the attributes of a file it wrote; this
		 * answer has them as they are now (rsync asks right after
		 * close). */
		if (fs->attr_timeout > 0)
			qn_note_fresh(&fs->nodes, n, &rep.msg.attr, agen,
				      qc_fs_attr_until(fs));
		qc_reply_free(&rep);
	}
	/* Reported here, so cleared, as the server's FLUSH clears its own. */
	werr = qc_file_collect(f, mk.issued, true);
	if (r == 0 && werr == 0)
		file_durable(f, mk.mods);
	return werr ? werr : r;
}

int qc_file_fsync(struct qc_fs *fs, struct qc_file *f, int datasync)
{
	struct qc_file_mark mk;
	struct qc_reply rep;
	struct qft_msg m;
	int r, werr;

	qc_file_mark(f, false, &mk);
	qft_msg_init(&m, QFT_OP_FSYNC, 0);
	m.opflags = datasync ? QFT_FSYNC_DATASYNC : 0;
	r = qc_file_call(fs, f, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Kept for the flush at close as well. */
	werr = qc_file_collect(f, mk.issued, false);
	if (r == 0 && werr == 0)
		file_durable(f, mk.mods);
	return werr ? werr : r;
}
