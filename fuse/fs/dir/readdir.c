// SPDX-License-Identifier: MIT
/*
 * The kernel's readdir on an open directory (struct qc_dir_ahead): from
 * a snapshot of a cached listing, or from READDIR replies read ahead,
 * collecting a listing for the cache on the way (see dircache.h).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/dir/internal.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/hints.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"

/* What a readdir served from the cache hands out: a copy of a listing
 * (with "." and ".." first), so later changes do not move its cookies.
 * Made under the listing lock, read-only after; the open directory's
 * (struct qc_dir_ahead), no lock. */
struct snap_ent {
	const char *name;
	uint64_t ino;
	uint32_t type;
	bool attr_ok;           /* attr trusted until attr_until */
	struct qft_attr attr;
	uint64_t attr_until;
	uint64_t name_until;    /* of the name itself (qc_dir_name_until()) */
};

struct qc_dir_snap {
	size_t n;
	uint64_t names_until;
	uint64_t xgen;
	struct snap_ent *e;
	char *pool;             /* the names */
};

/* ---- readdir from the cache ---- */

static void snap_free(struct qc_dir_snap *s)
{
	if (!s)
		return;
	free(s->e);
	free(s->pool);
	free(s);
}

/* A snapshot of the valid, complete listing of `dir` (walked now), or
 * NULL when there is none (or no memory). */
static struct qc_dir_snap *snapshot(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	uint64_t now = qc_now_ns();
	struct qc_dir_snap *s = NULL;
	struct listing *l;
	size_t pool = 5, k = 0, pos = 0;	/* ".\0..\0" */

	pthread_mutex_lock(&dc->lock);
	l = qc_dir_valid_listing(fs, dir, now);
	/* Names of pipelined CREATEs not answered yet have no inode, and a
	 * name changed on the server may be a new one: not complete. */
	if (!l || qc_dir_resolve_predicted(fs, l) != 0 || l->nstale)
		goto out_unlock;
	for (size_t i = 0; i < l->nslots; i++)
		if (l->slots[i])
			pool += strlen(l->slots[i]->name) + 1;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out_unlock;
	s->e = calloc(l->live + 2, sizeof(*s->e));
	s->pool = malloc(pool);
	if (!s->e || !s->pool) {
		snap_free(s);
		s = NULL;
		goto out_unlock;
	}
	s->names_until = l->leased ? NEVER : l->names_until;
	s->xgen = qc_hint_xattr_gen(fs);
	memcpy(s->pool, ".\0..", 5);
	s->e[0].name = s->pool;
	s->e[0].ino = l->dino;
	s->e[0].type = QFT_S_IFDIR;
	s->e[1].name = s->pool + 2;
	s->e[1].ino = l->pino;
	s->e[1].type = QFT_S_IFDIR;
	pos = 5;
	k = 2;
	for (size_t i = 0; i < l->nslots; i++) {
		const struct dent *e = l->slots[i];
		struct snap_ent *se;
		size_t len;

		if (!e)
			continue;
		se = &s->e[k++];
		len = strlen(e->name) + 1;
		memcpy(s->pool + pos, e->name, len);
		se->name = s->pool + pos;
		pos += len;
		se->ino = e->attr.ino;
		se->type = e->attr.mode & QFT_S_IFMT;
		se->attr = e->attr;
		se->attr_ok = qc_dir_attr_ok(fs, l, e, now);
		se->attr_until = qc_dir_attr_until(fs, l, e);
		se->name_until = qc_dir_name_until(fs, l, e);
	}
	s->n = k;
	l->walked_ns = now;
	qc_dir_touch(dc, l);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	return s;
}

/*
 * Fills `buf` from snapshot entries from index `off` on.  Entries with
 * trusted attributes become nodes (one kernel lookup each) in a
 * READDIRPLUS; the others go without (node id 0: no dentry), so that the
 * kernel looks them up.  Looked-up nodes are listed in `counted`.
 */
