// SPDX-License-Identifier: MIT
/*
 * What the FUSE callbacks share (see internal.h): a node's path on the
 * server, what the server's user may do in a directory, the attributes a
 * prediction may start from, and the owner of what a caller makes.
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
 * Whether the server's user may create in a directory with attributes
 * `pa`, as far as its mode bits tell.  A create the client can see will
 * be refused (the usual EACCES) waits for the server, so that open(2)
 * fails as it would locally (a shell does not check close() after a
 * redirection); supplementary groups and ACLs the client cannot see make
 * it wait too, unless "other" may write.  Root may, short of a
 * read-only or immutable directory, which the close then reports.
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

/*
 * The owner an object made by the caller of `req` in `parent` must be
 * given: on a mount other local users may use (allow_other) and served
 * by root, what a user makes is theirs, as on a local filesystem (a
 * set-group-ID directory's group wins).  1 with *uid and *gid set (as the
 * server knows them, idmap.h), 0 when the server's own user is right, or
 * -EPERM when idmap cannot map the caller.
 */
int qc_ops_owner_for(fuse_req_t req, struct qc_fs *fs, struct qn_node *parent,
		     uint32_t *uid, uint32_t *gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint32_t su, sg;
	struct qft_attr pa;
	int r;

	if (!fs->multi_user)
		return 0;
	qc_conn_server_ids(fs->conn, &su, &sg);
	if (su != 0)
		return 0;
	*uid = ctx->uid;
	*gid = ctx->gid;
	r = qc_idmap_to_remote(&fs->idmap, uid, gid);
	if (r < 0)
		return r;
	if (qn_get_attr(&fs->nodes, parent, &pa) && (pa.mode & S_ISGID))
		*gid = pa.gid;
	return *uid != su || *gid != sg;
}

/*
 * Gives the object just made at `path` (through `handle` when not 0, on
 * link `gen`) the owner from owner_for; *rep is then its attributes.  On
 * failure the object is removed again (remove_op), so that nothing is
 * left that its maker does not own.
 */
int qc_ops_give_owner(struct qc_fs *fs, uint64_t gen, uint64_t handle,
		      const char *dir, const char *name, uint16_t remove_op,
		      uint32_t uid, uint32_t gid, struct qc_reply *rep)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rrep;
	struct qft_msg m;
	int r;

	if (snprintf(path, sizeof(path), "%s%s%s", dir, *dir ? "/" : "",
		     name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	qft_msg_init(&m, QFT_OP_SETATTR, 0);
	m.handle = handle;
	if (!handle)
		qc_set_str(&m.path, path);
	m.valid = QFT_SET_UID | QFT_SET_GID;
	m.uid = uid;
	m.gid = gid;
	r = handle ? qc_call_gen(fs->conn, gen, &m, rep) :
		     qc_call(fs->conn, &m, rep);
	if (r == 0)
		return 0;
	qft_warn("/%s: made, but giving it to uid %u gid %u failed: %s; "
		 "removing it", path, uid, gid, strerror(-r));
	qft_msg_init(&m, remove_op, 0);
	qc_set_str(&m.path, dir);
	qc_set_str(&m.name, name);
	if (qc_call(fs->conn, &m, &rrep) == 0)
		qc_reply_free(&rrep);
	return qc_conn_user_err(r);
}
