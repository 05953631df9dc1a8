// SPDX-License-Identifier: MIT
/*
 * The callbacks that make, find, rename and remove names: lookup and
 * forget, mknod, mkdir, symlink, link, unlink, rmdir, rename (see
 * internal.h).  create, which also opens, is in files.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>    /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/hints.h"
#include "msg.h"
#include "fs/node.h"
#include "ops/internal.h"
#include "protocol.h"

/* Answers a request that created or found node n (NULL: out of memory)
 * with attributes a.  `passing`: an answer true only for this request
 * (make_entry), which the kernel and the node must not keep.  `agen`:
 * for a LOOKUP's answer, the node's attr_gen before it was sent
 * (qn_note_fetched), else NULL. */
static void reply_node(fuse_req_t req, struct qc_fs *fs, struct qn_node *n,
		       const struct qft_attr *a, uint64_t xgen, bool passing,
		       const uint64_t *agen)
{
	struct fuse_entry_param e;
	struct qft_attr fresh;

	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	qc_hint_noxattr_note(fs, n, a, xgen);
	if (agen && fs->attr_timeout > 0)
		qn_note_fetched(&fs->nodes, n, a, *agen, qc_fs_attr_until(fs));
	qc_entry_fill(fs, &e, n,
		      qc_file_attr_behind_writes(fs, n, a, &fresh) ?
		      &fresh : a);
	if (passing) {
		e.entry_timeout = 0;
		e.attr_timeout = 0;
		qn_attr_stale(&fs->nodes, n);
	}
	/* An interrupted request's reply never reaches the kernel, and
	 * neither does the lookup it counted. */
	if (fuse_reply_entry(req, &e) != 0)
		qn_forget(&fs->nodes, n, 1);
}

/* reply_node for the node `name` in `parent` leads to (made if needed;
 * the node of another name of the same file if it is a hard link). */
static void reply_entry(fuse_req_t req, struct qc_fs *fs, fuse_ino_t parent,
			const char *name, const struct qft_attr *a,
			uint64_t xgen, bool passing, const uint64_t *agen)
{
	reply_node(req, fs, qn_lookup(&fs->nodes, qc_fs_node(fs, parent), name,
				      a), a, xgen, passing, agen);
}

/*
 * A LOOKUP found no `name` in `dir` where the table has one: it went on
 * the server behind the client's back, and the notification, if any, is
 * still on its way.  A file with other names loses this one here (paths
 * use another) and its link count in the kernel, before the kernel sees
 * the name gone and a stat through another could show the old count.
 * Directories are left to the notification: a path through a directory
 * renamed away fails the same way.
 */
static void name_gone(struct qc_fs *fs, struct qn_node *dir, const char *name)
{
	struct qn_node *n = qn_find_ref(&fs->nodes, dir, name);
	struct qft_attr a;

	if (!n)
		return;
	if (qn_get_attr(&fs->nodes, n, &a) &&
	    (a.mode & QFT_S_IFMT) != QFT_S_IFDIR) {
		qn_remove(&fs->nodes, dir, name);
		if (fs->se)
			fuse_lowlevel_notify_inval_inode(fs->se,
				qn_to_ino(&fs->nodes, n), -1, 0);
	}
	qn_unref(&fs->nodes, n);
}

void qc_ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_dir_fetch fb;
	struct qc_reply rep;
	struct qft_msg m;
	bool sent = false;
	uint64_t agen;
	int r;

	r = qc_ops_node_path(fs, parent, name, path);
	if (r < 0)
		goto out_err;
	if (qc_dir_reply_lookup(req, fs, parent, name))
		return;
	qft_msg_init(&m, QFT_OP_LSTAT, 0);
	qc_set_str(&m.path, path);
	/*
	 * A pipelined CREATE of the name must be seen (file.h).  The fetch
	 * begins first: a create counted after the settle is then recorded
	 * after it and spoils this answer, which may have overtaken its
	 * CREATE on the other stream.
	 */
	qc_dir_fetch_begin(fs, &fb);
	qc_step_settle(fs);
	agen = qn_child_attr_gen(&fs->nodes, qc_fs_node(fs, parent), name);
	sent = true;
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	qc_dir_note_fetched(fs, qc_fs_node(fs, parent), name, &rep.msg.attr,
			    &fb);
	reply_entry(req, fs, parent, name, &rep.msg.attr, fb.xgen, false,
		    &agen);
	qc_reply_free(&rep);
	return;
