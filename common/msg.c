// SPDX-License-Identifier: MIT
/*
 * Table-driven message codec.  Each opcode lists the fields of its request
 * and of its successful reply; encode and decode walk the same list, so the
 * two directions cannot drift apart, and every field kind is validated in
 * exactly one place (decode_field).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "msg.h"

enum fld {
	FLD_END = 0,
	FLD_MAGIC, FLD_VERSION, FLD_FEATURES,
	FLD_HANDLE, FLD_PATH, FLD_NAME, FLD_PATH2, FLD_NAME2, FLD_TARGET,
	FLD_XNAME, FLD_OPFLAGS, FLD_MODE, FLD_UID, FLD_GID, FLD_VALID,
	FLD_RDEV, FLD_SIZE, FLD_OFFSET, FLD_LENGTH, FLD_COUNT, FLD_ATIME,
	FLD_MTIME, FLD_DATA, FLD_ATTR, FLD_STATFS,
	/* Change notification. */
	FLD_INO, FLD_KIND,
	FLD_ENAME,      /* into `name`: a valid name, or empty */
	/* Resuming. */
	FLD_SEQ,
	/* HELLO reply, only with QFT_FEAT_BOOTID in its features. */
	FLD_BOOTID,
	/* COPY's destination. */
	FLD_HANDLE2, FLD_OFFSET2,
	/* Locks: struct qft_lock, checked as a whole. */
	FLD_LOCK,
	/* HELLO reply, only with QFT_FEAT_TCPCC in its features. */
	FLD_TCPCC,
};

#define MAX_FIELDS 10

struct op_desc {
	const char *name;
	uint8_t req[MAX_FIELDS];   /* FLD_END-terminated */
	uint8_t rep[MAX_FIELDS];
	uint32_t req_flags;        /* known bits of opflags in requests */
	uint32_t rep_flags;        /* ... and in replies */
	uint64_t max_length;       /* bound on the `length` field */
	bool handle_optional;      /* handle may be 0 (SETATTR by path) */
};

