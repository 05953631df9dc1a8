// SPDX-License-Identifier: MIT
/* Entry and attribute replies as the kernel gets them (see entry.h). */
#include <string.h>
#include <sys/stat.h>

#include <fuse_lowlevel.h>

#include "fs/entry.h"
#include "fs/fs.h"
#include "fs/idmap.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"

void qc_entry_attr_to_stat(struct qc_fs *fs, struct qn_node *n,
			   const struct qft_attr *a, struct stat *st)
{
	qft_attr_to_stat(a, st);
	st->st_ino = qn_shown_ino(&fs->nodes, n, a->ino);
	/*
	 * The preferred I/O size is what one request carries, not the
	 * server's disk block: cp and friends size their buffers from it, and
	 * each write(2) is one round trip.
	 */
	st->st_blksize = QFT_MAX_DATA;
	/* -o idmap=, uid=, gid=, umask= (idmap.h) */
	qc_idmap_to_local(&fs->idmap, st);
}

void qc_entry_fill(struct qc_fs *fs, struct fuse_entry_param *e,
		   struct qn_node *n, const struct qft_attr *a)
{
	memset(e, 0, sizeof(*e));
	e->ino = qn_to_ino(&fs->nodes, n);
	e->attr_timeout = fs->attr_timeout;
	e->entry_timeout = fs->entry_timeout;
	qc_entry_attr_to_stat(fs, n, a, &e->attr);
}
