/* SPDX-License-Identifier: MIT */
/*
 * What the files of the inode table (node.c, node_name.c, node_file.c)
 * share; not for other modules.  All run with the table's lock held.
 */
#ifndef QN_NODE_INTERNAL_H
#define QN_NODE_INTERNAL_H

#include "fs/node.h"

/* An open or release of file `f` of `n`: writes through it change its
 * attributes behind every cached copy (directories' opens and read-only
 * files change nothing). */
void qn_stamp_open(struct qn_node *n, const struct qn_file *f);
/* Whether `n` has a file open that may write. */
bool qn_has_writer(const struct qn_node *n);
/* Frees `n` and then each ancestor that nothing holds any more. */
void qn_maybe_free(struct qn_table *t, struct qn_node *n);

/* ---- node_name.c: names and the object hash ---- */

#define QN_INITIAL_BUCKETS 1024u

/* The name `name` in `parent`, or NULL. */
struct qn_name *qn_name_find(struct qn_table *t, const struct qn_node *parent,
			     const char *name);
/*
 * Gives `n` the name `name` in `parent` (which must have none), first of
 * its names: the one its paths use.  -ENOMEM leaves `n` as it was.
 */
int qn_name_add(struct qn_table *t, struct qn_node *n, struct qn_node *parent,
		const char *name);
/* Makes `nm` the first of its node's names. */
void qn_name_first(struct qn_name *nm);
/*
 * Takes `nm` from its node and the hash and frees it; returns its parent,
 * whose reference is dropped (the caller frees it if nothing holds it:
 * qn_maybe_free).  A node left without names leaves the object hash.
 */
struct qn_node *qn_name_unlink(struct qn_table *t, struct qn_name *nm);
/*
 * The object hash: a named non-directory with a known server inode is on
 * it (one node per inode: the last one put there); qn_obj_sync puts `n`
 * on it or takes it off as its names, type and inode say.
 */
void qn_obj_sync(struct qn_table *t, struct qn_node *n);
void qn_obj_unhash(struct qn_table *t, struct qn_node *n);
/* The node on the object hash for server inode `rino`, or NULL. */
struct qn_node *qn_obj_find(struct qn_table *t, uint64_t rino);

#endif /* QN_NODE_INTERNAL_H */