static const struct op_desc ops[QFT_OP__COUNT] = {
	/* Keep magic and version first in both directions: hello_other()
	 * decodes a HELLO of another version only that far. */
	[QFT_OP_HELLO] = { "HELLO",
		{ FLD_MAGIC, FLD_VERSION, FLD_FEATURES },
		{ FLD_MAGIC, FLD_VERSION, FLD_FEATURES, FLD_UID, FLD_GID,
		  FLD_BOOTID, FLD_TCPCC } },
	[QFT_OP_LSTAT] = { "LSTAT", { FLD_PATH }, { FLD_ATTR } },
	[QFT_OP_FSTAT] = { "FSTAT", { FLD_HANDLE }, { FLD_ATTR } },
	[QFT_OP_SETATTR] = { "SETATTR",
		{ FLD_HANDLE, FLD_PATH, FLD_VALID, FLD_MODE, FLD_UID, FLD_GID,
		  FLD_SIZE, FLD_ATIME, FLD_MTIME },
		{ FLD_ATTR }, .handle_optional = true },
	[QFT_OP_OPENDIR] = { "OPENDIR", { FLD_HANDLE, FLD_PATH }, { 0 } },
	[QFT_OP_READDIR] = { "READDIR",
		{ FLD_HANDLE, FLD_OFFSET, FLD_LENGTH, FLD_OPFLAGS },
		{ FLD_OPFLAGS, FLD_DATA },
		QFT_READDIR_KNOWN, QFT_READDIR_REPLY_KNOWN, QFT_MAX_READDIR },
	[QFT_OP_MKDIR] = { "MKDIR", { FLD_PATH, FLD_NAME, FLD_MODE },
		{ FLD_ATTR } },
	[QFT_OP_RMDIR] = { "RMDIR", { FLD_PATH, FLD_NAME }, { 0 } },
	[QFT_OP_UNLINK] = { "UNLINK", { FLD_PATH, FLD_NAME }, { 0 } },
	[QFT_OP_CREATE] = { "CREATE",
		{ FLD_HANDLE, FLD_PATH, FLD_NAME, FLD_OPFLAGS, FLD_MODE },
		{ FLD_ATTR }, QFT_O_KNOWN },
	[QFT_OP_OPEN] = { "OPEN",
		{ FLD_HANDLE, FLD_PATH, FLD_OPFLAGS, FLD_LENGTH },
		{ FLD_ATTR, FLD_OPFLAGS, FLD_DATA },
		QFT_O_KNOWN, QFT_OPEN_REP_KNOWN, QFT_MAX_DATA },
	[QFT_OP_READ] = { "READ", { FLD_HANDLE, FLD_OFFSET, FLD_LENGTH },
		{ FLD_DATA }, 0, 0, QFT_MAX_DATA },
	[QFT_OP_WRITE] = { "WRITE", { FLD_HANDLE, FLD_OFFSET, FLD_DATA },
		{ FLD_COUNT } },
	[QFT_OP_FLUSH] = { "FLUSH", { FLD_HANDLE, FLD_OPFLAGS }, { FLD_ATTR },
		QFT_FLUSH_KNOWN },
	[QFT_OP_FSYNC] = { "FSYNC", { FLD_HANDLE, FLD_OPFLAGS }, { 0 },
		QFT_FSYNC_KNOWN },
	[QFT_OP_CLOSE] = { "CLOSE", { FLD_HANDLE }, { 0 } },
	[QFT_OP_RENAME] = { "RENAME",
		{ FLD_PATH, FLD_NAME, FLD_PATH2, FLD_NAME2, FLD_OPFLAGS },
		{ 0 }, QFT_RENAME_KNOWN },
	[QFT_OP_SYMLINK] = { "SYMLINK", { FLD_PATH, FLD_NAME, FLD_TARGET },
		{ FLD_ATTR } },
	[QFT_OP_READLINK] = { "READLINK", { FLD_PATH }, { FLD_TARGET } },
	[QFT_OP_LINK] = { "LINK", { FLD_PATH, FLD_PATH2, FLD_NAME2 },
		{ FLD_ATTR } },
	[QFT_OP_STATFS] = { "STATFS", { FLD_PATH }, { FLD_STATFS } },
	[QFT_OP_FALLOCATE] = { "FALLOCATE",
		{ FLD_HANDLE, FLD_OPFLAGS, FLD_OFFSET, FLD_LENGTH }, { 0 },
		QFT_FALLOC_KNOWN, 0, INT64_MAX },
	[QFT_OP_GETXATTR] = { "GETXATTR", { FLD_PATH, FLD_XNAME, FLD_LENGTH },
		{ FLD_COUNT, FLD_DATA }, 0, 0, QFT_MAX_XATTR_SIZE },
	[QFT_OP_SETXATTR] = { "SETXATTR",
		{ FLD_PATH, FLD_XNAME, FLD_OPFLAGS, FLD_DATA }, { 0 },
		QFT_XATTR_KNOWN },
	[QFT_OP_LISTXATTR] = { "LISTXATTR", { FLD_PATH, FLD_LENGTH },
		{ FLD_COUNT, FLD_DATA }, 0, 0, QFT_MAX_XATTR_LIST },
	[QFT_OP_REMOVEXATTR] = { "REMOVEXATTR", { FLD_PATH, FLD_XNAME },
		{ 0 } },
	[QFT_OP_MKNOD] = { "MKNOD", { FLD_PATH, FLD_NAME, FLD_MODE, FLD_RDEV },
		{ FLD_ATTR } },
	[QFT_OP_PING] = { "PING", { 0 }, { 0 } },
	[QFT_OP_SCAN] = { "SCAN", { FLD_HANDLE, FLD_LENGTH, FLD_OPFLAGS },
		{ FLD_OPFLAGS, FLD_DATA },
		QFT_SCAN_KNOWN, QFT_SCAN_REP_KNOWN, QFT_MAX_SCAN },
	/* Change notification.  NOTIFY is never a request nor answered: its
	 * fields travel in a QFT_F_NOTIFY frame, in the request's place. */
	[QFT_OP_NOTIFY] = { "NOTIFY", { FLD_INO, FLD_KIND, FLD_ENAME },
		{ 0 } },
	[QFT_OP_UNWATCH] = { "UNWATCH", { FLD_INO }, { 0 } },
	[QFT_OP_SYNCFS] = { "SYNCFS", { 0 }, { 0 } },
	/* Never a request nor answered: a QFT_F_PROGRESS frame naming the
	 * request the server is working on. */
	[QFT_OP_PROGRESS] = { "PROGRESS", { 0 }, { 0 } },
	/* Magic and version first, as in HELLO. */
	[QFT_OP_RESUME] = { "RESUME",
		{ FLD_MAGIC, FLD_VERSION, FLD_FEATURES, FLD_OPFLAGS, FLD_SEQ },
		{ FLD_MAGIC, FLD_VERSION, FLD_FEATURES, FLD_UID, FLD_GID,
		  FLD_OPFLAGS, FLD_SEQ },
		QFT_RESUME_KNOWN, QFT_RESUME_REP_KNOWN },
	[QFT_OP_BYE] = { "BYE", { 0 }, { 0 } },
	/* Server-side copy: the reply's attributes are the destination's
	 * after the copy. */
	[QFT_OP_COPY] = { "COPY",
		{ FLD_HANDLE, FLD_OFFSET, FLD_HANDLE2, FLD_OFFSET2,
		  FLD_LENGTH, FLD_OPFLAGS },
		{ FLD_COUNT, FLD_ATTR }, QFT_COPY_KNOWN, 0, QFT_MAX_COPY },
	/* The reply's offset2 is where the next hole (after data) or the
	 * next data (after a hole) begins, 0 when unknown or none. */
	[QFT_OP_SEEK] = { "SEEK", { FLD_HANDLE, FLD_OFFSET, FLD_OPFLAGS },
		{ FLD_OFFSET, FLD_OFFSET2 }, QFT_SEEK_KNOWN },
	/* Locks (QFT_FEAT_LOCKS). */
	[QFT_OP_LOCK] = { "LOCK", { FLD_HANDLE, FLD_OPFLAGS, FLD_LOCK },
		{ 0 }, QFT_LOCK_KNOWN },
	[QFT_OP_GETLK] = { "GETLK", { FLD_HANDLE, FLD_LOCK }, { FLD_LOCK } },
	/* Walk-ahead: the names and the records are checked by
	 * qft_fetch_names_check and qft_fetch_rec_decode. */
	[QFT_OP_FETCH] = { "FETCH", { FLD_PATH, FLD_LENGTH, FLD_DATA },
		{ FLD_DATA }, 0, 0, QFT_FETCH_FILE_MAX },
	[QFT_OP_STRIPE] = { "STRIPE", { FLD_COUNT, FLD_OPFLAGS },
		{ FLD_COUNT }, QFT_STRIPE_KNOWN },
};

static const struct op_desc *op_desc(uint16_t op)
{
	if (op == 0 || op >= QFT_OP__COUNT || !ops[op].name)
		return NULL;
	return &ops[op];
}

void qft_msg_init_notify(struct qft_msg *m, uint64_t ino, uint32_t kind,
			 const char *name, uint32_t len)
{
	qft_msg_init(m, QFT_OP_NOTIFY, 0);
	m->flags = QFT_F_NOTIFY;
	m->ino = ino;
	m->kind = kind;
	m->name.s = name ? name : "";
	m->name.len = name ? len : 0;
}

const char *qft_op_name(uint16_t op)
{
	const struct op_desc *d = op_desc(op);

	return d ? d->name : "?";
}

void qft_msg_init(struct qft_msg *m, uint16_t op, uint64_t id)
{
	memset(m, 0, sizeof(*m));
	m->op = op;
	m->id = id;
}

void qft_msg_init_reply(struct qft_msg *r, const struct qft_msg *req)
{
	qft_msg_init(r, req->op, req->id);
	r->flags = QFT_F_REPLY;
}

bool qft_name_valid(const char *s, size_t len)
{
	if (len == 0 || len > QFT_MAX_NAME)
		return false;
	if (memchr(s, '/', len) || memchr(s, '\0', len))
		return false;
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	return true;
}

bool qft_path_valid(const char *s, size_t len)
{
	size_t i = 0;

	/* "" is the root; otherwise names joined by single slashes. */
	if (len > QFT_MAX_PATH)
		return false;
	while (i < len) {
		const char *slash = memchr(s + i, '/', len - i);
		size_t n = slash ? (size_t)(slash - (s + i)) : len - i;

		if (!qft_name_valid(s + i, n))
			return false;
		i += n;
		if (slash && ++i == len)
			return false; /* trailing slash */
	}
	return true;
}

