// SPDX-License-Identifier: MIT
/*
 * What the directory cache may answer locally, and for how long: the
 * validity of names and attributes, the answers to lookups and creates,
 * and the lease asked for on a directory this client made (see dircache.h).
 */
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
#include "fs/fs.h"
#include "fs/hints.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"
#include "fs/stats.h"

/*
 * Whether directory inode `ino` has a leased listing on the live link
 * (listing lock held).  Its own watch then reports what changes its
 * attributes -- entries made or removed, chmod, utimes -- and that notice
 * drops the listing, which ends the trust qc_dir_attr_until gives.
 */
static bool dir_leased(struct qc_fs *fs, uint64_t ino)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	uint64_t gen = qc_conn_gen(fs->conn);

	for (struct listing *l = dc->by_ino[qc_dir_ino_bucket(dc, ino)]; l;
	     l = l->inext)
		if (l->dino == ino && l->leased && l->gen == gen)
			return true;
	return false;
}

/*
 * Until when the attributes of entry `e` of `l` are fresh (qc_dir_attr_ok).  A
 * subdirectory's mtime and link count change without a notice to the
 * parent's watch, so under the parent's lease they hold only while the
 * subdirectory is leased itself (a SCAN leases every directory it
 * lists); the residual window is a change to it between the parent's
 * listing and its own watch, within one scan.
 */
uint64_t qc_dir_attr_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e)
{
	bool dir = (e->attr.mode & QFT_S_IFMT) == QFT_S_IFDIR;

	/* What a followed symlink leads to (protocol.h) lives elsewhere:
	 * the lease covers its name only, and a directory by its own. */
	if (l->leased && (dir ? dir_leased(fs, e->attr.ino) :
			  !(e->attr.flags & QFT_ATTR_FOLLOWED)))
		return NEVER;
	return e->fetched_ns + qc_dir_secs_ns(fs->attr_timeout);
}

/*
 * Whether the attributes of entry `e` of `l` can be answered now: fresh
 * enough (attr_timeout, or a lease), not changed by this client since (a
 * file opened or released, other attributes seen: node.c stamps), and
 * not a file with other names.
 */
bool qc_dir_attr_ok(struct qc_fs *fs, const struct listing *l,
		    const struct dent *e, uint64_t now)
{
	if (fs->attr_timeout <= 0 || e->fetched_ns == 0)
		return false;
	/* A write through another name of it may not show here (a name
	 * looked up while the file had one link is another node, node.h):
	 * only the server knows a hard-linked file's size. */
	if ((e->attr.mode & QFT_S_IFMT) != QFT_S_IFDIR && e->attr.nlink > 1)
		return false;
	/* A directory's mtime and link count change with what is made
	 * inside it, which its parent's watch does not report: under a
	 * lease too, only for attr_timeout. */
	if (now >= qc_dir_attr_until(fs, l, e))
		return false;
	return qn_attr_trusted(&fs->nodes, l->dir, e->name, e->fetched_ns);
}

/*
 * Until when the name of entry `e` of `l` may be answered: a followed
 * symlink's type can change without a notice (its target replaced or
 * made), and a kernel that finds a known inode's type changed marks it
 * bad; so its name holds no longer than its attributes.
 */
uint64_t qc_dir_name_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e)
{
	uint64_t a;

	if (!(e->attr.flags & QFT_ATTR_FOLLOWED))
		return l->names_until;
	a = qc_dir_attr_until(fs, l, e);
	return a < l->names_until ? a : l->names_until;
}

/* Seconds the kernel may keep what is valid until `until`, at most `max`. */
double qc_dir_remaining(uint64_t until, uint64_t now, double max)
{
	double left;

	if (until == NEVER)
		return max;
	left = until > now ? (double)(until - now) / 1e9 : 0;
	return left < max ? left : max;
}

/* ---- answers ---- */

/*
 * What the cache knows of `name` in `parent` now: 1 with *a (and the
 * kernel's timeouts) when it exists with trusted attributes, 0 when it is
 * known absent, -EAGAIN otherwise.  With `need_attr` false, 1 also for a
 * name whose attributes are not trusted (*a then unset).
 */
