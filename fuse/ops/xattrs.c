// SPDX-License-Identifier: MIT
/*
 * The callbacks of extended attributes: getxattr, setxattr, listxattr
 * and removexattr, and the mount's own attributes on its root (see
 * internal.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "net/conn.h"
#include "fs/commit.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/hints.h"
#include "msg.h"
#include "fs/node.h"
#include "ops/internal.h"
#include "ops/reqlog.h"
#include "fs/stats.h"
#include "fs/steps.h"
#include "protocol.h"

/*
 * SELinux labels.  `ls -l` asks for each entry's (beside its ACL), and
 * the kernel keeps no answer of ours: 10,000 entries cost 10,000 calls,
 * even where the server has no labels at all.  Told "not supported"
 * instead, ls stops asking for the whole mount (as on sshfs, which has
 * no xattrs).  So where the server's root has no label -- SELinux is not
 * labelling the served file system -- every object's is answered that
 * way without asking, until a label is set through the mount.  One
 * mount per process: the state is the process's.
 */
#define SELINUX_XATTR "security.selinux"
enum { LABELS_UNKNOWN, LABELS_NONE, LABELS_SOME };
static atomic_int labels = LABELS_UNKNOWN;

/* Whether the server may have labels: asked once, of the root.  Any
 * answer but a clear "none" (a lost link, a refusal) asks again next
 * time and forwards this one. */
static bool server_has_labels(struct qc_fs *fs)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r, state = atomic_load(&labels);

	if (state != LABELS_UNKNOWN)
		return state == LABELS_SOME;
	if (qc_ops_node_path(fs, FUSE_ROOT_ID, NULL, path) < 0)
		return true;
	qft_msg_init(&m, QFT_OP_GETXATTR, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.xname, SELINUX_XATTR);
	m.length = 0;
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0) {
		qc_reply_free(&rep);
		atomic_store(&labels, LABELS_SOME);
		return true;
	}
	if (r != -ENODATA && r != -EOPNOTSUPP)
		return true;
	/* A label set meanwhile (LABELS_SOME) wins. */
	(void)atomic_compare_exchange_strong(&labels, &state, LABELS_NONE);
	return atomic_load(&labels) == LABELS_SOME;
}

/* The access ACL: writing it sets the mode bits too (acl(5)). */
#define ACL_ACCESS_XATTR "system.posix_acl_access"

/* Its value as the kernel carries it: a version, then entries of a tag, a
 * permission and an id, little-endian (linux/posix_acl_xattr.h). */
#define ACL_XATTR_VERSION 2u
#define ACL_TAG_USER_OBJ  0x01u
#define ACL_TAG_GROUP_OBJ 0x04u
#define ACL_TAG_MASK      0x10u
#define ACL_TAG_OTHER     0x20u

static uint32_t load_le(const uint8_t *p, int bytes)
{
	uint32_t v = 0;

	while (bytes-- > 0)
		v = v << 8 | p[bytes];
	return v;
}

/*
 * The mount's counters (stats.h) as the value of QC_STATS_XATTR: never
 * waiting for the server, whatever the link does.  The round trip shown
 * is the previous probe's; this reading's goes out after the text is
 * made, which therefore does not count it as owed by the server.
 */
static void reply_stats(fuse_req_t req, struct qc_fs *fs, size_t size)
{
	size_t len = qc_stats_format(&fs->stats, fs->conn, NULL, 0);
	char *buf = NULL;

	if (size == 0) {
		fuse_reply_xattr(req, len);
	} else if (size < len) {
		fuse_reply_err(req, ERANGE);
	} else if (!(buf = malloc(len + 1))) {
		fuse_reply_err(req, ENOMEM);
	} else {
		len = qc_stats_format(&fs->stats, fs->conn, buf, len + 1);
		fuse_reply_buf(req, buf, len);
	}
	free(buf);
	qc_stats_probe(&fs->stats, fs->conn);
}

/* `qftfs --sync` (commit.h): waits, then the report as the value. */
static void reply_sync(fuse_req_t req, struct qc_fs *fs, size_t size)
{
	char text[QFT_MAX_PATH + 256];
	size_t len;

	qc_commit_sync(fs, text, sizeof(text));
	len = strlen(text);
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, text, len);
}

/* The files being read or written (reqlog.h) as the value of
 * QC_TRANSFERS_XATTR. */
static void reply_transfers(fuse_req_t req, size_t size)
{
	size_t len = 0;
	char *text = qc_reqlog_transfers(&len);

	if (!text)
		fuse_reply_err(req, ENOMEM);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, text, len);
	free(text);
}