static bool mode_type_valid(uint32_t mode)
{
	switch (mode & QFT_S_IFMT) {
	case QFT_S_IFSOCK: case QFT_S_IFLNK: case QFT_S_IFREG:
	case QFT_S_IFBLK: case QFT_S_IFDIR: case QFT_S_IFCHR:
	case QFT_S_IFIFO:
		return true;
	default:
		return false;
	}
}

static int put_time(struct qbuf *b, const struct qft_time *t)
{
	int r;

	if ((r = qbuf_put_u64(b, (uint64_t)t->sec)) < 0 ||
	    (r = qbuf_put_u32(b, t->nsec)) < 0)
		return r;
	return 0;
}

static int get_time(struct qcur *c, struct qft_time *t)
{
	struct qcur save = *c;
	uint64_t sec;
	uint32_t nsec;
	int r;

	if ((r = qcur_get_u64(c, &sec)) < 0 ||
	    (r = qcur_get_u32(c, &nsec)) < 0)
		goto fail;
	if (nsec >= 1000000000u) {
		r = -EINVAL;
		goto fail;
	}
	t->sec = (int64_t)sec;
	t->nsec = nsec;
	return 0;
fail:
	*c = save;
	return r;
}

static int put_attr(struct qbuf *b, const struct qft_attr *a)
{
	int r;

	if ((r = qbuf_put_u64(b, a->ino)) < 0 ||
	    (r = qbuf_put_u32(b, a->mode)) < 0 ||
	    (r = qbuf_put_u32(b, a->nlink)) < 0 ||
	    (r = qbuf_put_u32(b, a->uid)) < 0 ||
	    (r = qbuf_put_u32(b, a->gid)) < 0 ||
	    (r = qbuf_put_u64(b, a->rdev)) < 0 ||
	    (r = qbuf_put_u64(b, a->size)) < 0 ||
	    (r = qbuf_put_u64(b, a->blocks)) < 0 ||
	    (r = qbuf_put_u32(b, a->blksize)) < 0 ||
	    (r = put_time(b, &a->atime)) < 0 ||
	    (r = put_time(b, &a->mtime)) < 0 ||
	    (r = put_time(b, &a->ctime)) < 0 ||
	    (r = qbuf_put_u32(b, a->flags)) < 0)
		return r;
	return 0;
}

static int get_attr(struct qcur *c, struct qft_attr *a)
{
	struct qcur save = *c;
	int r;

	if ((r = qcur_get_u64(c, &a->ino)) < 0 ||
	    (r = qcur_get_u32(c, &a->mode)) < 0 ||
	    (r = qcur_get_u32(c, &a->nlink)) < 0 ||
	    (r = qcur_get_u32(c, &a->uid)) < 0 ||
	    (r = qcur_get_u32(c, &a->gid)) < 0 ||
	    (r = qcur_get_u64(c, &a->rdev)) < 0 ||
	    (r = qcur_get_u64(c, &a->size)) < 0 ||
	    (r = qcur_get_u64(c, &a->blocks)) < 0 ||
	    (r = qcur_get_u32(c, &a->blksize)) < 0 ||
	    (r = get_time(c, &a->atime)) < 0 ||
	    (r = get_time(c, &a->mtime)) < 0 ||
	    (r = get_time(c, &a->ctime)) < 0 ||
	    (r = qcur_get_u32(c, &a->flags)) < 0)
		goto fail;
	if (!mode_type_valid(a->mode) || (a->mode & ~(QFT_S_IFMT | 07777)) ||
	    a->size > INT64_MAX || a->blocks > INT64_MAX ||
	    (a->flags & ~QFT_ATTR_KNOWN)) {
		r = -EINVAL;
		goto fail;
	}
	return 0;
fail:
	*c = save;
	return r;
}

static int put_statfs(struct qbuf *b, const struct qft_statfs *s)
{
	const uint64_t v[] = { s->bsize, s->frsize, s->blocks, s->bfree,
			       s->bavail, s->files, s->ffree, s->favail,
			       s->namemax };
	int r;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if ((r = qbuf_put_u64(b, v[i])) < 0)
			return r;
	return 0;
}

static int get_statfs(struct qcur *c, struct qft_statfs *s)
{
	uint64_t *v[] = { &s->bsize, &s->frsize, &s->blocks, &s->bfree,
			  &s->bavail, &s->files, &s->ffree, &s->favail,
			  &s->namemax };
	const uint8_t *p;
	int r;

	if ((r = qcur_get_bytes(c, &p, QFT_STATFS_WIRE_SIZE)) < 0)
		return r;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		*v[i] = qft_load64(p + 8 * i);
	return 0;
}

/*
 * Whether field `f` of *m is left out of the frame: the HELLO reply's
 * boot id and congestion control travel only when its features grant
 * QFT_FEAT_BOOTID and QFT_FEAT_TCPCC, so that a client that did not ask
 * for them (an older one) gets the reply it knows.  Decoding reads
 * `features` before it comes to the fields.
 */
static bool field_absent(const struct qft_msg *m, enum fld f)
{
	return (f == FLD_BOOTID && !(m->features & QFT_FEAT_BOOTID)) ||
	       (f == FLD_TCPCC && !(m->features & QFT_FEAT_TCPCC));
}

/* Where a credential may travel (protocol.h, QFT_F_CRED): requests only,
 * and not the first frame of a connection, which agrees on the feature. */
static bool cred_allowed(uint16_t op, uint16_t flags)
{
	return !(flags & (QFT_F_REPLY | QFT_F_NOTIFY | QFT_F_PROGRESS)) &&
	       op != QFT_OP_HELLO && op != QFT_OP_RESUME;
}

static bool cred_ids_valid(const struct qft_cred *c)
{
	if (c->uid == UINT32_MAX || c->gid == UINT32_MAX)
		return false;
	for (uint32_t i = 0; i < c->ngroups; i++)
		if (c->groups[i] == UINT32_MAX)
			return false;
	return true;
}

static int put_cred(struct qbuf *b, const struct qft_cred *c)
{
	int r;

	if (c->ngroups > QFT_MAX_GROUPS || !cred_ids_valid(c))
		return -EINVAL;
	if ((r = qbuf_put_u32(b, c->uid)) < 0 ||
	    (r = qbuf_put_u32(b, c->gid)) < 0 ||
	    (r = qbuf_put_u32(b, c->ngroups)) < 0)
		return r;
	for (uint32_t i = 0; i < c->ngroups; i++)
		if ((r = qbuf_put_u32(b, c->groups[i])) < 0)
			return r;
	return 0;
}