static size_t fill_snap(fuse_req_t req, struct qc_fs *fs, struct qn_node *dir,
			const struct qc_dir_snap *s, uint64_t off, bool plus,
			char *buf, size_t size, struct qn_node **counted,
			size_t *ncounted, uint64_t *next)
{
	uint64_t now = qc_now_ns();
	size_t used = 0;

	*ncounted = 0;
	for (uint64_t i = off; i < s->n; i++) {
		const struct snap_ent *se = &s->e[i];
		size_t need;

		if (plus) {
			struct fuse_entry_param e;
			struct qn_node *n;

			need = fuse_add_direntry_plus(req, NULL, 0, se->name,
						      NULL, 0);
			if (need > size - used)
				break;
			memset(&e, 0, sizeof(e));
			if (se->attr_ok && now < se->attr_until &&
			    now < s->names_until) {
				n = qn_lookup(&fs->nodes, dir, se->name,
					      &se->attr);
				if (n) {
					counted[(*ncounted)++] = n;
					qc_hint_noxattr_note(fs, n, &se->attr,
							     s->xgen);
					qc_entry_fill(fs, &e, n, &se->attr);
					e.entry_timeout = qc_dir_remaining(
						se->name_until, now,
						fs->entry_timeout);
					e.attr_timeout = qc_dir_remaining(
						se->attr_until, now,
						fs->attr_timeout);
				}
			}
			if (e.ino == 0) {
				e.attr.st_ino = qn_shown_child_ino(
					&fs->nodes, dir, se->name, se->ino);
				e.attr.st_mode = se->type;
			}
			fuse_add_direntry_plus(req, buf + used, size - used,
					       se->name, &e, (off_t)(i + 1));
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = qn_shown_child_ino(&fs->nodes, dir,
						       se->name, se->ino);
			st.st_mode = se->type;
			need = fuse_add_direntry(req, buf + used, size - used,
						 se->name, &st, (off_t)(i + 1));
			if (need > size - used)
				break;
		}
		used += need;
		*next = i + 1;
	}
	return used;
}

