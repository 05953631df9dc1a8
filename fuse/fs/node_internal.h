/* SPDX-License-Identifier: MIT */
/*
 * What the files of the inode table (node.c, node_file.c) share; not for
 * other modules.  Both run with the table's lock held.
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

#endif /* QN_NODE_INTERNAL_H */