/*
 * A count above QFT_MAX_GROUPS is a length out of range (malformed); an id
 * of (uint32_t)-1 is well framed but invalid.  Consumes nothing on
 * failure.
 */
static int get_cred(struct qcur *c, struct qft_cred *out)
{
	struct qcur save = *c;
	int r;

	if ((r = qcur_get_u32(c, &out->uid)) < 0 ||
	    (r = qcur_get_u32(c, &out->gid)) < 0 ||
	    (r = qcur_get_u32(c, &out->ngroups)) < 0)
		goto fail;
	if (out->ngroups > QFT_MAX_GROUPS) {
		r = -EBADMSG;
		goto fail;
	}
	for (uint32_t i = 0; i < out->ngroups; i++)
		if ((r = qcur_get_u32(c, &out->groups[i])) < 0)
			goto fail;
	if (!cred_ids_valid(out)) {
		r = -EINVAL;
		goto fail;
	}
	return 0;
fail:
	*c = save;
	return r;
}

static int put_lock(struct qbuf *b, const struct qft_lock *l)
{
	int r;

	if ((r = qbuf_put_u64(b, l->owner)) < 0 ||
	    (r = qbuf_put_u64(b, l->start)) < 0 ||
	    (r = qbuf_put_u64(b, l->end)) < 0 ||
	    (r = qbuf_put_u32(b, l->type)) < 0 ||
	    (r = qbuf_put_u32(b, l->pid)) < 0)
		return r;
	return 0;
}

/* A range beyond off_t, backwards, or an unknown type is -EINVAL: the
 * receiver turns what it gets straight into a struct flock. */
static int get_lock(struct qcur *c, struct qft_lock *l)
{
	struct qcur save = *c;
	int r;

	if ((r = qcur_get_u64(c, &l->owner)) < 0 ||
	    (r = qcur_get_u64(c, &l->start)) < 0 ||
	    (r = qcur_get_u64(c, &l->end)) < 0 ||
	    (r = qcur_get_u32(c, &l->type)) < 0 ||
	    (r = qcur_get_u32(c, &l->pid)) < 0)
		goto fail;
	if (l->end > INT64_MAX || l->start > l->end ||
	    l->type > QFT_LK_WRLCK) {
		r = -EINVAL;
		goto fail;
	}
	return 0;
fail:
	*c = save;
	return r;
}

static int put_field(struct qbuf *b, enum fld f, const struct qft_msg *m)
{
	switch (f) {
	case FLD_MAGIC:    return qbuf_put_u32(b, m->magic);
	case FLD_VERSION:  return qbuf_put_u32(b, m->version);
	case FLD_FEATURES: return qbuf_put_u32(b, m->features);
	case FLD_HANDLE:   return qbuf_put_u64(b, m->handle);
	case FLD_PATH:     return qbuf_put_str(b, m->path.s, m->path.len);
	case FLD_NAME:     return qbuf_put_str(b, m->name.s, m->name.len);
	case FLD_PATH2:    return qbuf_put_str(b, m->path2.s, m->path2.len);
	case FLD_NAME2:    return qbuf_put_str(b, m->name2.s, m->name2.len);
	case FLD_TARGET:   return qbuf_put_str(b, m->target.s, m->target.len);
	case FLD_XNAME:    return qbuf_put_str(b, m->xname.s, m->xname.len);
	case FLD_OPFLAGS:  return qbuf_put_u32(b, m->opflags);
	case FLD_MODE:     return qbuf_put_u32(b, m->mode);
	case FLD_UID:      return qbuf_put_u32(b, m->uid);
	case FLD_GID:      return qbuf_put_u32(b, m->gid);
	case FLD_VALID:    return qbuf_put_u32(b, m->valid);
	case FLD_RDEV:     return qbuf_put_u64(b, m->rdev);
	case FLD_SIZE:     return qbuf_put_u64(b, m->size);
	case FLD_OFFSET:   return qbuf_put_u64(b, m->offset);
	case FLD_LENGTH:   return qbuf_put_u64(b, m->length);
	case FLD_COUNT:    return qbuf_put_u64(b, m->count);
	case FLD_ATIME:    return put_time(b, &m->atime);
	case FLD_MTIME:    return put_time(b, &m->mtime);
	case FLD_DATA:     return qbuf_put_blob(b, m->data.p, m->data.len);
	case FLD_SEQ:      return qbuf_put_u64(b, m->seq);
	case FLD_HANDLE2:  return qbuf_put_u64(b, m->handle2);
	case FLD_OFFSET2:  return qbuf_put_u64(b, m->offset2);
	case FLD_ATTR:     return put_attr(b, &m->attr);
	case FLD_STATFS:   return put_statfs(b, &m->st);
	case FLD_INO:      return qbuf_put_u64(b, m->ino);
	case FLD_KIND:     return qbuf_put_u32(b, m->kind);
	case FLD_ENAME:    return qbuf_put_str(b, m->name.s, m->name.len);
	case FLD_BOOTID:
		if (m->boot_id.len == 0 || m->boot_id.len > QFT_MAX_BOOT_ID)
			return -EINVAL;
		return qbuf_put_str(b, m->boot_id.s, m->boot_id.len);
	case FLD_LOCK:     return put_lock(b, &m->lk);
	case FLD_TCPCC:
		if (m->tcpcc.len == 0 || m->tcpcc.len > QFT_MAX_TCPCC)
			return -EINVAL;
		return qbuf_put_str(b, m->tcpcc.s, m->tcpcc.len);
	case FLD_END:      break;
	}
	return -EINVAL;
}

/*
 * Reads a string field and checks it against its kind's rules.  Framing
 * errors (-EBADMSG) are told apart from a well-framed string that breaks a
 * rule, such as a name over NAME_MAX or with a '/' (-EINVAL), so the server
 * can answer the latter with an error instead of dropping the connection.
 */
