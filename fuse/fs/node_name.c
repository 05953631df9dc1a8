// SPDX-License-Identifier: MIT
/*
 * The inode table's names: the hash of (parent, name), a node's list of
 * names, paths built from them, and the object hash that leads every name
 * of a hard-linked file to one node (see node.h).  The functions of
 * node_internal.h run with t->lock held; the exported ones take it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs/node.h"
#include "fs/node_internal.h"
#include "protocol.h"

static size_t hash_of(const struct qn_node *parent, const char *name)
{
	uint64_t h = 14695981039346656037ull ^
		     ((uint64_t)(uintptr_t)parent * 0x9e3779b97f4a7c15ull);

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 1099511628211ull;
	}
	return (size_t)(h ^ (h >> 32));
}

static struct qn_name **bucket_of(struct qn_table *t,
				  const struct qn_node *parent,
				  const char *name)
{
	return &t->buckets[hash_of(parent, name) & (t->nbuckets - 1)];
}

struct qn_name *qn_name_find(struct qn_table *t, const struct qn_node *parent,
			     const char *name)
{
	struct qn_name *nm = *bucket_of(t, parent, name);

	for (; nm; nm = nm->hnext)
		if (nm->parent == parent && strcmp(nm->name, name) == 0)
			return nm;
	return NULL;
}

/* Doubles the bucket array at load 1; on failure chains just get longer. */
static void grow(struct qn_table *t)
{
	size_t nb = t->nbuckets * 2;
	struct qn_name **nbuckets;

	if (t->count < t->nbuckets)
		return;
	nbuckets = calloc(nb, sizeof(*nbuckets));
	if (!nbuckets)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct qn_name *nm = t->buckets[i];

		while (nm) {
			struct qn_name *next = nm->hnext;
			size_t b = hash_of(nm->parent, nm->name) & (nb - 1);

			nm->hnext = nbuckets[b];
			nbuckets[b] = nm;
			nm = next;
		}
	}
	free(t->buckets);
	t->buckets = nbuckets;
	t->nbuckets = nb;
}

int qn_name_add(struct qn_table *t, struct qn_node *n, struct qn_node *parent,
		const char *name)
{
	size_t len = strlen(name);
	struct qn_name *nm = malloc(sizeof(*nm) + len + 1);
	struct qn_name **b;

	if (!nm)
		return -ENOMEM;
	memcpy(nm->name, name, len + 1);
	nm->parent = parent;
	parent->refs++;
	nm->node = n;
	nm->next = n->names;
	n->names = nm;
	grow(t);
	b = bucket_of(t, parent, name);
	nm->hnext = *b;
	*b = nm;
	t->count++;
	qn_obj_sync(t, n);
	return 0;
}

void qn_name_first(struct qn_name *nm)
{
	struct qn_name **pp;

	for (pp = &nm->node->names; *pp != nm; pp = &(*pp)->next)
		;
	*pp = nm->next;
	nm->next = nm->node->names;
	nm->node->names = nm;
}

struct qn_node *qn_name_unlink(struct qn_table *t, struct qn_name *nm)
{
	struct qn_node *parent = nm->parent, *n = nm->node;
	struct qn_name **pp;

	for (pp = bucket_of(t, parent, nm->name); *pp; pp = &(*pp)->hnext) {
		if (*pp == nm) {
			*pp = nm->hnext;
			break;
		}
	}
	t->count--;
	for (pp = &n->names; *pp; pp = &(*pp)->next) {
		if (*pp == nm) {
			*pp = nm->next;
			break;
		}
	}
	free(nm);
	parent->refs--;
	qn_obj_sync(t, n);
	return parent;
}

/* ---- the object hash ---- */

static size_t obucket(const struct qn_table *t, uint64_t rino)
{
	return (size_t)((rino * 0x9e3779b97f4a7c15ull) >> 32) &
	       (t->nobuckets - 1);
}

void qn_obj_unhash(struct qn_table *t, struct qn_node *n)
{
	struct qn_node **pp;

	if (!n->ohashed)
		return;
	for (pp = &t->obuckets[obucket(t, n->rino)]; *pp; pp = &(*pp)->onext) {
		if (*pp == n) {
			*pp = n->onext;
			break;
		}
	}
	n->onext = NULL;
	n->ohashed = false;
	t->ocount--;
}