/* Whether `name` of `ino` is the client's own, not the server's to set. */
static bool is_own_xattr(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID && (strcmp(name, QC_STATS_XATTR) == 0 ||
				       strcmp(name, QC_COMMIT_SYNC_XATTR) == 0);
}

/*
 * Answers a read of the mount's own attributes of its root: the stats,
 * the sync report, and the transfers (only reading that one is the
 * client's; it is not refused to setxattr).  To the mounting user and
 * root only: with allow_other, other users must not read what this user
 * does.  Whether `name` was one of them (and so answered).
 */
static bool reply_own_xattr(fuse_req_t req, struct qc_fs *fs, fuse_ino_t ino,
			    const char *name, size_t size)
{
	const struct fuse_ctx *ctx;
	bool transfers = ino == FUSE_ROOT_ID &&
			 strcmp(name, QC_TRANSFERS_XATTR) == 0;

	if (!transfers && !is_own_xattr(ino, name))
		return false;
	ctx = fuse_req_ctx(req);
	/* What this user's mount does is this user's business. */
	if (ctx->uid != getuid() && ctx->uid != 0)
		fuse_reply_err(req, EACCES);
	else if (transfers)
		reply_transfers(req, size);
	else if (strcmp(name, QC_COMMIT_SYNC_XATTR) == 0)
		reply_sync(req, fs, size);
	else
		reply_stats(req, fs, size);
	return true;
}

/*
 * An extended attribute of `n` was set or removed: its ctime changed, and
 * a POSIX ACL changes its mode too (cp -a sets a directory's mode that
 * way), so attributes noted before are neither fresh nor trusted.
 */
static void xattr_changed_attrs(struct qc_fs *fs, struct qn_node *n)
{
	qn_attr_stale(&fs->nodes, n);
	qn_touch(&fs->nodes, n);
}

/*
 * The permission bits access ACL `v` gives the mode, as the server's
 * kernel computes them when it is set: the owner's from the owner entry,
 * the group's from the mask when there is one (else the owning group's),
 * the others' from theirs.  -EINVAL for a value it would refuse.
 */
static int acl_mode_bits(const uint8_t *v, size_t len, uint32_t *bits)
{
	uint32_t user = 0, group = 0, mask = 0, other = 0;
	bool have_user = false, have_group = false, have_mask = false,
	     have_other = false;

	if (len < 4 || (len - 4) % 8 != 0 ||
	    load_le(v, 4) != ACL_XATTR_VERSION)
		return -EINVAL;
	for (size_t off = 4; off < len; off += 8) {
		uint32_t tag = load_le(v + off, 2);
		uint32_t perm = load_le(v + off + 2, 2) & 07;

		if (tag == ACL_TAG_USER_OBJ) {
			user = perm;
			have_user = true;
		} else if (tag == ACL_TAG_GROUP_OBJ) {
			group = perm;
			have_group = true;
		} else if (tag == ACL_TAG_MASK) {
			mask = perm;
			have_mask = true;
		} else if (tag == ACL_TAG_OTHER) {
			other = perm;
			have_other = true;
		}
	}
	if (!have_user || !have_group || !have_other)
		return -EINVAL;
	*bits = user << 6 | (have_mask ? mask : group) << 3 | other;
	return 0;
}

/*
 * The attributes of `ino` as the server has them now, into *a: asked
 * behind the WRITEs and steps of an open file of it, else by path.
 */
static int fetch_attr(struct qc_fs *fs, fuse_ino_t ino, struct qft_attr *a)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_file *f;
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	f = qc_file_borrow_behind(fs, qc_fs_node(fs, ino));
	if (f) {
		qft_msg_init(&m, QFT_OP_FSTAT, 0);
		r = qc_file_call(fs, f, &m, &rep);
		qc_file_put(fs, f);
	} else {
		r = qc_ops_node_path(fs, ino, NULL, path);
		if (r < 0)
			return r;
		qft_msg_init(&m, QFT_OP_LSTAT, 0);
		qc_set_str(&m.path, path);
		r = qc_call(fs->conn, &m, &rep);
	}
	if (r < 0)
		return r;
	*a = rep.msg.attr;
	qc_reply_free(&rep);
	return 0;
}