static int get_checked_str(struct qcur *c, struct qft_str *out, enum fld f)
{
	struct qcur save = *c;
	bool ok;
	int r;

	r = qcur_get_str(c, &out->s, &out->len, QFT_MAX_PAYLOAD);
	if (r < 0)
		return r;
	switch (f) {
	case FLD_NAME: case FLD_NAME2:
		ok = qft_name_valid(out->s, out->len);
		break;
	case FLD_PATH: case FLD_PATH2:
		ok = qft_path_valid(out->s, out->len);
		break;
	case FLD_ENAME:
		ok = out->len == 0 || qft_name_valid(out->s, out->len);
		break;
	case FLD_XNAME:
		ok = out->len > 0 && out->len <= QFT_MAX_XATTR_NAME;
		break;
	case FLD_BOOTID:
		/* It goes into logs: visible ASCII only. */
		ok = out->len > 0 && out->len <= QFT_MAX_BOOT_ID;
		for (uint32_t i = 0; ok && i < out->len; i++)
			ok = out->s[i] > ' ' && out->s[i] < 0x7f;
		break;
	case FLD_TCPCC:
		/* A kernel module's name; it goes into logs and stats keys. */
		ok = out->len > 0 && out->len <= QFT_MAX_TCPCC;
		for (uint32_t i = 0; ok && i < out->len; i++)
			ok = (out->s[i] >= 'a' && out->s[i] <= 'z') ||
			     (out->s[i] >= '0' && out->s[i] <= '9') ||
			     out->s[i] == '_';
		break;
	default: /* symlink target: any non-empty string that fits a path */
		ok = out->len > 0 && out->len <= QFT_MAX_PATH;
		break;
	}
	if (!ok) {
		*c = save;
		return -EINVAL;
	}
	return 0;
}

static int get_field(struct qcur *c, enum fld f, struct qft_msg *m,
		     const struct op_desc *d)
{
	bool reply = m->flags & QFT_F_REPLY;
	uint32_t known;
	int r;

	switch (f) {
	case FLD_MAGIC:
		if ((r = qcur_get_u32(c, &m->magic)) < 0)
			return r;
		return m->magic == QFT_MAGIC ? 0 : -EBADMSG;
	case FLD_VERSION:  return qcur_get_u32(c, &m->version);
	case FLD_FEATURES: return qcur_get_u32(c, &m->features);
	case FLD_HANDLE:
		if ((r = qcur_get_u64(c, &m->handle)) < 0)
			return r;
		if (m->handle > QFT_MAX_HANDLES ||
		    (m->handle == 0 && !d->handle_optional))
			return -EINVAL;
		return 0;
	case FLD_HANDLE2:
		if ((r = qcur_get_u64(c, &m->handle2)) < 0)
			return r;
		return m->handle2 == 0 || m->handle2 > QFT_MAX_HANDLES ?
			-EINVAL : 0;
	case FLD_OFFSET2:
		if ((r = qcur_get_u64(c, &m->offset2)) < 0)
			return r;
		return m->offset2 > INT64_MAX ? -EINVAL : 0;
	case FLD_PATH:   return get_checked_str(c, &m->path, f);
	case FLD_NAME:   return get_checked_str(c, &m->name, f);
	case FLD_PATH2:  return get_checked_str(c, &m->path2, f);
	case FLD_NAME2:  return get_checked_str(c, &m->name2, f);
	case FLD_TARGET: return get_checked_str(c, &m->target, f);
	case FLD_XNAME:  return get_checked_str(c, &m->xname, f);
	case FLD_OPFLAGS:
		if ((r = qcur_get_u32(c, &m->opflags)) < 0)
			return r;
		known = reply ? d->rep_flags : d->req_flags;
		if (m->opflags & ~known)
			return -EINVAL;
		/* Open flags: the access mode is 0, 1 or 2, as in open(2). */
		if (known == QFT_O_KNOWN &&
		    (m->opflags & QFT_O_ACCMODE) == QFT_O_ACCMODE)
			return -EINVAL;
		return 0;
	case FLD_MODE:
		if ((r = qcur_get_u32(c, &m->mode)) < 0)
			return r;
		if ((m->mode & ~(QFT_S_IFMT | 07777)) ||
		    ((m->mode & QFT_S_IFMT) && !mode_type_valid(m->mode)))
			return -EINVAL;
		return 0;
	case FLD_UID: return qcur_get_u32(c, &m->uid);
	case FLD_GID: return qcur_get_u32(c, &m->gid);
	case FLD_SEQ: return qcur_get_u64(c, &m->seq);
	case FLD_BOOTID: return get_checked_str(c, &m->boot_id, f);
	case FLD_TCPCC: return get_checked_str(c, &m->tcpcc, f);
	case FLD_VALID:
		if ((r = qcur_get_u32(c, &m->valid)) < 0)
			return r;
		return (m->valid & ~QFT_SET_KNOWN) ? -EINVAL : 0;
	case FLD_RDEV: return qcur_get_u64(c, &m->rdev);
	case FLD_SIZE:
		if ((r = qcur_get_u64(c, &m->size)) < 0)
			return r;
		return m->size > INT64_MAX ? -EINVAL : 0;
	case FLD_OFFSET:
		if ((r = qcur_get_u64(c, &m->offset)) < 0)
			return r;
		/* READDIR offsets are opaque cookies; others are off_t. */
		return m->op != QFT_OP_READDIR && m->offset > INT64_MAX ?
			-EINVAL : 0;
	case FLD_LENGTH:
		if ((r = qcur_get_u64(c, &m->length)) < 0)
			return r;
		return m->length > d->max_length ? -EINVAL : 0;
	case FLD_COUNT: return qcur_get_u64(c, &m->count);
	case FLD_ATIME: return get_time(c, &m->atime);
	case FLD_MTIME: return get_time(c, &m->mtime);
	case FLD_DATA:
		return qcur_get_blob(c, &m->data.p, &m->data.len,
				     QFT_MAX_DATA);
	case FLD_ATTR:   return get_attr(c, &m->attr);
	case FLD_STATFS: return get_statfs(c, &m->st);
	case FLD_INO:    return qcur_get_u64(c, &m->ino);
	case FLD_KIND:
		if ((r = qcur_get_u32(c, &m->kind)) < 0)
			return r;
		return m->kind >= QFT_NOTIFY_CHANGED &&
		       m->kind <= QFT_NOTIFY_ALL ? 0 : -EINVAL;
	case FLD_ENAME:  return get_checked_str(c, &m->name, f);
	case FLD_LOCK:   return get_lock(c, &m->lk);
	case FLD_END:    break;
	}
	return -EINVAL;
}

