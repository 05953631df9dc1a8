// SPDX-License-Identifier: MIT
/*
 * What the client learns or changes itself (replies to lookups, creates,
 * mkdirs, links, renames, removals, xattr changes) keeps its listings
 * exact (see dircache.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "fs/dircache.h"
#include "fs/dir/internal.h"
#include "fs/fs.h"
#include "fs/hints.h"
#include "fs/node.h"
#include "protocol.h"

/* ---- what the client learns or changes ---- */

void qc_dir_note_fetched(struct qc_fs *fs, struct qn_node *parent,
			 const char *name, const struct qft_attr *a,
			 const struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;
	struct qft_attr b;

	if (!qc_dir_cache_on(fs) || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	l = qc_dir_valid_listing(fs, parent, qc_now_ns());
	if (!l || qc_dir_spoiled(dc, fb->seq, parent, l->dino, false))
		goto out_unlock;
	if (a) {
		b = *a;
		if (qc_hint_xattr_gen(fs) != fb->xgen)
			b.flags &= ~QFT_ATTR_NOXATTR;
		if (qc_dir_dent_put(dc, l, name, &b, fb->start_ns) < 0) {
			qc_dir_listing_drop_unwatch(fs, l);
			goto out_unlock;
		}
		qc_dir_evict(fs, l);
	} else {
		qc_dir_dent_del(dc, l, name);
	}
	qc_dir_unstale(l, name);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}

/*
 * The client changed `dir`: fetches in flight may miss it, and its own
 * attributes (mtime, link count) in its parent's listing are stale.
 * Listing lock held.
 */
static void changed_dir(struct qc_fs *fs, struct qn_node *dir)
{
	struct listing *l = qc_dir_find_listing(qc_dir_of(fs), dir);

	qc_dir_record(qc_dir_of(fs), dir, l ? l->dino : 0, false);
	qn_touch(&fs->nodes, dir);
}

/* Drops the listing of the directory `name` in `parent` named, if any. */
static void drop_child_listing(struct qc_fs *fs, struct qn_node *parent,
			       const char *name)
{
	struct qn_node *child = qn_find_ref(&fs->nodes, parent, name);
	struct listing *l;

	if (!child)
		return;
	l = qc_dir_find_listing(qc_dir_of(fs), child);
	if (l)
		qc_dir_listing_drop_unwatch(fs, l);
	qn_unref(&fs->nodes, child);
}

void qc_dir_note_entry(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, const struct qft_attr *a)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;

	if (!dc || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	changed_dir(fs, parent);
	l = qc_dir_valid_listing(fs, parent, qc_now_ns());
	if (l) {
		qc_dir_unstale(l, name);
		if (qc_dir_dent_put(dc, l, name, a, qc_now_ns()) < 0)
			qc_dir_listing_drop_unwatch(fs, l);
		else
			qc_dir_evict(fs, l);
	}
	pthread_mutex_unlock(&dc->lock);
}

/* qc_dir_note_attr, or qc_dir_note_answer when `n` is not NULL. */
static void note_attr(struct qc_fs *fs, struct qn_node *parent,
		      const char *name, const struct qft_attr *a,
		      struct qn_node *n, uint64_t gen)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;
	struct dent *e;

	if (!dc || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	/*
	 * Checked under the listing lock: a change sent after this check
	 * marks the node first and notes its prediction under this lock
	 * (attrs.c, setattr_async), so it lands after this answer.
	 */
	if (n && qn_attr_gen(&fs->nodes, n) != gen)
		goto out_unlock;
	l = qc_dir_valid_listing(fs, parent, qc_now_ns());
	e = l && !qc_dir_is_stale(l, name) ?
	    qc_dir_dent_find(l, name, qc_dir_name_hash(name)) : NULL;
	/* The same object only: a name may be another's by now. */
	if (e && (!e->attr.ino || e->attr.ino == a->ino) &&
	    (e->attr.mode & QFT_S_IFMT) == (a->mode & QFT_S_IFMT)) {
		struct qft_attr na = *a;

		/* Attributes from a handle (fstat) cannot say the name is a
		 * followed symlink; the name still is. */
		na.flags |= e->attr.flags & QFT_ATTR_FOLLOWED;
		changed_dir(fs, parent);
		if (qc_dir_dent_put(dc, l, name, &na, qc_now_ns()) < 0)
			qc_dir_listing_drop_unwatch(fs, l);
	}
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_note_attr(struct qc_fs *fs, struct qn_node *parent,
		      const char *name, const struct qft_attr *a)
{
	note_attr(fs, parent, name, a, NULL, 0);
}

void qc_dir_note_answer(struct qc_fs *fs, struct qn_node *parent,
			const char *name, const struct qft_attr *a,
			struct qn_node *n, uint64_t gen)
{
	note_attr(fs, parent, name, a, n, gen);
}

void qc_dir_note_mkdir(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, const struct qft_attr *a,
		       const struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *pl, *l;
	struct qn_node *child;
	uint64_t pino, id;

	qc_dir_note_entry(fs, parent, name, a);
	if (!qc_dir_cache_on(fs))
		return;
	child = qn_child_ref(&fs->nodes, parent, name, a);
	if (!child)
		return;
	pthread_mutex_lock(&dc->lock);
	pl = qc_dir_find_listing(dc, parent);
	pino = pl && pl->dino ? pl->dino : qn_rino(&fs->nodes, parent);
	/* Empty when made: nobody could have put anything in it before the
	 * MKDIR's reply, as far as the client can know without a lease. */
	l = qc_dir_listing_new(fs, child, a->ino, pino,
			       fb->start_ns + qc_dir_secs_ns(fs->entry_timeout),
			       fb->gen);
	if (l) {
		l->made_here = true;
		/* Cleared by mkdir_watch_done, which qc_dir_watch_new_dir
		 * makes sure runs (or clears it itself when it sends
		 * nothing). */
		l->lease_asked = true;
		qc_dir_evict(fs, l);
	}
	id = l ? l->id : 0;
	pthread_mutex_unlock(&dc->lock);
	if (id)
		qc_dir_watch_new_dir(fs, child, id, a->ino);
	qn_unref(&fs->nodes, child);
}

void qc_dir_note_link(struct qc_fs *fs, struct qn_node *parent,
		      const char *name, const struct qft_attr *a)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	if (!dc)
		return;
	pthread_mutex_lock(&dc->lock);
	qc_dir_forget_ino_attrs(dc, a->ino);
	pthread_mutex_unlock(&dc->lock);
	qc_dir_note_entry(fs, parent, name, a);
}

void qc_dir_note_gone(struct qc_fs *fs, struct qn_node *parent,
		      const char *name)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;
	struct dent *e;

	if (!dc || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	changed_dir(fs, parent);
	drop_child_listing(fs, parent, name);
	l = qc_dir_find_listing(dc, parent);
	if (l) {
		e = qc_dir_dent_find(l, name, qc_dir_name_hash(name));
		/* Its other names have one link less. */
		if (e && (e->attr.mode & QFT_S_IFMT) != QFT_S_IFDIR &&
		    e->attr.nlink > 1)
			qc_dir_forget_ino_attrs(dc, e->attr.ino);
		qc_dir_dent_del(dc, l, name);
		qc_dir_unstale(l, name);
	}
	pthread_mutex_unlock(&dc->lock);
}

/* The directory `name` in `from` (not moved by qn_rename yet) now lives
 * in `to`: its listing's "..". */
static void set_pino(struct qc_fs *fs, struct qn_node *from,
		     const char *name, struct qn_node *to)
{
	struct qn_node *moved = qn_find_ref(&fs->nodes, from, name);
	struct listing *ml, *tl;

	if (!moved)
		return;
	ml = qc_dir_find_listing(qc_dir_of(fs), moved);
	tl = qc_dir_find_listing(qc_dir_of(fs), to);
	if (ml)
		ml->pino = tl && tl->dino ? tl->dino : qn_rino(&fs->nodes, to);
	qn_unref(&fs->nodes, moved);
}

void qc_dir_note_rename(struct qc_fs *fs, struct qn_node *parent,
			const char *name, struct qn_node *newparent,
			const char *newname, bool exchange)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *ls, *ld;
	struct dent *es, *ed;
	struct qft_attr as, ad;
	bool has_s, has_d, known_s, known_d;
	uint64_t now = qc_now_ns();

	if (!dc || strlen(name) > QFT_MAX_NAME ||
	    strlen(newname) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	changed_dir(fs, parent);
	if (newparent != parent)
		changed_dir(fs, newparent);
	ls = qc_dir_valid_listing(fs, parent, now);
	ld = qc_dir_valid_listing(fs, newparent, now);
	es = ls ? qc_dir_dent_find(ls, name, qc_dir_name_hash(name)) : NULL;
	ed = ld ? qc_dir_dent_find(ld, newname, qc_dir_name_hash(newname)) :
	     NULL;
	/* What each name held, where a listing says so. */
	known_s = ls && !qc_dir_is_stale(ls, name);
	known_d = ld && !qc_dir_is_stale(ld, newname);
	has_s = es != NULL;
	has_d = ed != NULL;
	if (has_s)
		as = es->attr;
	if (has_d)
		ad = ed->attr;
	if (!exchange) {
		/* A directory renamed over loses its listing. */
		drop_child_listing(fs, newparent, newname);
		if (has_d && (ad.mode & QFT_S_IFMT) != QFT_S_IFDIR &&
		    ad.nlink > 1)
			qc_dir_forget_ino_attrs(dc, ad.ino);
	}
	/*
	 * The moved objects' ctime changed (fetched 0: their attributes
	 * are asked for again); a name whose new object is not known makes
	 * its listing incomplete, so it goes.
	 */
	if (ls) {
		if (exchange && !(known_d && has_d))
			qc_dir_listing_drop_unwatch(fs, ls), ls = NULL;
		else if (exchange && qc_dir_dent_put(dc, ls, name, &ad, 0) < 0)
			qc_dir_listing_drop_unwatch(fs, ls), ls = NULL;
		else if (!exchange)
			qc_dir_dent_del(dc, ls, name);
	}
	/* ls may have been dropped, and may be ld. */
	ld = qc_dir_find_listing(dc, newparent);
	if (ld) {
		if (!(known_s && has_s))
			qc_dir_listing_drop_unwatch(fs, ld);
		else if (qc_dir_dent_put(dc, ld, newname, &as, 0) < 0)
			qc_dir_listing_drop_unwatch(fs, ld);
	}
	ls = qc_dir_find_listing(dc, parent);
	if (ls)
		qc_dir_unstale(ls, name);
	ld = qc_dir_find_listing(dc, newparent);
	if (ld)
		qc_dir_unstale(ld, newname);
	/* A directory that moved keeps its listing; ".." is another. */
	set_pino(fs, parent, name, newparent);
	if (exchange)
		set_pino(fs, newparent, newname, parent);
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_drop(struct qc_fs *fs, struct qn_node *parent)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l;

	if (!dc || !parent)
		return;
	pthread_mutex_lock(&dc->lock);
	qc_dir_record(dc, parent, 0, false);
	/* Before the listing goes: its reference may be the node's last. */
	qn_touch(&fs->nodes, parent);
	l = qc_dir_find_listing(dc, parent);
	if (l)
		qc_dir_listing_drop_unwatch(fs, l);
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_xattr_changed(struct qc_fs *fs, struct qn_node *n)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	struct listing *l;
	struct dent *e;

	if (!dc || qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return;
	pthread_mutex_lock(&dc->lock);
	l = qc_dir_find_listing(dc, parent);
	e = l ? qc_dir_dent_find(l, name, qc_dir_name_hash(name)) : NULL;
	if (e)
		e->attr.flags &= ~QFT_ATTR_NOXATTR;
	pthread_mutex_unlock(&dc->lock);
	qn_unref(&fs->nodes, parent);
}