/*
 * An access ACL `value` was set on `ino`: the mode the server's kernel
 * made of it is what the next stat must say (cp -a and rsync -A set a
 * copy's mode this way, then stat or run it), not the mode noted before.
 * Computed from the ACL when the object's attributes are known and no
 * set-group-ID bit leaves it to the server's rules (who is in the group)
 * whether that bit stays; else asked.  Told to the node, its open files'
 * predictions and the parent's listing, and the kernel made to ask again.
 */
static void acl_set_mode(struct qc_fs *fs, fuse_ino_t ino, const char *value,
			 size_t size)
{
	struct qn_node *n = qc_fs_node(fs, ino);
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	struct qft_attr a, last;
	struct timespec ts;
	uint32_t bits;

	if (acl_mode_bits((const uint8_t *)value, size, &bits) == 0 &&
	    qc_ops_current_attr(fs, n, &a) && !(a.mode & 02000u)) {
		a.mode = (a.mode & ~0777u) | bits;
		clock_gettime(CLOCK_REALTIME, &ts);
		a.ctime.sec = ts.tv_sec;
		a.ctime.nsec = (uint32_t)ts.tv_nsec;
	} else if (fetch_attr(fs, ino, &a) < 0) {
		/* Nothing known: asked at the next getattr (stale). */
		if (fs->se)
			fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
		return;
	}
	qc_step_note_owner_mode(fs, n, &a);
	/* The last attributes seen (what a commit=async close predicts
	 * from) with the new mode; their size and times are not touched. */
	if (qn_get_attr(&fs->nodes, n, &last)) {
		last.mode = a.mode;
		last.uid = a.uid;
		last.gid = a.gid;
		last.ctime = a.ctime;
		qn_note_attr(&fs->nodes, n, &last, NULL);
	}
	if (qn_parent_ref(&fs->nodes, n, &parent, name) == 0) {
		qc_dir_note_attr(fs, parent, name, &a);
		qn_unref(&fs->nodes, parent);
	}
	/*
	 * The kernel marks only the ctime stale on setxattr, and a statx
	 * that asks for the mode alone (stat -c %a, test -x) would be
	 * answered the old one from its cache: all of them, before the
	 * reply.  Attributes only, which takes no inode lock (setxattr
	 * holds it).
	 */
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
}

/*
 * Sends SETXATTR or REMOVEXATTR `m` of `ino`.  While an open handle of it
 * has WRITEs or steps in flight, on their stream behind them: the server
 * completes them first, so a WRITE executed after it cannot strip the
 * file capability it sets (cp -a, tar --xattrs, setcap after a close in
 * commit=async), and its pipelined CREATE has made the name.  Otherwise
 * on meta, once no CREATE of the mount is unanswered (the path may name a
 * file made by one).
 */
static int xattr_change_call(struct qc_fs *fs, fuse_ino_t ino,
			     struct qft_msg *m, struct qc_reply *rep)
{
	struct qc_file *f;
	uint64_t gen, handle;
	int r;

	f = qc_file_borrow_busy(fs, qc_fs_node(fs, ino));
	if (f && qc_file_handle(fs, f, &gen, &handle) == 0) {
		r = qc_call_behind(fs->conn, gen, m, rep);
		qc_file_put(fs, f);
		return r;
	}
	qc_file_put(fs, f);
	qc_step_settle(fs);
	return qc_call(fs->conn, m, rep);
}

/*
 * SETXATTR or REMOVEXATTR `m` of attribute `name` of `ino`, with what the
 * client knows about the object's xattrs and attributes dropped around
 * it: 0 or the negative errno.
 */
static int xattr_change(struct qc_fs *fs, fuse_ino_t ino, const char *name,
			struct qft_msg *m)
{
	struct qn_node *n = qc_fs_node(fs, ino);
	struct qc_reply rep;
	bool caps;
	int r;

	/* The listing's hint first, then the generation (hints.h). */
	qc_dir_xattr_changed(fs, n);
	caps = qc_hint_xattr_begin(fs, name);
	r = xattr_change_call(fs, ino, m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Even a failed call may have changed them (a lost reply). */
	qc_dir_xattr_changed(fs, n);
	xattr_changed_attrs(fs, n);
	qc_hint_xattr_end(fs, n, caps);
	return r;
}

void qc_ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		     const char *value, size_t size, int flags)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_SETXATTR, 0);
	if (is_own_xattr(ino, name)) {
		r = -EPERM;
		goto out;
	}
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
		r = -EINVAL;
		goto out;
	}
	if (flags & XATTR_CREATE)
		m.opflags |= QFT_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		m.opflags |= QFT_XATTR_REPLACE;
	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		r = -ERANGE;
		goto out;
	}
	if (size > QFT_MAX_XATTR_SIZE) {
		r = -E2BIG;
		goto out;
	}
	r = qc_ops_node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out;
	qc_set_str(&m.path, path);
	qc_set_str(&m.xname, name);
	m.data.p = (const uint8_t *)value;
	m.data.len = (uint32_t)size;
	r = xattr_change(fs, ino, name, &m);
	if (r == 0 && strcmp(name, ACL_ACCESS_XATTR) == 0)
		acl_set_mode(fs, ino, value, size);
	/* A label set through the mount: the server has them now. */
	if (r == 0 && strcmp(name, SELINUX_XATTR) == 0)
		atomic_store(&labels, LABELS_SOME);