/*
 * Encodes *m into b; with `tail` set, a data field that comes last is
 * left out but for its length, and *tail says what the frame still needs
 * to end with (nothing when the data field is not last or absent).
 */
static int encode(struct qbuf *b, const struct qft_msg *m,
		  struct qft_blob *tail)
{
	const struct op_desc *d = op_desc(m->op);
	bool reply = m->flags & QFT_F_REPLY;
	size_t start = b->len, payload, extra = 0;
	const uint8_t *fields;
	uint8_t *hdr;
	int r;

	if (tail) {
		tail->p = NULL;
		tail->len = 0;
	}
	if (!d)
		return -EINVAL;
	if ((m->flags & QFT_F_CRED) && !cred_allowed(m->op, m->flags))
		return -EINVAL;
	hdr = qbuf_extend(b, QFT_HDR_SIZE);
	if (!hdr)
		return -EMSGSIZE;
	if ((m->flags & QFT_F_CRED) && (r = put_cred(b, &m->cred)) < 0)
		goto undo;
	if (reply) {
		if ((r = qbuf_put_u32(b, m->status)) < 0)
			goto undo;
		if (m->status != QFT_OK) {
			uint32_t n = m->errmsg.len < QFT_MAX_ERRMSG ?
				m->errmsg.len : QFT_MAX_ERRMSG;

			r = qbuf_put_str(b, m->errmsg.s ? m->errmsg.s : "",
					 m->errmsg.s ? n : 0);
			if (r < 0)
				goto undo;
			goto header;
		}
	}
	fields = reply ? d->rep : d->req;
	for (int i = 0; i < MAX_FIELDS && fields[i] != FLD_END; i++) {
		bool last = i + 1 == MAX_FIELDS || fields[i + 1] == FLD_END;

		if (tail && last && fields[i] == FLD_DATA) {
			/* The bytes stay where they are; the sender sends
			 * them behind the head (qft_chan_sendv). */
			if ((r = qbuf_put_u32(b, m->data.len)) < 0)
				goto undo;
			extra = m->data.len;
			tail->p = m->data.p;
			tail->len = m->data.len;
			break;
		}
		if (field_absent(m, fields[i]))
			continue;
		if ((r = put_field(b, fields[i], m)) < 0)
			goto undo;
	}
header:
	payload = b->len - start - QFT_HDR_SIZE;
	if (extra > QFT_MAX_PAYLOAD) {
		r = -EMSGSIZE;
		goto undo;
	}
	payload += extra;
	if (payload > QFT_MAX_PAYLOAD) {
		r = -EMSGSIZE;
		goto undo;
	}
	hdr = b->data + start; /* the buffer may have moved */
	qft_store32(hdr, (uint32_t)payload);
	qft_store16(hdr + 4, m->op);
	qft_store16(hdr + 6, m->flags);
	qft_store64(hdr + 8, m->id);
	return 0;
undo:
	b->len = start;
	if (tail) {
		tail->p = NULL;
		tail->len = 0;
	}
	return r;
}

int qft_msg_encode(struct qbuf *b, const struct qft_msg *m)
{
	return encode(b, m, NULL);
}

int qft_msg_encode_head(struct qbuf *b, const struct qft_msg *m,
			struct qft_blob *tail)
{
	return encode(b, m, tail);
}

int qft_hdr_decode(struct qft_hdr *h, const uint8_t *p, size_t n)
{
	if (n < QFT_HDR_SIZE)
		return -EBADMSG;
	h->len = qft_load32(p);
	h->op = qft_load16(p + 4);
	h->flags = qft_load16(p + 6);
	h->id = qft_load64(p + 8);
	if (h->len > QFT_MAX_PAYLOAD ||
	    (h->flags & ~(QFT_F_REPLY | QFT_F_NOTIFY | QFT_F_PROGRESS |
			  QFT_F_CRED)))
		return -EBADMSG;
	if (!op_desc(h->op))
		return -ENOSYS;
	if ((h->flags & QFT_F_CRED) && !cred_allowed(h->op, h->flags))
		return -EBADMSG;
	/* NOTIFY is the one opcode of QFT_F_NOTIFY frames, and they carry
	 * nothing else: not a reply, no request id. */
	if ((h->op == QFT_OP_NOTIFY) != !!(h->flags & QFT_F_NOTIFY) ||
	    ((h->flags & QFT_F_NOTIFY) &&
	     (h->flags != QFT_F_NOTIFY || h->id != 0)))
		return -EBADMSG;
	/* Likewise PROGRESS, which names the request it is about. */
	if ((h->op == QFT_OP_PROGRESS) != !!(h->flags & QFT_F_PROGRESS) ||
	    ((h->flags & QFT_F_PROGRESS) &&
	     (h->flags != QFT_F_PROGRESS || h->id == 0)))
		return -EBADMSG;
	return 0;
}

/*
 * Whether decoding must stop after field `f` because it is the version of
 * a HELLO that speaks another version.  The frame header, HELLO's magic
 * and version are frozen across versions, but the fields after them are
 * not (version 2 added uid and gid to the reply): the rest of such a
 * HELLO is ignored, trailing bytes included, so that the receiver can
 * report the mismatch instead of a malformed frame.
 */
static bool hello_other(const struct qft_msg *m, enum fld f)
{
	return m->op == QFT_OP_HELLO && f == FLD_VERSION &&
	       m->version != QFT_VERSION;
}

/* What a NOTIFY's kind allows of its inode and name (protocol.h). */
static bool notify_valid(const struct qft_msg *m)
{
	switch (m->kind) {
	case QFT_NOTIFY_CHANGED:
		return m->ino != 0;
	case QFT_NOTIFY_GONE:
		return m->ino != 0 && m->name.len == 0;
	case QFT_NOTIFY_ALL:
		return m->ino == 0 && m->name.len == 0;
	default:
		return false;
	}
}