static void reply_snap(fuse_req_t req, struct qc_fs *fs, struct qn_node *dir,
		       const struct qc_dir_snap *s, size_t size, uint64_t off,
		       bool plus)
{
	struct qn_node **counted = NULL;
	size_t used, ncounted = 0;
	uint64_t next = off;
	char *buf;

	buf = malloc(size ? size : 1);
	if (plus)
		counted = calloc(s->n + 1, sizeof(*counted));
	if (!buf || (plus && !counted)) {
		free(buf);
		free(counted);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	used = fill_snap(req, fs, dir, s, off, plus, buf, size, counted,
			 &ncounted, &next);
	if (fuse_reply_buf(req, buf, used) != 0) {
		/* The kernel never saw these entries: undo their lookups. */
		for (size_t i = 0; i < ncounted; i++)
			qn_forget(&fs->nodes, counted[i], 1);
	}
	free(counted);
	free(buf);
}
/* ---- readdir from the server ---- */

void qc_dir_ahead_drop(struct qc_dir_ahead *a)
{
	if (a->valid)
		qc_reply_free(&a->rep);
	snap_free(a->snap);
	qc_dir_build_free(a->build);
	memset(a, 0, sizeof(*a));
}

/* Forgets the server reply read ahead (not the snapshot or collection). */
static void ahead_reply_drop(struct qc_dir_ahead *a)
{
	if (a->valid)
		qc_reply_free(&a->rep);
	a->valid = false;
	a->eof = false;
	a->pos = 0;
	memset(&a->rep, 0, sizeof(a->rep));
}

/*
 * Fills `buf` from a READDIR reply (with attributes when `srv_plus`).
 * With `plus`, every entry handed to the kernel with a node id counts one
 * lookup, so nodes are made only for the entries that fit, and "." and
 * ".." get node id 0 (no dentry).  The looked-up nodes are listed in
 * `counted` so a lost reply can undo them.
 */
static size_t fill_dir(fuse_req_t req, struct qc_fs *fs, fuse_ino_t ino,
		       const struct qft_blob *data, bool srv_plus, bool plus,
		       uint64_t xgen, char *buf, size_t size,
		       struct qn_node **counted, size_t *ncounted,
		       size_t *consumed, uint64_t *last_off)
{
	struct qft_dirent d;
	struct qcur c;
	size_t used = 0;

	*ncounted = 0;
	*consumed = 0;
	qcur_init(&c, data->p, data->len);
	while (c.left && qft_dirent_decode(&c, &d, srv_plus) == 0) {
		size_t need;

		if (plus) {
			struct fuse_entry_param e;

			need = fuse_add_direntry_plus(req, NULL, 0, d.name.s,
						      NULL, 0);
			if (need > size - used)
				break;
			memset(&e, 0, sizeof(e));
			if (d.has_attr && !qc_dir_is_dot(d.name.s)) {
				struct qn_node *n;

				n = qn_lookup(&fs->nodes, qc_fs_node(fs, ino),
					      d.name.s, &d.attr);
				if (n) {
					counted[(*ncounted)++] = n;
					qc_hint_noxattr_note(fs, n, &d.attr, xgen);
					qc_entry_fill(fs, &e, n, &d.attr);
				}
			}
			if (e.ino == 0) {
				e.attr.st_ino = qn_shown_child_ino(
					&fs->nodes, qc_fs_node(fs, ino),
					d.name.s, d.ino);
				e.attr.st_mode = d.type;
			}
			fuse_add_direntry_plus(req, buf + used, size - used,
					       d.name.s, &e, (off_t)d.off);
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = qn_shown_child_ino(&fs->nodes,
						       qc_fs_node(fs, ino),
						       d.name.s, d.ino);
			st.st_mode = d.type;
			need = fuse_add_direntry(req, buf + used, size - used,
						 d.name.s, &st, (off_t)d.off);
			if (need > size - used)
				break;
		}
		used += need;
		*consumed = data->len - c.left;
		*last_off = d.off;
	}
	return used;
}

/*
 * Whether the kernel's readdir at `off` continues the listing `a` holds,
 * with the entries it needs and attributes still fresh enough.
 */
static bool ahead_usable(const struct qc_dir_ahead *a, uint64_t off, bool plus)
{
	return a->valid && (a->plus || !plus) && a->next == off &&
	       qc_now_ns() < a->until &&
	       (a->pos < a->rep.msg.data.len || a->eof);
}

static bool complete_listing(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;
	bool ok;

	pthread_mutex_lock(&dc->lock);
	l = qc_dir_valid_listing(fs, dir, qc_now_ns());
	ok = l && !l->nstale;
	pthread_mutex_unlock(&dc->lock);
	return ok;
}

bool qc_dir_open_lazily(struct qc_fs *fs, struct qn_node *dir)
{
	if (!qc_dir_cache_on(fs))
		return false;
	if (complete_listing(fs, dir))
		return true;
	/* The opendir of a walk comes before its readdir: scan now. */
	qc_dir_maybe_scan(fs, dir);
	return complete_listing(fs, dir);
}

/* The OPENDIR a lazily opened directory skipped, now that a readdir
 * needs the server. */
static int open_now(struct qc_fs *fs, struct qc_file *f, struct qn_node *dir)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen, h;
	int r;

	/* An FSYNC on it may have opened it already (qc_file_handle). */
	pthread_mutex_lock(&f->lock);
	gen = f->gen;
	pthread_mutex_unlock(&f->lock);
	if (gen) {
		f->ahead.lazy = false;
		return 0;
	}
	r = qn_path(&fs->nodes, dir, NULL, path);
	if (r < 0)
		return r;
	r = qc_conn_wait(fs->conn, &gen);
	if (r == 0)
		r = qc_handle_alloc(fs->conn, gen, &h);
	if (r < 0)
		return qc_conn_user_err(r);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, h);
		return qc_file_open_error(fs, dir, path, r);
	}
	qc_reply_free(&rep);
	qc_file_bind(f, gen, h);
	f->ahead.lazy = false;
	return 0;
}

void qc_dir_ahead_lazy(struct qc_file *f)
{
	assert(f->dir && !f->gen);
	f->ahead.lazy = true;
}