/* Doubles the buckets at load 1 (made on first use); on failure chains
 * get longer, or with none yet nothing is hashed. */
static void ogrow(struct qn_table *t)
{
	size_t nb = t->nobuckets ? t->nobuckets * 2 : QN_INITIAL_BUCKETS;
	struct qn_node **nbuckets, **old = t->obuckets;
	size_t oldn = t->nobuckets;

	if (t->obuckets && t->ocount < t->nobuckets)
		return;
	nbuckets = calloc(nb, sizeof(*nbuckets));
	if (!nbuckets)
		return;
	t->obuckets = nbuckets;
	t->nobuckets = nb;
	for (size_t i = 0; i < oldn; i++) {
		struct qn_node *n = old[i];

		while (n) {
			struct qn_node *next = n->onext;
			size_t b = obucket(t, n->rino);

			n->onext = nbuckets[b];
			nbuckets[b] = n;
			n = next;
		}
	}
	free(old);
}

struct qn_node *qn_obj_find(struct qn_table *t, uint64_t rino)
{
	if (!rino || !t->ocount)
		return NULL;
	for (struct qn_node *n = t->obuckets[obucket(t, rino)]; n;
	     n = n->onext)
		if (n->rino == rino)
			return n;
	return NULL;
}

void qn_obj_sync(struct qn_table *t, struct qn_node *n)
{
	bool want = n->names && n->rino && n->rtype &&
		    n->rtype != QFT_S_IFDIR;
	struct qn_node *old;
	size_t b;

	if (n->ohashed == want)
		return;
	if (!want) {
		qn_obj_unhash(t, n);
		return;
	}
	/* The newest node of an inode is the one its names lead to. */
	old = qn_obj_find(t, n->rino);
	if (old)
		qn_obj_unhash(t, old);
	ogrow(t);
	if (!t->obuckets)
		return;         /* out of memory: no name merges into it */
	b = obucket(t, n->rino);
	n->onext = t->obuckets[b];
	t->obuckets[b] = n;
	n->ohashed = true;
	t->ocount++;
}

/* ---- paths ---- */

int qn_path(struct qn_table *t, struct qn_node *n, const char *name,
	    char *buf)
{
	size_t total = 0, pos, len;
	int r;

	pthread_mutex_lock(&t->lock);
	for (struct qn_node *p = n; p != &t->root; p = p->names->parent) {
		if (!p->names) {
			r = -ENOENT;
			goto out_unlock;
		}
		total += strlen(p->names->name) + 1;
	}
	if (name)
		total += strlen(name) + 1;
	if (total)
		total--; /* no leading slash */
	if (total > QFT_MAX_PATH) {
		r = -ENAMETOOLONG;
		goto out_unlock;
	}

	pos = total;
	buf[pos] = '\0';
	if (name) {
		len = strlen(name);
		pos -= len;
		memcpy(buf + pos, name, len);
		if (pos)
			buf[--pos] = '/';
	}
	for (struct qn_node *p = n; p != &t->root; p = p->names->parent) {
		len = strlen(p->names->name);
		pos -= len;
		memcpy(buf + pos, p->names->name, len);
		if (pos)
			buf[--pos] = '/';
	}
	r = (int)total;
out_unlock:
	pthread_mutex_unlock(&t->lock);
	return r;
}

int qn_parent_ref(struct qn_table *t, struct qn_node *n,
		  struct qn_node **parent, char *name)
{
	int r = 0;

	pthread_mutex_lock(&t->lock);
	if (n == &t->root || !n->names) {
		r = -ENOENT;
		goto out_unlock;
	}
	*parent = n->names->parent;
	(*parent)->refs++;
	/* Names are checked against QFT_MAX_NAME before they get here. */
	strncpy(name, n->names->name, QFT_MAX_NAME);
	name[QFT_MAX_NAME] = '\0';
out_unlock:
	pthread_mutex_unlock(&t->lock);
	return r;
}
