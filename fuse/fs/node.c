// SPDX-License-Identifier: MIT
/* The inode table (see node.h).  Every function takes t->lock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "log.h"
#include "fs/node.h"
#include "fs/node_internal.h"
#include "protocol.h"

/* Node ids are addresses; they must fit the kernel's 64-bit node id. */
_Static_assert(sizeof(fuse_ino_t) >= sizeof(uintptr_t),
	       "fuse_ino_t cannot hold a pointer");

/* CLOCK_MONOTONIC in ns, the clock of the change stamps. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Read-only opens change an atime at most, which the kernel asks for
 * again after a read; answering it from a copy still valid is what
 * attr_timeout allows. */
void qn_stamp_open(struct qn_node *n, const struct qn_file *f)
{
	if (n->rtype != QFT_S_IFDIR && !f->rdonly)
		n->changed_ns = now_ns();
}

bool qn_has_writer(const struct qn_node *n)
{
	for (const struct qn_file *f = n->files; f; f = f->next)
		if (!f->rdonly)
			return true;
	return false;
}

static size_t vbucket(const struct qn_table *t, uint64_t rino)
{
	return (size_t)((rino * 0x9e3779b97f4a7c15ull) >> 32) &
	       (t->nvbuckets - 1);
}

static void vunhash(struct qn_table *t, struct qn_node *n)
{
	struct qn_node **pp;

	if (!n->vhashed)
		return;
	for (pp = &t->vbuckets[vbucket(t, n->rino)]; *pp;
	     pp = &(*pp)->vnext) {
		if (*pp == n) {
			*pp = n->vnext;
			break;
		}
	}
	n->vnext = NULL;
	n->vhashed = false;
	t->vcount--;
}

/* Doubles the vino buckets at load 1; on failure chains get longer. */
static void vgrow(struct qn_table *t)
{
	size_t nb = t->nvbuckets ? t->nvbuckets * 2 : QN_INITIAL_BUCKETS;
	struct qn_node **nbuckets, **old = t->vbuckets;
	size_t oldn = t->nvbuckets;

	if (t->vbuckets && t->vcount < t->nvbuckets)
		return;
	nbuckets = calloc(nb, sizeof(*nbuckets));
	if (!nbuckets)
		return;
	t->vbuckets = nbuckets;
	t->nvbuckets = nb;
	for (size_t i = 0; i < oldn; i++) {
		struct qn_node *n = old[i];

		while (n) {
			struct qn_node *next = n->vnext;
			size_t b = vbucket(t, n->rino);

			n->vnext = nbuckets[b];
			nbuckets[b] = n;
			n = next;
		}
	}
	free(old);
}

/* A node with a provisional number learnt its server inode: list it, so
 * that other names of that inode show the same number. */
static void vhash(struct qn_table *t, struct qn_node *n)
{
	size_t b;

	if (n->vhashed || !n->vino || !n->rino)
		return;
	vgrow(t);
	if (!t->vbuckets)
		return;         /* out of memory: only n shows it */
	b = vbucket(t, n->rino);
	n->vnext = t->vbuckets[b];
	t->vbuckets[b] = n;
	n->vhashed = true;
	t->vcount++;
}

/* Frees `n` and then each ancestor that nothing holds any more.  A file
 * has a parent per name; the ancestors of one are directories, which have
 * one name, so the recursion is one level deep. */
void qn_maybe_free(struct qn_table *t, struct qn_node *n)
{
	while (n && n != &t->root && n->nlookup == 0 && n->refs == 0) {
		struct qn_node *up = NULL;

		while (n->names) {
			struct qn_node *parent = n->names->parent;

			if (n->changed_ns > parent->child_changed_ns)
				parent->child_changed_ns = n->changed_ns;
			parent->refs++;         /* until n is gone */
			qn_name_unlink(t, n->names);
			if (up) {
				up->refs--;
				qn_maybe_free(t, up);
			}
			up = parent;
		}
		qn_obj_unhash(t, n);
		vunhash(t, n);
		n->aprev->anext = n->anext;
		n->anext->aprev = n->aprev;
		free(n);
		if (!up)
			break;
		up->refs--;
		n = up;
	}
}