static int answer(struct qc_fs *fs, struct qn_node *parent, const char *name,
		  bool need_attr, struct qft_attr *a, double *entry_to,
		  double *attr_to, uint64_t *xgen)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	uint64_t now = qc_now_ns();
	struct listing *l;
	struct dent *e;
	int r = -EAGAIN;

	/* ".." (asked by exportfs) is not an entry of a listing. */
	if (!qc_dir_cache_on(fs) || strlen(name) > QFT_MAX_NAME ||
	    qc_dir_is_dot(name))
		return -EAGAIN;
	pthread_mutex_lock(&dc->lock);
	l = qc_dir_valid_listing(fs, parent, now);
	if (!l || qc_dir_is_stale(l, name))
		goto out_unlock;
	e = qc_dir_dent_find(l, name, qc_dir_name_hash(name));
	if (e && !e->attr.ino) {
		/* Made by a pipelined CREATE: answered since? */
		if (qc_dir_resolve_predicted(fs, l) < 0)
			goto out_unlock;
		if (qc_dir_is_stale(l, name))
			goto out_unlock;
		e = qc_dir_dent_find(l, name, qc_dir_name_hash(name));
	}
	if (e && !e->attr.ino) {
		/* Not answered yet: it exists, attributes unknown. */
		if (!need_attr)
			r = 1;
		goto out_unlock;
	}
	if (!e) {
		r = 0;
	} else if (qc_dir_attr_ok(fs, l, e, now)) {
		r = 1;
		if (a)
			*a = e->attr;
		if (entry_to)
			*entry_to = qc_dir_remaining(
				qc_dir_name_until(fs, l, e), now,
				fs->entry_timeout);
		if (attr_to)
			*attr_to = qc_dir_remaining(qc_dir_attr_until(fs, l, e),
						    now, fs->attr_timeout);
		/* Read with the attributes: a SETXATTR after this point
		 * changes it, and the hint is then not taken. */
		if (xgen)
			*xgen = qc_hint_xattr_gen(fs);
	} else if (!need_attr) {
		r = 1;
	}
	if (r >= 0)
		qc_dir_touch(dc, l);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	return r;
}

int qc_dir_lookup(struct qc_fs *fs, struct qn_node *parent, const char *name,
		  struct qft_attr *out)
{
	return answer(fs, parent, name, true, out, NULL, NULL, NULL);
}

bool qc_dir_cached_attr(struct qc_fs *fs, struct qn_node *n,
			struct qft_attr *out)
{
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	struct qft_attr a;
	uint64_t ino;
	bool ok;

	if (!qc_dir_cache_on(fs) ||
	    qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return false;
	ok = answer(fs, parent, name, true, &a, NULL, NULL, NULL) == 1;
	qn_unref(&fs->nodes, parent);
	ino = qn_rino(&fs->nodes, n);
	/* The name may lead to another object than the node knew. */
	if (!ok || (ino && ino != a.ino) ||
	    qn_replaced(&fs->nodes, n, &a, false))
		return false;
	*out = a;
	return true;
}

/*
 * The listing of `parent` when it is under a lease and this client made
 * the directory (qc_dir_leased_absent says why both); NULL otherwise.
 * Listing lock held.
 */
static struct listing *leased_here(struct qc_fs *fs, struct qn_node *parent)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;

	/*
	 * A lease says a foreign change will be told, not that it has been
	 * by now: the notification of a name made on the server a moment ago
	 * may still be on its way.  So only in a directory this client made
	 * itself, which nobody else is likely to fill within that moment
	 * (the directories of a tree copy, where O_EXCL temporary files are
	 * made), is what the listing says good enough to answer without the
	 * server.
	 */
	l = qc_dir_valid_listing(fs, parent, qc_now_ns());
	/*
	 * The lease of a directory made a moment ago is asked for right
	 * after its MKDIR and answered within a round trip: wait for it
	 * rather than send this create on its own, so that a tree copy's
	 * first create in each new directory costs what a synchronous one
	 * would, and its own creates do not race with the lease's READDIR.
	 * The answer always comes: a reply, or the link's failure.
	 */
	while (l && l->made_here && l->lease_asked) {
		uint64_t id = l->id;

		pthread_cond_wait(&dc->lease_cond, &dc->lock);
		l = qc_dir_valid_listing(fs, parent, qc_now_ns());
		if (l && l->id != id)
			l = NULL;
	}
	return l && l->leased && l->made_here ? l : NULL;
}