int qft_msg_decode(struct qft_msg *m, const uint8_t *frame, size_t n)
{
	const struct op_desc *d;
	const uint8_t *fields;
	struct qft_hdr h;
	struct qcur c;
	int r;

	if ((r = qft_hdr_decode(&h, frame, n)) < 0)
		return r;
	if (n - QFT_HDR_SIZE != h.len)
		return -EBADMSG;
	d = op_desc(h.op);
	qft_msg_init(m, h.op, h.id);
	m->flags = h.flags;
	qcur_init(&c, frame + QFT_HDR_SIZE, h.len);
	if ((m->flags & QFT_F_CRED) && (r = get_cred(&c, &m->cred)) < 0)
		return r;
	if (m->flags & QFT_F_REPLY) {
		if ((r = qcur_get_u32(&c, &m->status)) < 0)
			return r;
		if (m->status != QFT_OK) {
			r = qcur_get_str(&c, &m->errmsg.s, &m->errmsg.len,
					 QFT_MAX_ERRMSG);
			if (r < 0)
				return r == -EINVAL ? -EBADMSG : r;
			return c.left ? -EBADMSG : 0;
		}
	}
	fields = (m->flags & QFT_F_REPLY) ? d->rep : d->req;
	for (int i = 0; i < MAX_FIELDS && fields[i] != FLD_END; i++) {
		if (field_absent(m, fields[i]))
			continue;
		if ((r = get_field(&c, fields[i], m, d)) < 0)
			return r;
		if (hello_other(m, fields[i]))
			return 0;
	}
	if (c.left)
		return -EBADMSG;
	/* Cross-field checks that no single field can make. */
	if (m->op == QFT_OP_WRITE && !(m->flags & QFT_F_REPLY) &&
	    m->data.len > INT64_MAX - m->offset)
		return -EINVAL;
	if (m->op == QFT_OP_FALLOCATE && m->length > INT64_MAX - m->offset)
		return -EINVAL;
	/* Without DATA the server read nothing: no bytes, no EOF. */
	if (m->op == QFT_OP_OPEN && (m->flags & QFT_F_REPLY) &&
	    !(m->opflags & QFT_OPEN_DATA) &&
	    (m->data.len || (m->opflags & QFT_OPEN_EOF)))
		return -EINVAL;
	if (m->op == QFT_OP_SCAN && (m->flags & QFT_F_REPLY) &&
	    (m->opflags & QFT_SCAN_TRUNCATED) && !(m->opflags & QFT_SCAN_EOF))
		return -EINVAL;
	if (m->op == QFT_OP_NOTIFY && !notify_valid(m))
		return -EINVAL;
	if (m->op == QFT_OP_UNWATCH && !(m->flags & QFT_F_REPLY) &&
	    m->ino == 0)
		return -EINVAL;
	/* Both ranges of a COPY lie within off_t. */
	if (m->op == QFT_OP_COPY && !(m->flags & QFT_F_REPLY) &&
	    (m->length > INT64_MAX - m->offset ||
	     m->length > INT64_MAX - m->offset2))
		return -EINVAL;
	/* A SEEK looks for one thing: data or a hole. */
	if (m->op == QFT_OP_SEEK && !(m->flags & QFT_F_REPLY) &&
	    m->opflags != QFT_SEEK_DATA && m->opflags != QFT_SEEK_HOLE)
		return -EINVAL;
	return 0;
}

int qft_dirent_encode(struct qbuf *b, const struct qft_dirent *d)
{
	size_t start = b->len;
	int r;

	if ((r = qbuf_put_u64(b, d->ino)) < 0 ||
	    (r = qbuf_put_u64(b, d->off)) < 0 ||
	    (r = qbuf_put_u32(b, d->type)) < 0 ||
	    (r = qbuf_put_str(b, d->name.s, d->name.len)) < 0 ||
	    (r = qbuf_put_u8(b, d->has_attr)) < 0 ||
	    (d->has_attr && (r = put_attr(b, &d->attr)) < 0))
		goto undo;
	return 0;
undo:
	b->len = start;
	return r;
}

int qft_dirent_decode(struct qcur *c, struct qft_dirent *d, bool plus)
{
	struct qcur save = *c;
	uint8_t has_attr;
	int r;

	if ((r = qcur_get_u64(c, &d->ino)) < 0 ||
	    (r = qcur_get_u64(c, &d->off)) < 0 ||
	    (r = qcur_get_u32(c, &d->type)) < 0 ||
	    (r = qcur_get_str(c, &d->name.s, &d->name.len, QFT_MAX_NAME)) < 0 ||
	    (r = qcur_get_u8(c, &has_attr)) < 0)
		goto fail;
	r = -EINVAL;
	if (has_attr > 1 || (has_attr && !plus))
		goto fail;
	if ((d->type & ~QFT_S_IFMT) || (d->type && !mode_type_valid(d->type)))
		goto fail;
	if (!qft_name_valid(d->name.s, d->name.len) &&
	    strcmp(d->name.s, ".") != 0 && strcmp(d->name.s, "..") != 0)
		goto fail;
	d->has_attr = has_attr;
	if (has_attr && (r = get_attr(c, &d->attr)) < 0)
		goto fail;
	return 0;
fail:
	*c = save;
	return r;
}

int qft_scan_head_encode(struct qbuf *b, uint32_t base)
{
	return qbuf_put_u32(b, base);
}

int qft_scan_head_decode(struct qcur *c, uint32_t *base)
{
	struct qcur save = *c;
	uint32_t v;
	int r;

	if ((r = qcur_get_u32(c, &v)) < 0)
		return r;
	/* Index 0, the scanned directory, is announced by the request. */
	if (v == 0) {
		*c = save;
		return -EINVAL;
	}
	*base = v;
	return 0;
}

int qft_scan_rec_encode(struct qbuf *b, const struct qft_scan_rec *rec)
{
	size_t start = b->len;
	int r;

	if ((r = qbuf_put_u8(b, rec->kind)) < 0 ||
	    (r = qbuf_put_u32(b, rec->index)) < 0)
		goto undo;
	switch (rec->kind) {
	case QFT_SCAN_REC_ENTRY:
		if ((r = qbuf_put_str(b, rec->name.s, rec->name.len)) < 0 ||
		    (r = put_attr(b, &rec->attr)) < 0)
			goto undo;
		return 0;
	case QFT_SCAN_REC_DIR_END:
		if ((r = qbuf_put_u32(b, rec->status)) < 0)
			goto undo;
		return 0;
	case QFT_SCAN_REC_WATCHED:
		return 0;
	}
	r = -EINVAL;
undo:
	b->len = start;
	return r;
}

