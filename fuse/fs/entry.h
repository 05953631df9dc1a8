/* SPDX-License-Identifier: MIT */
/*
 * Entry and attribute replies: protocol attributes as the kernel is shown
 * them, with the mount's timeouts, inode numbers and owner mapping.  A
 * leaf: the directory cache and the callbacks both answer with it.
 */
#ifndef QC_ENTRY_H
#define QC_ENTRY_H

#include <sys/stat.h>

#include <fuse_lowlevel.h>

struct qc_fs;
struct qft_attr;
struct qn_node;

/* Protocol attributes of node `n` as the kernel gets them (its inode
 * number as node.h, "Inode numbers as the kernel is shown them"). */
void qc_entry_attr_to_stat(struct qc_fs *fs, struct qn_node *n,
			   const struct qft_attr *a, struct stat *st);

/* An entry reply for node `n` with attributes `a`, with the mount's
 * timeouts. */
void qc_entry_fill(struct qc_fs *fs, struct fuse_entry_param *e,
		   struct qn_node *n, const struct qft_attr *a);

#endif /* QC_ENTRY_H */