void qc_dir_readdir(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		    fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct qc_dir_ahead *a = &f->ahead;
	struct qn_node *dir = qc_fs_node(fs, ino);
	struct qn_node **counted = NULL;
	size_t used, ncounted = 0, consumed = 0;
	uint64_t last_off = (uint64_t)off;
	bool caching = qc_dir_cache_on(fs);
	struct qft_blob rest;
	struct qft_msg m;
	char *buf = NULL;
	int r, n;

	if (size > QFT_MAX_READDIR)
		size = QFT_MAX_READDIR;
	if (off == 0 && caching) {
		/* A new listing (or a rewind): from the cache if it can. */
		snap_free(a->snap);
		a->snap = snapshot(fs, dir);
		if (!a->snap) {
			qc_dir_maybe_scan(fs, dir);
			a->snap = snapshot(fs, dir);
		}
		if (a->snap)
			atomic_fetch_add(&qc_dir_of(fs)->readdirs_local, 1);
	} else if (off == 0) {
		snap_free(a->snap);
		a->snap = NULL;
	}
	if (a->snap) {
		reply_snap(req, fs, dir, a->snap, size, (uint64_t)off, plus);
		return;
	}
	if (!ahead_usable(a, (uint64_t)off, plus)) {
		ahead_reply_drop(a);
		if (a->lazy && (r = open_now(fs, f, dir)) < 0)
			goto out_err;
		/* A collection goes on only from where it stopped. */
		if (a->build && (off == 0 || a->build->next != (uint64_t)off)) {
			qc_dir_build_abandon(fs, a->build);
			a->build = NULL;
		}
		if (off == 0 && caching)
			a->build = qc_dir_build_new(fs);
		qft_msg_init(&m, QFT_OP_READDIR, 0);
		m.offset = (uint64_t)off;
		/*
		 * As much as a reply may carry, unless nothing may be kept
		 * (attr_timeout=0): then just what the kernel asked for.
		 */
		m.length = fs->attr_timeout > 0 ? QFT_MAX_READDIR : size;
		/* A pipelined CREATE on the bulk stream could be missed. */
		qc_step_settle(fs);
		a->plus = plus || a->build;
		m.opflags = a->plus ? QFT_READDIR_PLUS : 0;
		/* A listing collected for the cache asks for a lease; a
		 * server without change notification ignores the flag. */
		if (a->build)
			m.opflags |= QFT_READDIR_WATCH;
		a->xgen = qc_hint_xattr_gen(fs);
		a->until = qc_now_ns() + qc_dir_secs_ns(fs->attr_timeout);
		/*
		 * A directory handle re-opened after a reconnect is a new
		 * stream: a listing in progress (a cookie other than 0)
		 * resumes only where the server's filesystem keeps cookies
		 * stable across opens, and may otherwise fail with EIO; a
		 * new listing starts clean.
		 */
		r = qc_file_call(fs, f, &m, &a->rep);
		if (r < 0)
			goto out_err;
		a->valid = true;
		n = qc_readdir_check(&a->rep.msg.data, a->plus);
		if (n < 0) {
			r = n;
			goto out_drop;
		}
		a->eof = (a->rep.msg.opflags & QFT_READDIR_EOF) != 0;
		a->next = (uint64_t)off;
		if (a->build) {
			qc_dir_build_note_watched(a->build, &a->rep);
			qc_dir_build_add(fs, a->build, &a->rep.msg.data);
			if (a->eof || a->build->failed) {
				qc_dir_build_install(fs, dir, a->build);
				qc_dir_build_free(a->build);
				a->build = NULL;
			}
		}
	}
	rest.p = a->rep.msg.data.p + a->pos;
	rest.len = a->rep.msg.data.len - (uint32_t)a->pos;
	/* One lookup per entry at most; entries are at least 21 bytes. */
	n = (int)(rest.len / 21) + 1;
	buf = malloc(size ? size : 1);
	counted = calloc((size_t)n, sizeof(*counted));
	if (!buf || !counted) {
		r = -ENOMEM;
		goto out_drop;
	}
	used = fill_dir(req, fs, ino, &rest, a->plus, plus, a->xgen, buf,
			size, counted, &ncounted, &consumed, &last_off);
	/*
	 * Done with `a` before replying: once the kernel has the reply it
	 * may release the directory, and `f` with it.  Should the reply not
	 * arrive, the kernel asks again at `off`, which no longer matches.
	 */
	a->pos += consumed;
	a->next = last_off;
	/* Drained and not the end: the next call asks the server. */
	if (a->pos >= a->rep.msg.data.len && !a->eof)
		ahead_reply_drop(a);
	if (fuse_reply_buf(req, buf, used) != 0) {
		/* The kernel never saw these entries: undo their lookups. */
		for (size_t i = 0; i < ncounted; i++)
			qn_forget(&fs->nodes, counted[i], 1);
	}
	free(counted);
	free(buf);
	return;

out_drop:
	free(counted);
	free(buf);
	ahead_reply_drop(a);
out_err:
	qc_dir_build_abandon(fs, a->build);
	a->build = NULL;
	fuse_reply_err(req, -r);
}