int qft_scan_rec_decode(struct qcur *c, struct qft_scan_rec *rec)
{
	struct qcur save = *c;
	int r;

	memset(rec, 0, sizeof(*rec));
	if ((r = qcur_get_u8(c, &rec->kind)) < 0 ||
	    (r = qcur_get_u32(c, &rec->index)) < 0)
		goto fail;
	switch (rec->kind) {
	case QFT_SCAN_REC_ENTRY:
		if ((r = qcur_get_str(c, &rec->name.s, &rec->name.len,
				      QFT_MAX_NAME)) < 0 ||
		    (r = get_attr(c, &rec->attr)) < 0)
			goto fail;
		/* Unlike READDIR, a scan never sends "." or "..". */
		if (!qft_name_valid(rec->name.s, rec->name.len)) {
			r = -EINVAL;
			goto fail;
		}
		return 0;
	case QFT_SCAN_REC_DIR_END:
		if ((r = qcur_get_u32(c, &rec->status)) < 0)
			goto fail;
		return 0;
	case QFT_SCAN_REC_WATCHED:
		return 0;
	}
	r = -EBADMSG; /* an unknown kind: nothing after it can be framed */
fail:
	*c = save;
	return r;
}

int qft_scan_check(const struct qft_blob *data)
{
	struct qft_scan_rec rec;
	uint64_t next;
	uint32_t base;
	struct qcur c;
	int n = 0, r;

	qcur_init(&c, data->p, data->len);
	if ((r = qft_scan_head_decode(&c, &base)) < 0)
		return r;
	next = base;
	while (c.left) {
		if ((r = qft_scan_rec_decode(&c, &rec)) < 0)
			return r;
		if (rec.index >= next)
			return -EINVAL;  /* a directory not announced yet */
		if (rec.kind == QFT_SCAN_REC_ENTRY &&
		    (rec.attr.mode & QFT_S_IFMT) == QFT_S_IFDIR &&
		    ++next > UINT32_MAX)
			return -EINVAL;  /* indexes are u32 */
		n++;
	}
	return n;
}

int qft_fetch_name_next(struct qcur *c, struct qft_str *name)
{
	struct qcur save = *c;
	int r;

	if ((r = qcur_get_str(c, &name->s, &name->len, QFT_MAX_NAME)) < 0)
		return r;
	if (!qft_name_valid(name->s, name->len)) {
		*c = save;
		return -EINVAL;
	}
	return 0;
}

int qft_fetch_names_check(const struct qft_blob *data)
{
	struct qft_str name;
	struct qcur c;
	int n = 0, r;

	qcur_init(&c, data->p, data->len);
	while (c.left) {
		if ((r = qft_fetch_name_next(&c, &name)) < 0)
			return r;
		if (++n > (int)QFT_FETCH_MAX_NAMES)
			return -EINVAL;
	}
	return n ? n : -EINVAL;
}

int qft_fetch_rec_encode(struct qbuf *b, const struct qft_fetch_rec *rec)
{
	size_t start = b->len;
	int r;

	if ((r = qbuf_put_u32(b, rec->status)) < 0)
		return r;
	if (rec->status == QFT_OK &&
	    ((r = put_attr(b, &rec->attr)) < 0 ||
	     (r = qbuf_put_u32(b, rec->flags)) < 0 ||
	     (r = qbuf_put_blob(b, rec->data.p, rec->data.len)) < 0))
		goto undo;
	return 0;
undo:
	b->len = start;
	return r;
}

int qft_fetch_rec_decode(struct qcur *c, struct qft_fetch_rec *rec,
			 uint64_t max_len)
{
	struct qcur save = *c;
	int r;

	memset(rec, 0, sizeof(*rec));
	if ((r = qcur_get_u32(c, &rec->status)) < 0)
		return r;
	if (rec->status >= QFT_STATUS__COUNT) {
		r = -EINVAL;
		goto fail;
	}
	if (rec->status != QFT_OK)
		return 0;
	if ((r = get_attr(c, &rec->attr)) < 0 ||
	    (r = qcur_get_u32(c, &rec->flags)) < 0 ||
	    (r = qcur_get_blob(c, &rec->data.p, &rec->data.len,
			       QFT_MAX_DATA)) < 0)
		goto fail;
	r = -EINVAL;
	if ((rec->flags & ~QFT_FETCH_KNOWN) || rec->data.len > max_len ||
	    (rec->attr.mode & QFT_S_IFMT) != QFT_S_IFREG)
		goto fail;
	return 0;
fail:
	*c = save;
	return r;
}

void qft_attr_from_stat(struct qft_attr *a, const struct stat *st)
{
	a->ino = st->st_ino;
	a->mode = st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = st->st_rdev;
	a->size = (uint64_t)st->st_size;
	a->blocks = (uint64_t)st->st_blocks;
	a->blksize = (uint32_t)st->st_blksize;
	a->atime.sec = st->st_atim.tv_sec;
	a->atime.nsec = (uint32_t)st->st_atim.tv_nsec;
	a->mtime.sec = st->st_mtim.tv_sec;
	a->mtime.nsec = (uint32_t)st->st_mtim.tv_nsec;
	a->ctime.sec = st->st_ctim.tv_sec;
	a->ctime.nsec = (uint32_t)st->st_ctim.tv_nsec;
	a->flags = 0;
}

void qft_attr_to_stat(const struct qft_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_blksize = a->blksize;
	st->st_atim.tv_sec = a->atime.sec;
	st->st_atim.tv_nsec = a->atime.nsec;
	st->st_mtim.tv_sec = a->mtime.sec;
	st->st_mtim.tv_nsec = a->mtime.nsec;
	st->st_ctim.tv_sec = a->ctime.sec;
	st->st_ctim.tv_nsec = a->ctime.nsec;
}

void qft_statfs_from_host(struct qft_statfs *s, const struct statvfs *v)
{
	s->bsize = v->f_bsize;
	s->frsize = v->f_frsize;
	s->blocks = v->f_blocks;
	s->bfree = v->f_bfree;
	s->bavail = v->f_bavail;
	s->files = v->f_files;
	s->ffree = v->f_ffree;
	s->favail = v->f_favail;
	s->namemax = v->f_namemax;
}

void qft_statfs_to_host(const struct qft_statfs *s, struct statvfs *v)
{
	memset(v, 0, sizeof(*v));
	v->f_bsize = s->bsize;
	v->f_frsize = s->frsize;
	v->f_blocks = s->blocks;
	v->f_bfree = s->bfree;
	v->f_bavail = s->bavail;
	v->f_files = s->files;
	v->f_ffree = s->ffree;
	v->f_favail = s->favail;
	v->f_namemax = s->namemax;
}