bool qc_dir_leased_absent(struct qc_fs *fs, struct qn_node *parent,
			  const char *name)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;
	bool absent = false;

	if (!qc_dir_cache_on(fs) || strlen(name) > QFT_MAX_NAME)
		return false;
	pthread_mutex_lock(&dc->lock);
	l = leased_here(fs, parent);
	if (l && !qc_dir_is_stale(l, name))
		absent = !qc_dir_dent_find(l, name, qc_dir_name_hash(name));
	pthread_mutex_unlock(&dc->lock);
	return absent;
}

int qc_dir_leased_name(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, uint32_t *type)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;
	struct dent *e;
	int r = -EAGAIN;

	if (!qc_dir_cache_on(fs) || strlen(name) > QFT_MAX_NAME)
		return -EAGAIN;
	pthread_mutex_lock(&dc->lock);
	l = leased_here(fs, parent);
	if (l && !qc_dir_is_stale(l, name)) {
		e = qc_dir_dent_find(l, name, qc_dir_name_hash(name));
		r = e != NULL;
		if (e)
			*type = e->attr.mode & QFT_S_IFMT;
	}
	pthread_mutex_unlock(&dc->lock);
	return r;
}

/* A lease on a directory this client just made (see qc_dir_watch_new_dir):
 * the READDIR WATCH's in flight, no lock; freed by its completion. */
struct mkwatch {
	struct qc_fs *fs;
	struct qn_node *dir;    /* holds a node reference */
	uint64_t id;            /* of the listing the MKDIR made */
	uint64_t dino;
	struct qc_dir_fetch fb;
};

/* Whether every entry of a checked READDIR PLUS reply is in `l`. */
static bool reply_within(const struct listing *l, const struct qft_blob *data)
{
	struct qft_dirent d;
	struct qcur c;

	qcur_init(&c, data->p, data->len);
	while (c.left && qft_dirent_decode(&c, &d, true) == 0)
		if (!qc_dir_is_dot(d.name.s) &&
		    !qc_dir_dent_find(l, d.name.s, qc_dir_name_hash(d.name.s)))
			return false;
	return true;
}

/*
 * The READDIR WATCH of a new directory answered (on the reader thread:
 * short, no waiting).  The listing becomes leased when the watch is in
 * place and the server saw nothing the client does not know of: every
 * name it listed is one the client made since (foreign ones made before
 * the watch would never be told).
 */
static void mkdir_watch_done(void *ctx, int err, struct qc_reply *rep)
{
	struct mkwatch *w = ctx;
	struct qc_fs *fs = w->fs;
	struct qc_dircache *dc = qc_dir_of(fs);
	bool watched, ok;
	struct listing *l;

	watched = err == 0 && (rep->msg.opflags & QFT_READDIR_WATCHED);
	pthread_mutex_lock(&dc->lock);
	l = qc_dir_find_listing(dc, w->dir);
	ok = watched && l && l->id == w->id && !l->nstale &&
	     (rep->msg.opflags & QFT_READDIR_EOF) &&
	     qc_readdir_check(&rep->msg.data, true) >= 0 &&
	     !qc_dir_spoiled(dc, w->fb.seq, NULL, w->dino, false) &&
	     reply_within(l, &rep->msg.data);
	if (ok) {
		l->leased = true;
		l->names_until = NEVER;
	} else if (watched) {
		qc_dir_work_add(fs, WORK_UNWATCH, NULL, w->dino, NULL);
	}
	if (l && l->id == w->id)
		l->lease_asked = false;
	pthread_cond_broadcast(&dc->lease_cond);
	pthread_mutex_unlock(&dc->lock);
	qn_unref(&fs->nodes, w->dir);
	free(w);
}

/* No lease will be asked for listing `id` of `dir` after all: creates
 * waiting for one (qc_dir_leased_absent) go on without. */