out:
	fuse_reply_err(req, -r);
}

/* GETXATTR and LISTXATTR: size 0 asks for the size only.  Returns what
 * was answered: 0 or the negative errno. */
static int xattr_query(fuse_req_t req, struct qft_msg *m, fuse_ino_t ino,
		       size_t size, size_t max)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	int r;

	r = qc_ops_node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	qc_set_str(&m->path, path);
	m->length = size < max ? size : max;
	r = qc_call(fs->conn, m, &rep);
	if (r < 0)
		goto out_err;
	/* A label listed: the server has them after all (cp -a and
	 * getfattr -d read what LISTXATTR names). */
	if (m->op == QFT_OP_LISTXATTR && rep.msg.data.len > 0 &&
	    memmem(rep.msg.data.p, rep.msg.data.len, SELINUX_XATTR,
		   sizeof(SELINUX_XATTR)))
		atomic_store(&labels, LABELS_SOME);
	if (size == 0) {
		fuse_reply_xattr(req, (size_t)rep.msg.count);
	} else if (rep.msg.data.len > size) {
		r = -ERANGE;
		fuse_reply_err(req, ERANGE);
	} else {
		fuse_reply_buf(req, (const char *)rep.msg.data.p,
			       rep.msg.data.len);
	}
	qc_reply_free(&rep);
	return r;
out_err:
	fuse_reply_err(req, -r);
	return r;
}

void qc_ops_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		     size_t size)
{
	struct qc_fs *fs = fs_of(req);
	bool caps = qc_hint_is_caps(name);
	uint64_t gen = qc_hint_caps_gen(fs), start = qc_now_ns();
	struct qft_msg m;

	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	if (reply_own_xattr(req, fs, ino, name, size))
		return;
	if (strcmp(name, SELINUX_XATTR) == 0 && !server_has_labels(fs)) {
		qc_stat_inc(&fs->stats, QC_STAT_GETXATTR_LOCAL);
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if ((caps && qc_hint_nocap(fs, qc_fs_node(fs, ino))) ||
	    qc_hint_noxattr(fs, qc_fs_node(fs, ino))) {
		qc_stat_inc(&fs->stats, QC_STAT_GETXATTR_LOCAL);
		fuse_reply_err(req, ENODATA);
		return;
	}
	qc_step_settle(fs);
	qft_msg_init(&m, QFT_OP_GETXATTR, 0);
	qc_set_str(&m.xname, name);
	if (xattr_query(req, &m, ino, size, QFT_MAX_XATTR_SIZE) == -ENODATA &&
	    caps)
		qc_hint_nocap_note(fs, qc_fs_node(fs, ino), gen, start);
}

void qc_ops_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct qc_fs *fs = fs_of(req);
	struct qft_msg m;

	if (qc_hint_noxattr(fs, qc_fs_node(fs, ino))) {
		if (size == 0)
			fuse_reply_xattr(req, 0);
		else
			fuse_reply_buf(req, NULL, 0);
		return;
	}

	qc_step_settle(fs);
	qft_msg_init(&m, QFT_OP_LISTXATTR, 0);
	xattr_query(req, &m, ino, size, QFT_MAX_XATTR_LIST);
}

void qc_ops_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qft_msg m;
	int r;

	if (is_own_xattr(ino, name)) {
		r = -EPERM;
		goto out;
	}
	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		r = -ERANGE;
		goto out;
	}
	r = qc_ops_node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out;
	qft_msg_init(&m, QFT_OP_REMOVEXATTR, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.xname, name);
	/* Removing it cannot make a capability appear, but a GETXATTR
	 * answered around it says nothing reliable either way. */
	r = xattr_change(fs, ino, name, &m);
out:
	fuse_reply_err(req, -r);
}