out_err:
	if (r == -ENOENT && sent) {
		qc_dir_note_fetched(fs, qc_fs_node(fs, parent), name, NULL,
				    &fb);
		name_gone(fs, qc_fs_node(fs, parent), name);
	}
	if (r == -ENOENT && fs->negative_timeout > 0) {
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->negative_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	fuse_reply_err(req, -r);
}

void qc_ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct qc_fs *fs = fs_of(req);

	qn_forget(&fs->nodes, qc_fs_node(fs, ino), nlookup);
	fuse_reply_none(req);
}

void qc_ops_forget_multi(fuse_req_t req, size_t count,
			 struct fuse_forget_data *forgets)
{
	struct qc_fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++)
		qn_forget(&fs->nodes, qc_fs_node(fs, forgets[i].ino),
			  forgets[i].nlookup);
	fuse_reply_none(req);
}

/*
 * MKNOD, MKDIR and SYMLINK: an entry op whose reply is the new attrs.  The
 * parent's listing gains the name; a new directory's listing is known
 * empty.  A failure drops the parent's listing: the name exists after all
 * (EEXIST), or the request may have taken effect (a lost reply).
 */
static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
		       struct qft_msg *m)
{
	struct qc_fs *fs = fs_of(req);
	struct qn_node *dir = qc_fs_node(fs, parent), *n;
	char path[QFT_MAX_PATH + 1];
	struct qc_dir_fetch fb;
	struct qc_reply rep;
	bool nodefacl;
	int r;
	/*
	 * -o follow_symlinks: the kernel must get the new link as a link,
	 * while the server shows it as what it leads to from now on; so
	 * this answer is cached nowhere (no listing entry, no kernel
	 * timeouts) and the next lookup asks the server.
	 */
	bool passing = fs->follow && m->op == QFT_OP_SYMLINK;

	r = qc_ops_check_name(name);
	if (r < 0)
		goto out_err;
	r = qc_ops_node_path(fs, parent, NULL, path);
	if (r < 0)
		goto out_err;
	qc_set_str(&m->path, path);
	qc_set_str(&m->name, name);
	qc_dir_fetch_begin(fs, &fb);
	/* A directory inherits its default ACL from its parent's, so one
	 * made in a directory known to have none has none either: the first
	 * file made in it with a mode the umask cuts (a compiler's 0666)
	 * needs no question (caller.c, caller_mode). */
	nodefacl = m->op == QFT_OP_MKDIR && qc_hint_nodefacl(fs, dir);
	/* On a shared mount the server makes it as the caller (caller.c):
	 * owned by them from the start, nothing to give away after. */
	r = qc_call(fs->conn, m, &rep);
	if (r < 0) {
		qc_dir_drop(fs, dir);
		goto out_err;
	}
	if (passing)
		qc_dir_drop(fs, dir);
	else if (m->op == QFT_OP_MKDIR)
		qc_dir_note_mkdir(fs, dir, name, &rep.msg.attr, &fb);
	else
		qc_dir_note_entry(fs, dir, name, &rep.msg.attr);
	n = qn_lookup(&fs->nodes, dir, name, &rep.msg.attr);
	if (n && nodefacl)
		qc_hint_nodefacl_note(fs, n, fb.xgen);
	reply_node(req, fs, n, &rep.msg.attr, fb.xgen, passing, NULL);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

void qc_ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode, dev_t rdev)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_MKNOD, 0);
	m.mode = mode & (QFT_S_IFMT | 07777);
	m.rdev = rdev;
	make_entry(req, parent, name, &m);
}

void qc_ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_MKDIR, 0);
	m.mode = mode & 07777;
	make_entry(req, parent, name, &m);
}

void qc_ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		    const char *name)
{
	struct qft_msg m;

	if (strlen(link) > QFT_MAX_PATH) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	qft_msg_init(&m, QFT_OP_SYMLINK, 0);
	qc_set_str(&m.target, link);
	make_entry(req, parent, name, &m);
}

/*
 * UNLINK and RMDIR: the name goes away on the server, then here.  A file
 * with other names keeps its node (node.h), whose link count and ctime
 * the kernel then asks for again: it drops its own copy of the inode's
 * attributes when unlink(2) or rename(2) over a name succeeds, and the
 * table no longer answers from what it fetched before.
 */
