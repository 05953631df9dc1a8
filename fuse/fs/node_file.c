// SPDX-License-Identifier: MIT
/* The inode table's open files: attaching them to their node, borrowing
 * and dropping references (see node.h).  Every function takes t->lock. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs/node.h"
#include "fs/node_internal.h"
#include "protocol.h"

void qn_file_attach(struct qn_table *t, struct qn_node *n, struct qn_file *f,
		    uint64_t handle)
{
	pthread_mutex_lock(&t->lock);
	f->node = n;
	f->handle = handle;
	f->refs = 1;
	f->listed = true;
	f->next = n->files;
	n->files = f;
	n->refs++;
	qn_stamp_open(n, f);
	pthread_mutex_unlock(&t->lock);
}

struct qn_file *qn_file_borrow(struct qn_table *t, struct qn_node *n)
{
	struct qn_file *f;

	pthread_mutex_lock(&t->lock);
	f = n->files;
	if (f)
		f->refs++;
	pthread_mutex_unlock(&t->lock);
	return f;
}

static void unlist(struct qn_file *f)
{
	struct qn_file **pp;

	if (!f->listed)
		return;
	for (pp = &f->node->files; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	f->next = NULL;
	f->listed = false;
}

/* Drops one reference; table lock held. */
static bool file_unref(struct qn_table *t, struct qn_file *f)
{
	struct qn_node *n = f->node;

	if (--f->refs > 0)
		return false;
	unlist(f);
	qn_stamp_open(n, f);
	n->refs--;
	qn_maybe_free(t, n);
	f->node = NULL;
	return true;
}

bool qn_file_put(struct qn_table *t, struct qn_file *f)
{
	bool last;

	pthread_mutex_lock(&t->lock);
	last = file_unref(t, f);
	pthread_mutex_unlock(&t->lock);
	return last;
}

bool qn_file_detach(struct qn_table *t, struct qn_file *f)
{
	bool last;

	pthread_mutex_lock(&t->lock);
	unlist(f);
	last = file_unref(t, f);
	pthread_mutex_unlock(&t->lock);
	return last;
}

bool qn_file_replaced(struct qn_table *t, struct qn_file *f,
		      const struct qft_attr *a)
{
	struct qn_node *n;
	bool changed = false;

	pthread_mutex_lock(&t->lock);
	n = f->node;
	if (n)
		changed = (n->rtype && n->rtype != (a->mode & QFT_S_IFMT)) ||
			  (n->rino && n->rino != a->ino);
	pthread_mutex_unlock(&t->lock);
	return changed;
}

struct qn_node *qn_file_node(struct qn_table *t, struct qn_file *f)
{
	struct qn_node *n;

	pthread_mutex_lock(&t->lock);
	n = f->node;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void qn_for_each_file(struct qn_table *t, struct qn_node *n,
		      bool (*fn)(struct qn_file *f, void *ctx), void *ctx)
{
	pthread_mutex_lock(&t->lock);
	for (struct qn_file *f = n ? n->files : NULL; f; f = f->next)
		if (fn(f, ctx))
			break;
	pthread_mutex_unlock(&t->lock);
}
