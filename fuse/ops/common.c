// SPDX-License-Identifier: MIT
/*
 * What the FUSE callbacks share (see internal.h): a node's path on the
 * server, what a user may do in a directory, the attributes a prediction
 * may start from, and whom the server acts as.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/idmap.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "ops/internal.h"
#include "protocol.h"

/* Kernel names can be up to 1024 bytes; the protocol allows NAME_MAX. */
int qc_ops_check_name(const char *name)
{
	return strlen(name) > QFT_MAX_NAME ? -ENAMETOOLONG : 0;
}

int qc_ops_node_path(struct qc_fs *fs, fuse_ino_t ino, const char *name,
		     char *buf)
{
	int r;

	if (name && (r = qc_ops_check_name(name)) < 0)
		return r;
	r = qn_path(&fs->nodes, qc_fs_node(fs, ino), name, buf);
	return r < 0 ? r : 0;
}

/*
 * Whether the user the server acts as (qc_ops_actor) may create in a
 * directory with attributes `pa`, as far as its mode bits tell.  A create
 * the client can see will be refused (the usual EACCES) waits for the
 * server, so that open(2) fails as it would locally (a shell does not
 * check close() after a redirection); supplementary groups and ACLs the
 * client cannot see make it wait too, unless "other" may write.  Root
 * may, short of a read-only or immutable directory, which the close then
 * reports.
 */
bool qc_ops_may_create_in(const struct qft_attr *pa, uint32_t uid,
			  uint32_t gid)
{
	uint32_t need = 03; /* write and search */

	if (uid == 0)
		return true;
	if (pa->uid == uid)
		return ((pa->mode >> 6) & need) == need;
	if (pa->gid == gid && ((pa->mode >> 3) & need) == need)
		return true;
	return (pa->mode & need) == need;
}

/*
 * Attributes of `n` a prediction may start from: what its open files
 * will have made of it, or attributes still fresh (never merely the last
 * ones seen: a file written since has another size).
 */
bool qc_ops_current_attr(struct qc_fs *fs, struct qn_node *n,
			 struct qft_attr *a)
{
	double left;

	return qc_step_predicted(fs, n, a) ||
	       qn_fresh_attr(&fs->nodes, n, qc_now_ns(), a, &left) ||
	       (n != &fs->nodes.root && qc_dir_cached_attr(fs, n, a));
}

void qc_ops_actor(struct qc_fs *fs, uint32_t *uid, uint32_t *gid)
{
	const struct qft_cred *c = qc_call_caller();

	if (c) {
		*uid = c->uid;
		*gid = c->gid;
		return;
	}
	qc_conn_server_ids(fs->conn, uid, gid);
}