static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 uint16_t op)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	r = qc_ops_check_name(name);
	if (r < 0)
		goto out;
	r = qc_ops_node_path(fs, parent, NULL, path);
	if (r < 0)
		goto out;
	qft_msg_init(&m, op, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.name, name);
	qc_step_settle(fs);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		qc_dir_drop(fs, qc_fs_node(fs, parent));
		goto out;
	}
	qc_reply_free(&rep);
	qc_dir_note_gone(fs, qc_fs_node(fs, parent), name);
	qn_remove(&fs->nodes, qc_fs_node(fs, parent), name);
out:
	fuse_reply_err(req, -r);
}

void qc_ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, QFT_OP_UNLINK);
}

void qc_ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, QFT_OP_RMDIR);
}

/*
 * commit=async (commit.h): whether a rename may be answered before the
 * server did.  Only when its outcome is known: both directories leased
 * and made by this client (qc_dir_leased_name), writable by the user the
 * server acts as (qc_ops_actor) without a sticky bit, the source a file
 * or symlink, and the target absent or not a directory.
 */
static bool rename_predicted(struct qc_fs *fs, struct qn_node *dir,
			     const char *name, struct qn_node *newdir,
			     const char *newname, unsigned int flags)
{
	struct qft_attr da, na;
	uint32_t uid, gid, type, ttype;
	int r;

	if (!fs->commit.on || fs->window == 0 || flags)
		return false;
	qc_ops_actor(fs, &uid, &gid);
	if (!qn_get_attr(&fs->nodes, dir, &da) ||
	    !qn_get_attr(&fs->nodes, newdir, &na) ||
	    !qc_ops_may_create_in(&da, uid, gid) ||
	    !qc_ops_may_create_in(&na, uid, gid) ||
	    (uid != 0 && ((da.mode | na.mode) & S_ISVTX)))
		return false;
	if (qc_dir_leased_name(fs, dir, name, &type) != 1 ||
	    (type != QFT_S_IFREG && type != QFT_S_IFLNK))
		return false;
	r = qc_dir_leased_name(fs, newdir, newname, &ttype);
	return r == 0 || (r == 1 && ttype != QFT_S_IFDIR);
}

struct rename_fix {
	struct qn_node *dir, *newdir;   /* references */
};

/* The outcome of an asynchronous RENAME (qc_commit_fix_fn). */
static void rename_fixed(struct qc_fs *fs, void *ctx, int err,
			 const struct qc_reply *rep)
{
	struct rename_fix *rf = ctx;

	(void)rep;
	if (err) {
		/* The names are not where the caches put them. */
		qn_names_changed(&fs->nodes);
		qc_dir_drop(fs, rf->dir);
		qc_dir_drop(fs, rf->newdir);
	}
	qn_unref(&fs->nodes, rf->dir);
	qn_unref(&fs->nodes, rf->newdir);
	free(rf);
}

static int rename_async(struct qc_fs *fs, struct qn_node *dir,
			struct qn_node *newdir, struct qft_msg *m,
			const char *shown)
{
	struct rename_fix *rf = malloc(sizeof(*rf));
	int r;

	if (!rf)
		return -ENOMEM;
	qn_ref(&fs->nodes, dir);
	qn_ref(&fs->nodes, newdir);
	rf->dir = dir;
	rf->newdir = newdir;
	r = qc_commit_path_op(fs, m, shown, rename_fixed, rf);
	if (r < 0) {
		qn_unref(&fs->nodes, dir);
		qn_unref(&fs->nodes, newdir);
		free(rf);
	}
	return r;
}

/*
 * Whether two names are, as far as this client knows, links of one
 * server inode: rename(2) then does nothing and both names stay.  The
 * kernel does not ask when both lead to one node (vfs_rename returns at
 * once); when they do not (a link the table could not tell from another
 * file), it moves its dentry as for any rename, and the node follows.
 */
static bool same_object(struct qc_fs *fs, fuse_ino_t parent, const char *name,
			fuse_ino_t newparent, const char *newname)
{
	struct qn_node *a, *b = NULL;
	bool same = false;

	a = qn_find_ref(&fs->nodes, qc_fs_node(fs, parent), name);
	if (a)
		b = qn_find_ref(&fs->nodes, qc_fs_node(fs, newparent),
				newname);
	if (a && b)
		same = qn_rino(&fs->nodes, a) &&
		       qn_rino(&fs->nodes, a) == qn_rino(&fs->nodes, b);
	if (b)
		qn_unref(&fs->nodes, b);
	if (a)
		qn_unref(&fs->nodes, a);
	return same;
}

