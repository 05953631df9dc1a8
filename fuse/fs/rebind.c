// SPDX-License-Identifier: MIT
/* Open files carried over to a new server (see rebind.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/handle.h"
#include "fs/node.h"
#include "fs/rebind.h"
#include "fs/steps.h"
#include "log.h"
#include "msg.h"
#include "protocol.h"

/* What the rebind of one file needs, read under its lock. */
struct state {
	uint64_t handle;
	int oflags;
	bool dir;
	bool dirty;             /* written data may not be durable yet */
	bool changed_it;        /* the handle changed size or mtime */
	bool appends;           /* O_APPEND with changes in flight */
	uint64_t size_bound;    /* what its writes may have made the size */
};

/* Fails f for good with `err`, saying why. */
static void fail(struct qc_fs *fs, struct qc_file *f, const char *path,
		 int err, const char *why)
{
	pthread_mutex_lock(&f->lock);
	qc_file_fail(f, err);
	pthread_mutex_unlock(&f->lock);
	qft_err("%s: %s; the open file fails with %s", path[0] ? path : "/",
		why, err == -EIO ? "EIO" : strerror(-err));
}

/* Whether OPEN's attributes `a` show the file f had open (rebind.h). */
static bool same_file(struct qc_fs *fs, struct qn_node *n,
		      const struct state *st, const struct qft_attr *a)
{
	struct qft_attr known;
	bool same = true;

	if (qn_replaced(&fs->nodes, n, a, true))
		return false;
	if (st->dirty) {
		/* Its unanswered WRITEs may or may not have landed, but
		 * nothing it wrote reaches beyond what the kernel was told;
		 * more means someone else wrote too.  The attributes the
		 * kernel is told stay as they are. */
		uint64_t bound = st->size_bound;

		if (qn_get_attr(&fs->nodes, n, &known) && known.size > bound)
			bound = known.size;
		return a->size <= bound;
	}
	qn_note_attr(&fs->nodes, n, a, st->changed_it ? NULL : &same);
	return same;
}

/* One file of link `gen` (rebind.h).  False when the carry's link
 * failed: the walk stops, the carry is tried again. */
static bool rebind_one(struct qc_fs *fs, struct qc_file *f, uint64_t gen,
		       struct qc_carry *cy)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qn_node *n;
	struct qft_msg m;
	struct state st;
	int r;

	pthread_mutex_lock(&f->lock);
	if (f->gen != gen || f->failed || f->closing || !f->nf.handle) {
		pthread_mutex_unlock(&f->lock);
		return true;
	}
	st.handle = f->nf.handle;
	st.oflags = f->oflags;
	st.dir = f->dir;
	st.dirty = qc_file_unsynced(f);
	st.changed_it = f->mods != 0;
	st.appends = (f->oflags & O_APPEND) && f->issued != f->answered;
	st.size_bound = f->dir ? 0 : qc_step_size_bound(f);
	pthread_mutex_unlock(&f->lock);

	/*
	 * Not attached to a node: opening (its OPEN, unanswered or not yet
	 * sent, binds it on the new server; an OPEN answered just before
	 * the server died and not attached yet is the one case that then
	 * meets an unbound handle, EBADF) or released (its CLOSE is all
	 * that is left of it, and finds nothing to close).
	 */
	n = qn_file_node(&fs->nodes, &f->nf);
	if (!n)
		return true;
	/* Its locks died with the old server (lock.h). */
	if (qc_lock_file_held(&fs->locks, f)) {
		qc_carry_drop(cy, st.handle);
		fail(fs, f, qn_path(&fs->nodes, n, NULL, path) < 0 ? "" : path,
		     -EIO, "the locks taken through it were lost with its "
		     "server");
		return true;
	}
	if (qn_path(&fs->nodes, n, NULL, path) < 0) {
		qc_carry_drop(cy, st.handle);
		fail(fs, f, "(a removed file)", st.dirty ? -EIO : -ESTALE,
		     "it has no name to open it by on the new server");
		return true;
	}
	if (st.appends) {
		qc_carry_drop(cy, st.handle);
		fail(fs, f, path, -EIO, "appends in flight when its server "
		     "died cannot be sent again (they could land twice)");
		return true;
	}
	qft_msg_init(&m, st.dir ? QFT_OP_OPENDIR : QFT_OP_OPEN, 0);
	m.handle = st.handle;
	/* As whoever opened it (immutable since), on a mount that names
	 * its callers; the carry drops it where the link does not. */
	if (f->has_opener) {
		m.flags |= QFT_F_CRED;
		m.cred = f->opener;
	}
	qc_set_str(&m.path, path);
	if (!st.dir)
		m.opflags = qc_file_oflags(fs, st.oflags &
					   ~(O_CREAT | O_EXCL | O_TRUNC));
	r = qc_carry_open(cy, &m, &rep);
	if (r == -EALREADY)
		return true;
	if (r == -ENOTCONN)
		return false;
	if (r < 0) {
		fail(fs, f, path, st.dirty ? -EIO : r == -ENOENT ? -ESTALE : r,
		     "cannot open it again on the new server");
		return true;
	}
	/* OPENDIR answers no attributes: a directory just opens again. */
	if (!st.dir && !same_file(fs, n, &st, &rep.msg.attr)) {
		qc_reply_free(&rep);
		qc_carry_drop(cy, st.handle);
		fail(fs, f, path, st.dirty ? -EIO : -ESTALE,
		     "it changed on the server while its server was replaced");
		return true;
	}
	qc_reply_free(&rep);
	qft_debug("%s: open again on the new server", path[0] ? path : "/");
	return true;
}

void qc_rebind_all(void *ctx, uint64_t gen, struct qc_carry *cy)
{
	struct qc_fs *fs = ctx;
	struct qc_file **all;
	size_t n;

	all = qc_file_hold_gen(fs, gen, &n);
	if (!all) {
		qft_err("out of memory: the open files cannot be carried over "
			"to the new server; they fail with EIO");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!rebind_one(fs, all[i], gen, cy))
			break;
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&all[i]->lock);
		qc_file_async_done(all[i]);
	}
	free(all);
}