static void lease_not_asked(struct qc_fs *fs, struct qn_node *dir,
			    uint64_t id)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;

	pthread_mutex_lock(&dc->lock);
	l = qc_dir_find_listing(dc, dir);
	if (l && l->id == id)
		l->lease_asked = false;
	pthread_cond_broadcast(&dc->lease_cond);
	pthread_mutex_unlock(&dc->lock);
}

/*
 * Asks for a lease on the directory `dir` just made: OPENDIR, READDIR
 * WATCH and CLOSE sent back to back, nothing waited for (the server runs
 * them in order).  Until the answer the listing holds for entry_timeout.
 */
void qc_dir_watch_new_dir(struct qc_fs *fs, struct qn_node *dir,
			  uint64_t id, uint64_t dino)
{
	char path[QFT_MAX_PATH + 1];
	struct mkwatch *w;
	struct qft_msg m;
	uint64_t gen, h;

	gen = qc_dir_link_gen(fs);
	if (!gen || qn_path(&fs->nodes, dir, NULL, path) < 0 ||
	    qc_handle_alloc(fs->conn, gen, &h) < 0) {
		lease_not_asked(fs, dir, id);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		lease_not_asked(fs, dir, id);
		goto out_free_handle;
	}
	w->fs = fs;
	w->dir = dir;
	w->id = id;
	w->dino = dino;
	qc_dir_fetch_begin(fs, &w->fb);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	if (qc_call_async(fs->conn, gen, &m, qc_dir_ignore_reply, NULL) < 0) {
		free(w);
		lease_not_asked(fs, dir, id);
		goto out_free_handle;
	}
	qft_msg_init(&m, QFT_OP_READDIR, 0);
	m.handle = h;
	m.length = 4096;
	m.opflags = QFT_READDIR_PLUS | QFT_READDIR_WATCH;
	qn_ref(&fs->nodes, dir);
	/* On failure mkdir_watch_done has run, and freed w. */
	(void)qc_call_async(fs->conn, gen, &m, mkdir_watch_done, w);
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = h;
	(void)qc_send_noreply(fs->conn, gen, &m);
out_free_handle:
	qc_handle_free(fs->conn, gen, h);
}

bool qc_dir_reply_lookup(fuse_req_t req, struct qc_fs *fs, fuse_ino_t parent,
			 const char *name)
{
	struct qn_node *dir = qc_fs_node(fs, parent);
	struct fuse_entry_param e;
	double entry_to, attr_to;
	struct qft_attr a;
	struct qn_node *n;
	uint64_t xgen, agen;
	int r;

	agen = qn_child_attr_gen(&fs->nodes, dir, name);
	r = answer(fs, dir, name, true, &a, &entry_to, &attr_to, &xgen);
	if (r == -EAGAIN && qc_dir_cache_on(fs) && qc_dir_busy(fs, dir)) {
		qc_dir_fetch_listing(fs, dir);
		r = answer(fs, dir, name, true, &a, &entry_to, &attr_to,
			   &xgen);
	}
	if (r == -EAGAIN)
		return false;
	if (r == 0) {
		/* Not kept by the kernel (timeout 0): every later lookup
		 * comes here again, and sees the name once it exists. */
		memset(&e, 0, sizeof(e));
		fuse_reply_entry(req, &e);
		atomic_fetch_add(&qc_dir_of(fs)->negatives_local, 1);
		qc_stat_inc(&fs->stats, QC_STAT_LOOKUP_LOCAL);
		return true;
	}
	n = qn_lookup(&fs->nodes, dir, name, &a);
	if (!n)
		return false;
	qc_hint_noxattr_note(fs, n, &a, xgen);
	/* What the kernel may keep, the node may answer it again with
	 * (qn_note_fetched): also once the listing is gone with its link. */
	if (attr_to > 0)
		qn_note_fetched(&fs->nodes, n, &a, agen,
				qc_now_ns() + (uint64_t)(attr_to * 1e9));
	qc_entry_fill(fs, &e, n, &a);
	e.entry_timeout = entry_to;
	e.attr_timeout = attr_to;
	if (fuse_reply_entry(req, &e) != 0)
		qn_forget(&fs->nodes, n, 1);
	atomic_fetch_add(&qc_dir_of(fs)->lookups_local, 1);
	qc_stat_inc(&fs->stats, QC_STAT_LOOKUP_LOCAL);
	return true;
}