void qc_ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		   fuse_ino_t newparent, const char *newname,
		   unsigned int flags)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1], path2[QFT_MAX_PATH + 1];
	char shown[QFT_MAX_PATH + QFT_MAX_NAME + 2];
	struct qc_reply rep;
	struct qft_msg m;
	bool same;
	int r;

	qft_msg_init(&m, QFT_OP_RENAME, 0);
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		r = -EINVAL;
		goto out;
	}
	if (flags & RENAME_NOREPLACE)
		m.opflags |= QFT_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		m.opflags |= QFT_RENAME_EXCHANGE;
	if ((r = qc_ops_check_name(name)) < 0 ||
	    (r = qc_ops_check_name(newname)) < 0 ||
	    (r = qc_ops_node_path(fs, parent, NULL, path)) < 0 ||
	    (r = qc_ops_node_path(fs, newparent, NULL, path2)) < 0)
		goto out;
	qc_set_str(&m.path, path);
	qc_set_str(&m.name, name);
	qc_set_str(&m.path2, path2);
	qc_set_str(&m.name2, newname);
	/* A file whose CREATE is unanswered has no server inode yet, and
	 * is nobody's other link. */
	same = !flags && same_object(fs, parent, name, newparent, newname);
	if (!same && rename_predicted(fs, qc_fs_node(fs, parent), name,
			     qc_fs_node(fs, newparent), newname, flags) &&
	    snprintf(shown, sizeof(shown), "%s%s%s", path, *path ? "/" : "",
		     name) > 0 &&
	    rename_async(fs, qc_fs_node(fs, parent),
			 qc_fs_node(fs, newparent), &m, shown) == 0) {
		/* rsync's rename of its temporary file over the target:
		 * in order behind the file's data (commit.h). */
		qc_stat_inc(&fs->stats, QC_STAT_RENAME_ASYNC);
		goto out_renamed;
	}
	qc_step_settle(fs);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0 || same) {
		/* After a same-object rename the listings are what they
		 * were, if the client knew right; asked for again in case
		 * it did not. */
		qc_dir_drop(fs, qc_fs_node(fs, parent));
		qc_dir_drop(fs, qc_fs_node(fs, newparent));
	}
	if (r < 0)
		goto out;
	qc_reply_free(&rep);
	if (same) {
		/* Only the kernel's dentry moves: the node follows it. */
		qn_rename(&fs->nodes, qc_fs_node(fs, parent), name,
			  qc_fs_node(fs, newparent), newname, false);
		goto out;
	}
out_renamed:
	qc_dir_note_rename(fs, qc_fs_node(fs, parent), name,
			   qc_fs_node(fs, newparent), newname,
			   flags & RENAME_EXCHANGE);
	qn_rename(&fs->nodes, qc_fs_node(fs, parent), name, qc_fs_node(fs, newparent),
		  newname, flags & RENAME_EXCHANGE);
out:
	fuse_reply_err(req, -r);
}

void qc_ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		 const char *newname)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1], path2[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;
	uint64_t xgen;

	if ((r = qc_ops_check_name(newname)) < 0 ||
	    (r = qc_ops_node_path(fs, ino, NULL, path)) < 0 ||
	    (r = qc_ops_node_path(fs, newparent, NULL, path2)) < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_LINK, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.path2, path2);
	qc_set_str(&m.name2, newname);
	qc_step_settle(fs);
	xgen = qc_hint_xattr_gen(fs);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		qc_dir_drop(fs, qc_fs_node(fs, newparent));
		goto out_err;
	}
	qc_dir_note_link(fs, qc_fs_node(fs, newparent), newname,
			 &rep.msg.attr);
	/*
	 * The new name is one more of the node linked (node.h): the kernel
	 * finds its inode again in the answer and takes the link count and
	 * ctime in it, for every name at once.
	 */
	reply_node(req, fs, qn_link(&fs->nodes, qc_fs_node(fs, ino),
				    qc_fs_node(fs, newparent), newname,
				    &rep.msg.attr),
		   &rep.msg.attr, xgen, false, NULL);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}