/* Takes name `nm` from its node, which is detached if that was its last
 * name and freed if nothing holds it; the parent is pinned by the caller. */
static void drop_name(struct qn_table *t, struct qn_name *nm)
{
	struct qn_node *n = nm->node;

	qn_name_unlink(t, nm);
	qn_maybe_free(t, n);
}

/* The node of `name` in `parent`, or NULL. */
static struct qn_node *find(struct qn_table *t, const struct qn_node *parent,
			    const char *name)
{
	struct qn_name *nm = qn_name_find(t, parent, name);

	return nm ? nm->node : NULL;
}

/* Takes every name of `n` (it keeps living for the kernel). */
static void detach(struct qn_table *t, struct qn_node *n)
{
	n->refs++;
	while (n->names) {
		struct qn_node *parent = qn_name_unlink(t, n->names);

		qn_maybe_free(t, parent);
	}
	n->refs--;
	qn_maybe_free(t, n);
}

int qn_table_init(struct qn_table *t)
{
	memset(t, 0, sizeof(*t));
	t->buckets = calloc(QN_INITIAL_BUCKETS, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	t->nbuckets = QN_INITIAL_BUCKETS;
	t->next_vino = QN_VINO_BASE;
	t->root.rtype = QFT_S_IFDIR;
	t->root.anext = t->root.aprev = &t->root;
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

static void drop_files(struct qn_node *n, void (*drop_file)(struct qn_file *))
{
	while (n->files) {
		struct qn_file *f = n->files;

		n->files = f->next;
		f->listed = false;
		f->node = NULL;
		drop_file(f);
	}
}

void qn_table_destroy(struct qn_table *t,
		      void (*drop_file)(struct qn_file *f))
{
	struct qn_node *n = t->root.anext;

	drop_files(&t->root, drop_file);
	while (n != &t->root) {
		struct qn_node *next = n->anext;

		drop_files(n, drop_file);
		while (n->names) {
			struct qn_name *nm = n->names;

			n->names = nm->next;
			free(nm);
		}
		free(n);
		n = next;
	}
	t->root.anext = t->root.aprev = &t->root;
	free(t->buckets);
	t->buckets = NULL;
	free(t->vbuckets);
	t->vbuckets = NULL;
	free(t->obuckets);
	t->obuckets = NULL;
	pthread_mutex_destroy(&t->lock);
}

struct qn_node *qn_from_ino(struct qn_table *t, uint64_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &t->root;
	return (struct qn_node *)(uintptr_t)ino;
}

uint64_t qn_to_ino(struct qn_table *t, struct qn_node *n)
{
	if (n == &t->root)
		return FUSE_ROOT_ID;
	return (uint64_t)(uintptr_t)n;
}

static bool same_time(const struct qft_time *a, const struct qft_time *b)
{
	return a->sec == b->sec && a->nsec == b->nsec;
}

/* Fresh size and times; different ones from known ones are a change. */
static void note_times_locked(struct qn_node *n, const struct qft_attr *a,
			      bool known)
{
	if (known && (n->size != a->size || !same_time(&n->mtime, &a->mtime) ||
		      !same_time(&n->ctime, &a->ctime)))
		n->changed_ns = now_ns();
	n->size = a->size;
	n->mtime = a->mtime;
	n->ctime = a->ctime;
}

static void set_attr_locked(struct qn_table *t, struct qn_node *n,
			    const struct qft_attr *a, bool known)
{
	if (n->rino != a->ino) {
		vunhash(t, n);
		qn_obj_unhash(t, n);
		n->rino = a->ino;
		vhash(t, n);
	}
	n->rtype = a->mode & QFT_S_IFMT;
	qn_obj_sync(t, n);
	note_times_locked(n, a, known);
	n->attr = *a;
}

/*
 * The node that attributes `a` of a name not in the table name: a
 * non-directory the table has under another name, when `a` says it has
 * other names (a file with one link is another object, whatever its
 * number: one whose inode was reused, or on another device).
 */
static struct qn_node *same_object(struct qn_table *t, const struct qft_attr *a)
{
	struct qn_node *n;

	if ((a->mode & QFT_S_IFMT) == QFT_S_IFDIR || a->nlink < 2)
		return NULL;
	n = qn_obj_find(t, a->ino);
	return n && n->rtype == (a->mode & QFT_S_IFMT) ? n : NULL;
}

/* A new node, on the list of all nodes, with no name yet. */
static struct qn_node *new_node(struct qn_table *t, struct qn_node *parent)
{
	struct qn_node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	/* What a freed node of this name was stamped with is kept only in
	 * its parent's aggregate: a new node starts from it, or attributes
	 * fetched before that change would be trusted again once the
	 * kernel had forgotten the old node. */
	n->changed_ns = parent->child_changed_ns;
	n->anext = t->root.anext;
	n->aprev = &t->root;
	t->root.anext->aprev = n;
	t->root.anext = n;
	return n;
}

/*
 * The node of `name` in `parent` for attributes `a`, made if needed (NULL
 * when out of memory); table lock held, parent pinned by the caller.  The
 * name becomes the one its node's paths use: it was just confirmed.
 */
static struct qn_node *get_child(struct qn_table *t, struct qn_node *parent,
				 const char *name, const struct qft_attr *a)
{
	struct qn_name *nm = qn_name_find(t, parent, name);
	struct qn_node *n = nm ? nm->node : NULL;
	bool known;

	/* rino 0: a file this client created and whose CREATE is not
	 * answered yet (qn_note_created), not another object. */
	if (n && ((n->rino && n->rino != a->ino) ||
		  n->rtype != (a->mode & QFT_S_IFMT))) {
		/* A different object now has the name; the old node keeps
		 * its other names, or stays with the kernel until it
		 * forgets it. */
		drop_name(t, nm);
		n = NULL;
		nm = NULL;
	}
	if (nm) {
		qn_name_first(nm);
		known = true;
	} else {
		n = same_object(t, a);
		known = n != NULL;
		if (!n)
			n = new_node(t, parent);
		if (!n)
			return NULL;
		if (qn_name_add(t, n, parent, name) < 0) {
			if (!known)
				qn_maybe_free(t, n);    /* unnamed: freed */
			return NULL;
		}
	}
	set_attr_locked(t, n, a, known);
	return n;
}

struct qn_node *qn_lookup(struct qn_table *t, struct qn_node *parent,
			  const char *name, const struct qft_attr *a)
{
	struct qn_node *n;

	pthread_mutex_lock(&t->lock);
	parent->refs++; /* pins it while a stale child is detached */
	n = get_child(t, parent, name, a);
	if (n)
		n->nlookup++;
	parent->refs--;
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct qn_node *qn_child_ref(struct qn_table *t, struct qn_node *parent,
			     const char *name, const struct qft_attr *a)
{
	struct qn_node *n;

	pthread_mutex_lock(&t->lock);
	parent->refs++;
	n = get_child(t, parent, name, a);
	if (n)
		n->refs++;
	parent->refs--;
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct qn_node *qn_find_ref(struct qn_table *t, struct qn_node *parent,
			    const char *name)
{
	struct qn_node *n;

	pthread_mutex_lock(&t->lock);
	n = find(t, parent, name);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void qn_ref(struct qn_table *t, struct qn_node *n)
{
	pthread_mutex_lock(&t->lock);
	n->refs++;
	pthread_mutex_unlock(&t->lock);
}

void qn_unref(struct qn_table *t, struct qn_node *n)
{
	pthread_mutex_lock(&t->lock);
	if (n != &t->root) {
		n->refs--;
		qn_maybe_free(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}

uint64_t qn_provisional_ino(struct qn_table *t, struct qn_node *n)
{
	uint64_t v;

	pthread_mutex_lock(&t->lock);
	if (!n->vino)
		n->vino = ++t->next_vino;
	vhash(t, n);
	v = n->vino;
	pthread_mutex_unlock(&t->lock);
	return v;
}

/* Table lock held. */
static uint64_t shown_locked(struct qn_table *t, struct qn_node *n,
			     uint64_t rino)
{
	/* rino 0 on either side: the CREATE is not answered yet, and the
	 * node's attributes can only be of its own object. */
	if (n && n->vino && (!rino || !n->rino || rino == n->rino))
		return n->vino;
	if (rino && t->vcount) {
		for (struct qn_node *v = t->vbuckets[vbucket(t, rino)]; v;
		     v = v->vnext)
			if (v->rino == rino)
				return v->vino;
	}
	return rino;
}

uint64_t qn_shown_ino(struct qn_table *t, struct qn_node *n, uint64_t rino)
{
	uint64_t v;

	pthread_mutex_lock(&t->lock);
	v = shown_locked(t, n, rino);
	pthread_mutex_unlock(&t->lock);
	return v;
}

uint64_t qn_shown_child_ino(struct qn_table *t, struct qn_node *dir,
			    const char *name, uint64_t rino)
{
	uint64_t v;

	pthread_mutex_lock(&t->lock);
	v = shown_locked(t, rino ? NULL : find(t, dir, name), rino);
	pthread_mutex_unlock(&t->lock);
	return v;
}

uint64_t qn_rino(struct qn_table *t, struct qn_node *n)
{
	uint64_t ino;

	pthread_mutex_lock(&t->lock);
	ino = n->rino;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

bool qn_attr_trusted(struct qn_table *t, struct qn_node *parent,
		     const char *name, uint64_t since)
{
	struct qn_node *n;
	bool ok;

	pthread_mutex_lock(&t->lock);
	n = find(t, parent, name);
	/* An open directory changes nothing by being open. */
	if (n)
		ok = (n->rtype == QFT_S_IFDIR || !qn_has_writer(n)) &&
		     n->changed_ns < since;
	else
		ok = parent->child_changed_ns < since;
	pthread_mutex_unlock(&t->lock);
	return ok;
}

void qn_touch(struct qn_table *t, struct qn_node *n)
{
	pthread_mutex_lock(&t->lock);
	n->changed_ns = now_ns();
	pthread_mutex_unlock(&t->lock);
}

void qn_forget(struct qn_table *t, struct qn_node *n, uint64_t nlookup)
{
	pthread_mutex_lock(&t->lock);
	if (n != &t->root) {
		if (n->nlookup < nlookup) {
			qft_warn("kernel forgot %llu lookups of '%s', only %llu known",
				 (unsigned long long)nlookup,
				 n->names ? n->names->name : "(detached)",
				 (unsigned long long)n->nlookup);
			nlookup = n->nlookup;
		}
		n->nlookup -= nlookup;
		qn_maybe_free(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}

static void attr_stale_locked(struct qn_node *n)
{
	n->attr_gen++;
	n->attr_until = 0;
}

/* The object of `n` lost or gained a name: its link count and ctime
 * changed, so what was fetched before is stale. */
static void names_changed_locked(struct qn_node *n)
{
	n->changed_ns = now_ns();
	attr_stale_locked(n);
}

/* A name of `n` went on the server (UNLINK, RENAME over it): one link
 * less, which a prediction of its attributes shows (qc_step_predicted)
 * until the server is asked again. */
static void lost_link_locked(struct qn_node *n)
{
	names_changed_locked(n);
	if (n->rtype != QFT_S_IFDIR && n->attr.nlink > 0)
		n->attr.nlink--;
}

void qn_remove(struct qn_table *t, struct qn_node *parent, const char *name)
{
	struct qn_name *nm;

	pthread_mutex_lock(&t->lock);
	t->ns_gen++;
	nm = qn_name_find(t, parent, name);
	if (nm) {
		lost_link_locked(nm->node);
		parent->refs++;
		drop_name(t, nm);
		parent->refs--;
		qn_maybe_free(t, parent);
	}
	pthread_mutex_unlock(&t->lock);
}

struct qn_node *qn_link(struct qn_table *t, struct qn_node *n,
			struct qn_node *parent, const char *name,
			const struct qft_attr *a)
{
	struct qn_name *nm;
	struct qn_node *r = NULL;

	pthread_mutex_lock(&t->lock);
	t->ns_gen++;
	parent->refs++;
	n->refs++;
	nm = qn_name_find(t, parent, name);
	if (nm && nm->node == n) {
		qn_name_first(nm);
	} else {
		if (nm)
			drop_name(t, nm);
		if (qn_name_add(t, n, parent, name) < 0)
			goto out_unpin;
	}
	/* The LINK's answer is the object's, with its new link count and
	 * ctime: n was made by a CREATE not yet answered, or is it. */
	if (!n->rino || n->rino == a->ino)
		set_attr_locked(t, n, a, true);
	names_changed_locked(n);
	n->nlookup++;
	r = n;
out_unpin:
	n->refs--;
	parent->refs--;
	qn_maybe_free(t, n);
	qn_maybe_free(t, parent);
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* Gives node `n` (pinned) the name `name` in `parent`, first of its names;
 * out of memory, it just has one name less. */
static void place(struct qn_table *t, struct qn_node *n,
		  struct qn_node *parent, const char *name)
{
	(void)qn_name_add(t, n, parent, name);
}

void qn_rename(struct qn_table *t, struct qn_node *parent, const char *name,
	       struct qn_node *newparent, const char *newname, bool exchange)
{
	struct qn_name *snm, *dnm;
	struct qn_node *src, *dst;

	pthread_mutex_lock(&t->lock);
	t->ns_gen++;
	/* Pin both directories: moving children out must not free them. */
	parent->refs++;
	newparent->refs++;
	snm = qn_name_find(t, parent, name);
	dnm = qn_name_find(t, newparent, newname);
	src = snm ? snm->node : NULL;
	dst = dnm ? dnm->node : NULL;
	/* The same name, or two links of one file: nothing moved. */
	if (snm == dnm || (src && src == dst))
		goto out_unpin;
	/* The nodes live on while their names move. */
	if (src)
		src->refs++;
	if (dst)
		dst->refs++;
	if (exchange) {
		if (snm)
			qn_name_unlink(t, snm);
		if (dnm)
			qn_name_unlink(t, dnm);
		if (src)
			place(t, src, newparent, newname);
		if (dst)
			place(t, dst, parent, name);
	} else {
		if (dst) {
			lost_link_locked(dst);
			qn_name_unlink(t, dnm);
		}
		if (src) {
			qn_name_unlink(t, snm);
			place(t, src, newparent, newname);
		}
	}
	if (src) {
		src->refs--;
		qn_maybe_free(t, src);
	}
	if (dst) {
		dst->refs--;
		qn_maybe_free(t, dst);
	}
out_unpin:
	parent->refs--;
	newparent->refs--;
	qn_maybe_free(t, parent);
	qn_maybe_free(t, newparent);
	pthread_mutex_unlock(&t->lock);
}

void qn_note_attr(struct qn_table *t, struct qn_node *n,
		  const struct qft_attr *a, bool *same)
{
	pthread_mutex_lock(&t->lock);
	if (same)
		*same = n->size == a->size && same_time(&n->mtime, &a->mtime);
	/* Changed: the kernel drops the pages on the next open. */
	if (n->size != a->size || !same_time(&n->mtime, &a->mtime)) {
		n->paged = false;
		n->paged_known = false;
	}
	note_times_locked(n, a, true);
	if (!n->rino || n->rino == a->ino)
		n->attr = *a;
	pthread_mutex_unlock(&t->lock);
}

void qn_file_note_attr(struct qn_table *t, struct qn_file *f,
		       const struct qft_attr *a, bool created)
{
	struct qn_node *n;

	pthread_mutex_lock(&t->lock);
	n = f->node;
	if (n && created && !n->rino) {
		set_attr_locked(t, n, a, true);
	} else if (n && !created) {
		note_times_locked(n, a, true);
		if (!n->rino || n->rino == a->ino)
			n->attr = *a;
	}
	pthread_mutex_unlock(&t->lock);
}

void qn_file_unlink_node(struct qn_table *t, struct qn_file *f)
{
	struct qn_node *n;

	pthread_mutex_lock(&t->lock);
	n = f->node;
	if (n && n->names)
		detach(t, n);
	pthread_mutex_unlock(&t->lock);
}

void qn_note_created(struct qn_table *t, struct qn_node *n,
		     const struct qft_attr *a)
{
	pthread_mutex_lock(&t->lock);
	if (!n->rino)
		set_attr_locked(t, n, a, true);
	pthread_mutex_unlock(&t->lock);
}

uint64_t qn_attr_gen(struct qn_table *t, struct qn_node *n)
{
	uint64_t gen;

	pthread_mutex_lock(&t->lock);
	gen = n->attr_gen;
	pthread_mutex_unlock(&t->lock);
	return gen;
}

/* qn_note_fresh with the table lock held; n may be NULL (detached). */
static void note_fresh_locked(struct qn_table *t, struct qn_node *n,
			      const struct qft_attr *a, uint64_t gen,
			      uint64_t until)
{
	if (n && n->rino == a->ino && n->attr_gen == gen) {
		note_times_locked(n, a, true);
		n->attr = *a;
		n->attr_until = until;
		n->attr_ns = t->ns_gen;
	}
}

void qn_note_fresh(struct qn_table *t, struct qn_node *n,
		   const struct qft_attr *a, uint64_t gen, uint64_t until)
{
	pthread_mutex_lock(&t->lock);
	note_fresh_locked(t, n, a, gen, until);
	pthread_mutex_unlock(&t->lock);
}

void qn_file_note_fresh(struct qn_table *t, struct qn_file *f,
			const struct qft_attr *a, uint64_t gen,
			uint64_t until)
{
	pthread_mutex_lock(&t->lock);
	note_fresh_locked(t, f->node, a, gen, until);
	pthread_mutex_unlock(&t->lock);
}

void qn_child_attr_stale(struct qn_table *t, struct qn_node *parent,
			 const char *name)
{
	struct qn_name *nm, **pp;

	pthread_mutex_lock(&t->lock);
	nm = qn_name_find(t, parent, name);
	if (nm) {
		attr_stale_locked(nm->node);
		/* The name may be gone: another of a linked file's names
		 * serves its paths until a lookup confirms this one. */
		for (pp = &nm->node->names; *pp != nm; pp = &(*pp)->next)
			;
		*pp = nm->next;
		for (; *pp; pp = &(*pp)->next)
			;
		*pp = nm;
		nm->next = NULL;
	}
	pthread_mutex_unlock(&t->lock);
}

uint64_t qn_child_attr_gen(struct qn_table *t, struct qn_node *parent,
			   const char *name)
{
	struct qn_node *n;
	uint64_t gen;

	pthread_mutex_lock(&t->lock);
	n = find(t, parent, name);
	gen = n ? n->attr_gen : 0;
	pthread_mutex_unlock(&t->lock);
	return gen;
}

void qn_note_fetched(struct qn_table *t, struct qn_node *n,
		     const struct qft_attr *a, uint64_t gen, uint64_t until)
{
	pthread_mutex_lock(&t->lock);
	/* A file with other names may be written through a node other
	 * than this one (a name looked up while it had one link is not
	 * merged, node.h): only the server knows its size. */
	if ((a->mode & QFT_S_IFMT) != QFT_S_IFDIR && a->nlink <= 1 &&
	    !qn_has_writer(n))
		note_fresh_locked(t, n, a, gen, until);
	pthread_mutex_unlock(&t->lock);
}

void qn_names_changed(struct qn_table *t)
{
	pthread_mutex_lock(&t->lock);
	t->ns_gen++;
	pthread_mutex_unlock(&t->lock);
}

void qn_attr_stale(struct qn_table *t, struct qn_node *n)
{
	pthread_mutex_lock(&t->lock);
	attr_stale_locked(n);
	pthread_mutex_unlock(&t->lock);
}

void qn_file_attr_stale(struct qn_table *t, struct qn_file *f)
{
	pthread_mutex_lock(&t->lock);
	if (f->node)
		attr_stale_locked(f->node);
	pthread_mutex_unlock(&t->lock);
}

bool qn_fresh_attr(struct qn_table *t, struct qn_node *n, uint64_t now,
		   struct qft_attr *out, double *left)
{
	bool fresh;

	pthread_mutex_lock(&t->lock);
	fresh = now < n->attr_until && n->attr_ns == t->ns_gen;
	if (fresh) {
		*out = n->attr;
		*left = (double)(n->attr_until - now) / 1e9;
	}
	pthread_mutex_unlock(&t->lock);
	return fresh;
}

void qn_note_paged(struct qn_table *t, struct qn_node *n,
		   const struct qft_attr *opened)
{
	pthread_mutex_lock(&t->lock);
	n->paged = true;
	n->paged_known = opened != NULL;
	if (opened) {
		n->paged_size = opened->size;
		n->paged_mtime = opened->mtime;
		n->paged_ctime = opened->ctime;
	}
	pthread_mutex_unlock(&t->lock);
}

bool qn_paged_attr(struct qn_table *t, struct qn_node *n,
		   struct qft_attr *out)
{
	bool ok;

	pthread_mutex_lock(&t->lock);
	ok = n->paged && n->paged_known && n->rino && n->attr.mode;
	if (ok) {
		*out = n->attr;
		out->ino = n->rino;
		out->size = n->paged_size;
		out->mtime = n->paged_mtime;
		out->ctime = n->paged_ctime;
	}
	pthread_mutex_unlock(&t->lock);
	return ok;
}

bool qn_pages_valid(struct qn_table *t, struct qn_node *n,
		    const struct qft_attr *a)
{
	struct qft_attr p;

	return qn_paged_attr(t, n, &p) && p.size == a->size &&
	       same_time(&p.mtime, &a->mtime) &&
	       same_time(&p.ctime, &a->ctime);
}

bool qn_paged(struct qn_table *t, struct qn_node *n)
{
	bool paged;

	pthread_mutex_lock(&t->lock);
	paged = n->paged;
	pthread_mutex_unlock(&t->lock);
	return paged;
}

bool qn_get_attr(struct qn_table *t, struct qn_node *n, struct qft_attr *out)
{
	bool known;

	pthread_mutex_lock(&t->lock);
	known = n->attr.mode != 0;
	*out = n->attr;
	pthread_mutex_unlock(&t->lock);
	return known;
}

void qn_unlink_node(struct qn_table *t, struct qn_node *n)
{
	pthread_mutex_lock(&t->lock);
	if (n->names)
		detach(t, n);
	pthread_mutex_unlock(&t->lock);
}

bool qn_replaced(struct qn_table *t, struct qn_node *n,
		 const struct qft_attr *a, bool ino_too)
{
	bool changed;

	pthread_mutex_lock(&t->lock);
	changed = (n->rtype && n->rtype != (a->mode & QFT_S_IFMT)) ||
		  (ino_too && n->rino && n->rino != a->ino);
	pthread_mutex_unlock(&t->lock);
	return changed;
}

void qn_set_noxattr_until(struct qn_table *t, struct qn_node *n,
			  uint64_t until)
{
	pthread_mutex_lock(&t->lock);
	n->noxattr_until = until;
	pthread_mutex_unlock(&t->lock);
}

uint64_t qn_noxattr_until(struct qn_table *t, struct qn_node *n)
{
	uint64_t until;

	pthread_mutex_lock(&t->lock);
	until = n->noxattr_until;
	pthread_mutex_unlock(&t->lock);
	return until;
}

void qn_set_nodefacl_until(struct qn_table *t, struct qn_node *n,
			   uint64_t until)
{
	pthread_mutex_lock(&t->lock);
	n->nodefacl_until = until;
	pthread_mutex_unlock(&t->lock);
}

uint64_t qn_nodefacl_until(struct qn_table *t, struct qn_node *n)
{
	uint64_t until;

	pthread_mutex_lock(&t->lock);
	until = n->nodefacl_until;
	pthread_mutex_unlock(&t->lock);
	return until;
}
