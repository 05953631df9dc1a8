// SPDX-License-Identifier: MIT
/*
 * Unit test of common/msg.c, the message codec.
 *
 * The opcode table below is the test's own statement of which fields each
 * message carries (docs/protocol.md in table form); every opcode's request
 * and reply are filled from it with non-trivial values, round-tripped, and
 * compared field by field, so a field the codec drops or invents fails here.
 * A few frames are also compared byte for byte with hand-built encodings, to
 * pin the wire layout itself.
 *
 * Every frame the decoder reads is first copied into a heap block of exactly
 * its length, so that under ASan any read past the end is reported.  The
 * test ends with a fixed-seed garbage loop (QFT_FUZZ_ITERS and
 * QFT_FUZZ_SEED override its length and seed): whatever the input, decode
 * must return one of the documented errors, and anything it accepts must
 * re-encode to exactly the same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "buf.h"
#include "check.h"
#include "msg.h"
#include "protocol.h"

#define FRAME_LIMIT (QFT_HDR_SIZE + QFT_MAX_PAYLOAD)

enum {
	F_MAGIC = 1u << 0, F_VERSION = 1u << 1, F_FEATURES = 1u << 2,
	F_HANDLE = 1u << 3, F_PATH = 1u << 4, F_NAME = 1u << 5,
	F_PATH2 = 1u << 6, F_NAME2 = 1u << 7, F_TARGET = 1u << 8,
	F_XNAME = 1u << 9, F_OPFLAGS = 1u << 10, F_MODE = 1u << 11,
	F_UID = 1u << 12, F_GID = 1u << 13, F_VALID = 1u << 14,
	F_RDEV = 1u << 15, F_SIZE = 1u << 16, F_OFFSET = 1u << 17,
	F_LENGTH = 1u << 18, F_COUNT = 1u << 19, F_ATIME = 1u << 20,
	F_MTIME = 1u << 21, F_DATA = 1u << 22, F_ATTR = 1u << 23,
	F_STATFS = 1u << 24,
};

struct op_spec {
	uint16_t op;
	const char *name;
	uint32_t req, rep;              /* F_* fields carried */
	uint32_t req_flags, rep_flags;  /* known opflags bits */
	uint64_t max_length;            /* bound on `length` */
	bool handle_optional;
};

#define HELLO_F (F_MAGIC | F_VERSION | F_FEATURES)

static const struct op_spec specs[] = {
	{ QFT_OP_HELLO, "HELLO", HELLO_F, HELLO_F | F_UID | F_GID },
	{ QFT_OP_LSTAT, "LSTAT", F_PATH, F_ATTR },
	{ QFT_OP_FSTAT, "FSTAT", F_HANDLE, F_ATTR },
	{ QFT_OP_SETATTR, "SETATTR",
	  F_HANDLE | F_PATH | F_VALID | F_MODE | F_UID | F_GID | F_SIZE |
	  F_ATIME | F_MTIME, F_ATTR, .handle_optional = true },
	{ QFT_OP_OPENDIR, "OPENDIR", F_HANDLE | F_PATH, 0 },
	{ QFT_OP_READDIR, "READDIR",
	  F_HANDLE | F_OFFSET | F_LENGTH | F_OPFLAGS, F_OPFLAGS | F_DATA,
	  QFT_READDIR_KNOWN, QFT_READDIR_REPLY_KNOWN, QFT_MAX_READDIR },
	{ QFT_OP_MKDIR, "MKDIR", F_PATH | F_NAME | F_MODE, F_ATTR },
	{ QFT_OP_RMDIR, "RMDIR", F_PATH | F_NAME, 0 },
	{ QFT_OP_UNLINK, "UNLINK", F_PATH | F_NAME, 0 },
	{ QFT_OP_CREATE, "CREATE",
	  F_HANDLE | F_PATH | F_NAME | F_OPFLAGS | F_MODE, F_ATTR,
	  QFT_O_KNOWN },
	{ QFT_OP_OPEN, "OPEN", F_HANDLE | F_PATH | F_OPFLAGS | F_LENGTH,
	  F_ATTR | F_OPFLAGS | F_DATA, QFT_O_KNOWN, QFT_OPEN_REP_KNOWN,
	  QFT_MAX_DATA },
	{ QFT_OP_READ, "READ", F_HANDLE | F_OFFSET | F_LENGTH, F_DATA,
	  0, 0, QFT_MAX_DATA },
	{ QFT_OP_WRITE, "WRITE", F_HANDLE | F_OFFSET | F_DATA, F_COUNT },
	{ QFT_OP_FLUSH, "FLUSH", F_HANDLE | F_OPFLAGS, F_ATTR,
	  QFT_FLUSH_KNOWN },
	{ QFT_OP_FSYNC, "FSYNC", F_HANDLE | F_OPFLAGS, 0, QFT_FSYNC_KNOWN },
	{ QFT_OP_CLOSE, "CLOSE", F_HANDLE, 0 },
	{ QFT_OP_RENAME, "RENAME",
	  F_PATH | F_NAME | F_PATH2 | F_NAME2 | F_OPFLAGS, 0,
	  QFT_RENAME_KNOWN },
	{ QFT_OP_SYMLINK, "SYMLINK", F_PATH | F_NAME | F_TARGET, F_ATTR },
	{ QFT_OP_READLINK, "READLINK", F_PATH, F_TARGET },
	{ QFT_OP_LINK, "LINK", F_PATH | F_PATH2 | F_NAME2, F_ATTR },
	{ QFT_OP_STATFS, "STATFS", F_PATH, F_STATFS },
	{ QFT_OP_FALLOCATE, "FALLOCATE",
	  F_HANDLE | F_OPFLAGS | F_OFFSET | F_LENGTH, 0, QFT_FALLOC_KNOWN, 0,
	  INT64_MAX },
	{ QFT_OP_GETXATTR, "GETXATTR", F_PATH | F_XNAME | F_LENGTH,
	  F_COUNT | F_DATA, 0, 0, QFT_MAX_XATTR_SIZE },
	{ QFT_OP_SETXATTR, "SETXATTR",
	  F_PATH | F_XNAME | F_OPFLAGS | F_DATA, 0, QFT_XATTR_KNOWN },
	{ QFT_OP_LISTXATTR, "LISTXATTR", F_PATH | F_LENGTH, F_COUNT | F_DATA,
	  0, 0, QFT_MAX_XATTR_LIST },
	{ QFT_OP_REMOVEXATTR, "REMOVEXATTR", F_PATH | F_XNAME, 0 },
	{ QFT_OP_MKNOD, "MKNOD", F_PATH | F_NAME | F_MODE | F_RDEV, F_ATTR },
	{ QFT_OP_PING, "PING", 0, 0 },
	{ QFT_OP_SCAN, "SCAN", F_HANDLE | F_LENGTH | F_OPFLAGS,
	  F_OPFLAGS | F_DATA, QFT_SCAN_KNOWN, QFT_SCAN_REP_KNOWN,
	  QFT_MAX_SCAN },
};
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

static const struct qft_attr sample_attr = {
	.ino = 0xfffffffffffffffeull,
	.mode = QFT_S_IFREG | 04755,
	.nlink = 0xfffffff0u,
	.uid = 1001,
	.gid = 0xfffffffeu,
	.rdev = 0x0000000800000001ull,
	.size = INT64_MAX,
	.blocks = INT64_MAX,
	.blksize = 1u << 20,
	.atime = { -1, 999999999 },
	.mtime = { INT64_MAX, 0 },
	.ctime = { INT64_MIN, 123456789 },
	.flags = QFT_ATTR_NOXATTR,
};

static const struct qft_statfs sample_st = {
	.bsize = 4096, .frsize = 1u << 20, .blocks = UINT64_MAX,
	.bfree = 0x0123456789abcdefull, .bavail = 1, .files = 0,
	.ffree = 0xfedcba9876543210ull, .favail = 42, .namemax = 255,
};

static uint8_t pattern[QFT_MAX_PAYLOAD + 1];
static struct qbuf readdir_data;   /* dirents for READDIR replies */
static struct qbuf scan_data;      /* records for SCAN replies */

static uint8_t *dup_exact(const void *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	if (!q) {
		perror("malloc");
		exit(1);
	}
	if (n)
		memcpy(q, p, n);
	return q;
}

static struct qft_str S(const char *s)
{
	return (struct qft_str){ s, (uint32_t)strlen(s) };
}

static struct qft_str SN(const char *s, size_t n)
{
	return (struct qft_str){ s, (uint32_t)n };
}

/* Fills every field the opcode's request or reply carries. */
static void fill(struct qft_msg *m, const struct op_spec *sp, bool reply)
{
	uint32_t mask = reply ? sp->rep : sp->req;

	qft_msg_init(m, sp->op, 0x8000000000000000ull | (uint64_t)sp->op << 32 |
		     0xbeef);
	if (reply)
		m->flags = QFT_F_REPLY;
	if (mask & F_MAGIC)
		m->magic = QFT_MAGIC;
	if (mask & F_VERSION)
		m->version = QFT_VERSION;
	if (mask & F_FEATURES)
		/* no BOOTID or TCPCC in the reply: their strings are tested apart */
		m->features = reply ? 0xa5a5700fu : 0x5a5a0ff0u;
	if (mask & F_HANDLE)
		m->handle = sp->op == QFT_OP_FSTAT ? QFT_MAX_HANDLES :
			    1 + sp->op * 977u;
	if (mask & F_PATH)
		m->path = S("dir one/sub \xc3\xbc/x");
	if (mask & F_NAME)
		m->name = S("file name.txt");
	if (mask & F_PATH2)
		m->path2 = S("other/dir");
	if (mask & F_NAME2)
		m->name2 = S("new name");
	if (mask & F_TARGET)
		m->target = S("../../some/where else/\xc3\xbc");
	if (mask & F_XNAME)
		m->xname = S("user.qftfs.test");
	if (mask & F_OPFLAGS) {
		uint32_t known = reply ? sp->rep_flags : sp->req_flags;

		/* Every known bit, with a real access mode for opens. */
		m->opflags = known == QFT_O_KNOWN ?
			(QFT_O_KNOWN & ~QFT_O_ACCMODE) | QFT_O_RDWR : known;
	}
	if (mask & F_MODE)
		m->mode = sp->op == QFT_OP_MKNOD ? QFT_S_IFCHR | 0620 :
			  06755u - sp->op;
	if (mask & F_UID)
		m->uid = 1000;
	if (mask & F_GID)
		m->gid = 0xfffffffeu;
	if (mask & F_VALID)
		m->valid = QFT_SET_KNOWN;
	if (mask & F_RDEV)
		m->rdev = 0x0000123400005678ull;
	if (mask & F_SIZE)
		m->size = INT64_MAX;
	if (mask & F_OFFSET) {
		switch (sp->op) {
		case QFT_OP_READDIR: m->offset = 0xfedcba9876543210ull; break;
		case QFT_OP_READ:    m->offset = INT64_MAX; break;
		default:             m->offset = (1ull << 40) + 123; break;
		}
	}
	if (mask & F_LENGTH)
		m->length = sp->op == QFT_OP_FALLOCATE ?
			(uint64_t)INT64_MAX - m->offset : sp->max_length;
	if (mask & F_COUNT)
		m->count = 0x0123456789abcdefull;
	if (mask & F_ATIME)
		m->atime = (struct qft_time){ -1234567890123, 999999999 };
	if (mask & F_MTIME)
		m->mtime = (struct qft_time){ 1700000000, 1 };
	if (mask & F_DATA) {
		if (sp->op == QFT_OP_READDIR)
			m->data = (struct qft_blob){ readdir_data.data,
						     (uint32_t)readdir_data.len };
		else if (sp->op == QFT_OP_SCAN)
			m->data = (struct qft_blob){ scan_data.data,
						     (uint32_t)scan_data.len };
		else
			m->data = (struct qft_blob){ pattern + sp->op,
						     1000u + sp->op };
	}
	if (mask & F_ATTR)
		m->attr = sample_attr;
	if (mask & F_STATFS)
		m->st = sample_st;
}

static bool str_same(struct qft_str a, struct qft_str b)
{
	if (!a.s || !b.s)
		return a.s == b.s && a.len == b.len;
	return a.len == b.len && memcmp(a.s, b.s, a.len) == 0 &&
	       b.s[b.len] == '\0';
}

static bool blob_same(struct qft_blob a, struct qft_blob b)
{
	if (!a.p || !b.p)
		return a.p == b.p && a.len == b.len;
	return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

static bool time_same(struct qft_time a, struct qft_time b)
{
	return a.sec == b.sec && a.nsec == b.nsec;
}

static bool attr_same(const struct qft_attr *a, const struct qft_attr *b)
{
	return a->ino == b->ino && a->mode == b->mode &&
	       a->nlink == b->nlink && a->uid == b->uid && a->gid == b->gid &&
	       a->rdev == b->rdev && a->size == b->size &&
	       a->blocks == b->blocks && a->blksize == b->blksize &&
	       time_same(a->atime, b->atime) && time_same(a->mtime, b->mtime) &&
	       time_same(a->ctime, b->ctime);
}

static bool statfs_same(const struct qft_statfs *a, const struct qft_statfs *b)
{
	return a->bsize == b->bsize && a->frsize == b->frsize &&
	       a->blocks == b->blocks && a->bfree == b->bfree &&
	       a->bavail == b->bavail && a->files == b->files &&
	       a->ffree == b->ffree && a->favail == b->favail &&
	       a->namemax == b->namemax;
}

/* Field by field; fields an opcode does not carry must stay zero. */
static void cmp_msg(const struct qft_msg *e, const struct qft_msg *g)
{
	CHECK_EQ(g->op, e->op);
	CHECK_EQ(g->flags, e->flags);
	CHECK_EQ(g->id, e->id);
	CHECK_EQ(g->status, e->status);
	CHECK(str_same(e->errmsg, g->errmsg));
	CHECK_EQ(g->magic, e->magic);
	CHECK_EQ(g->version, e->version);
	CHECK_EQ(g->features, e->features);
	CHECK_EQ(g->handle, e->handle);
	CHECK_EQ(g->handle2, e->handle2);
	CHECK_EQ(g->offset2, e->offset2);
	CHECK(str_same(e->path, g->path));
	CHECK(str_same(e->name, g->name));
	CHECK(str_same(e->path2, g->path2));
	CHECK(str_same(e->name2, g->name2));
	CHECK(str_same(e->target, g->target));
	CHECK(str_same(e->xname, g->xname));
	CHECK_EQ(g->opflags, e->opflags);
	CHECK_EQ(g->mode, e->mode);
	CHECK_EQ(g->uid, e->uid);
	CHECK_EQ(g->gid, e->gid);
	CHECK_EQ(g->valid, e->valid);
	CHECK_EQ(g->rdev, e->rdev);
	CHECK_EQ(g->size, e->size);
	CHECK_EQ(g->offset, e->offset);
	CHECK_EQ(g->length, e->length);
	CHECK_EQ(g->count, e->count);
	CHECK(time_same(e->atime, g->atime));
	CHECK(time_same(e->mtime, g->mtime));
	CHECK(blob_same(e->data, g->data));
	CHECK(attr_same(&e->attr, &g->attr));
	CHECK(statfs_same(&e->st, &g->st));
	if (e->flags & QFT_F_CRED) {
		CHECK_EQ(g->cred.uid, e->cred.uid);
		CHECK_EQ(g->cred.gid, e->cred.gid);
		CHECK_EQ(g->cred.ngroups, e->cred.ngroups);
		for (uint32_t i = 0; i < e->cred.ngroups &&
		     i < QFT_MAX_GROUPS; i++)
			CHECK_EQ(g->cred.groups[i], e->cred.groups[i]);
	}
}

/*
 * Encodes *m, decodes an exact heap copy and returns decode's result; on
 * success the decoded message must equal *m.  An encode failure is a test
 * failure and returns a value no decoder gives.
 */
#define ENCODE_FAILED (-100000)
static int roundtrip(const struct qft_msg *m)
{
	struct qft_msg got;
	struct qbuf b;
	uint8_t *copy;
	int r;

	qbuf_init(&b, FRAME_LIMIT);
	r = qft_msg_encode(&b, m);
	CHECK_EQ(r, 0);
	if (r < 0) {
		qbuf_free(&b);
		return ENCODE_FAILED;
	}
	CHECK_EQ(qft_load32(b.data), b.len - QFT_HDR_SIZE);
	copy = dup_exact(b.data, b.len);
	r = qft_msg_decode(&got, copy, b.len);
	if (r == 0)
		cmp_msg(m, &got);
	free(copy);
	qbuf_free(&b);
	return r;
}

/* Valid frames gathered for the truncation tests and the garbage loop. */
struct frame {
	uint8_t *p;
	size_t n;
	char what[48];
};
static struct frame frames[5 * QFT_OP__COUNT];
static size_t nframes;

static void keep_frame(const struct qft_msg *m, const char *what)
{
	struct qbuf b;

	qbuf_init(&b, FRAME_LIMIT);
	if (qft_msg_encode(&b, m) == 0 &&
	    nframes < sizeof(frames) / sizeof(frames[0])) {
		frames[nframes].p = dup_exact(b.data, b.len);
		frames[nframes].n = b.len;
		snprintf(frames[nframes].what, sizeof(frames[0].what), "%s %s",
			 qft_op_name(m->op), what);
		nframes++;
	}
	qbuf_free(&b);
}

static void build_readdir_data(void)
{
	static const char *const names[] = {
		".", "..", "file", "sub dir", "\xc3\xbc", "...",
	};
	struct qft_dirent d;

	qbuf_init(&readdir_data, QFT_MAX_DATA);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		memset(&d, 0, sizeof(d));
		d.ino = 1000 + i;
		d.off = 0xf000000000000000ull + i;
		d.type = i < 2 || i == 3 ? QFT_S_IFDIR : QFT_S_IFREG;
		d.name = S(names[i]);
		d.has_attr = i % 2 == 0;
		d.attr = sample_attr;
		d.attr.ino = d.ino;
		d.attr.mode = d.type | 0640;
		if (qft_dirent_encode(&readdir_data, &d) != 0)
			CHECK(!"dirent encode");
	}
}

/* A SCAN reply's records: three directories, every record kind. */
static void put_scan(struct qbuf *b, uint8_t kind, uint32_t index,
		     const char *name, uint32_t mode, uint32_t status)
{
	struct qft_scan_rec rec;

	memset(&rec, 0, sizeof(rec));
	rec.kind = kind;
	rec.index = index;
	rec.status = status;
	if (name) {
		rec.name = S(name);
		rec.attr = sample_attr;
		rec.attr.mode = mode;
	}
	if (qft_scan_rec_encode(b, &rec) != 0)
		CHECK(!"scan record encode");
}

static void build_scan_data(void)
{
	qbuf_init(&scan_data, QFT_MAX_DATA);
	CHECK_EQ(qft_scan_head_encode(&scan_data, 1), 0);
	put_scan(&scan_data, QFT_SCAN_REC_ENTRY, 0, "file", QFT_S_IFREG | 0644, 0);
	put_scan(&scan_data, QFT_SCAN_REC_ENTRY, 0, "sub dir", QFT_S_IFDIR | 0755, 0);
	put_scan(&scan_data, QFT_SCAN_REC_DIR_END, 0, NULL, 0, QFT_OK);
	put_scan(&scan_data, QFT_SCAN_REC_ENTRY, 1, "inner", QFT_S_IFREG | 0600, 0);
	put_scan(&scan_data, QFT_SCAN_REC_ENTRY, 1, "deeper", QFT_S_IFDIR | 0700, 0);
	put_scan(&scan_data, QFT_SCAN_REC_DIR_END, 1, NULL, 0, QFT_EACCES);
	put_scan(&scan_data, QFT_SCAN_REC_ENTRY, 2, "\xc3\xbc", QFT_S_IFLNK | 0777, 0);
	put_scan(&scan_data, QFT_SCAN_REC_DIR_END, 2, NULL, 0, QFT_OK);
}

static void test_op_names(void)
{
	/* Every request up to SCAN has a spec; the opcodes of change
	 * notification (NOTIFY, UNWATCH) have tests of their own
	 * (test_notify_*), as NOTIFY is no request. */
	CHECK_EQ(NSPECS, QFT_OP_SCAN);
	for (size_t i = 0; i < NSPECS; i++) {
		check_ctx("op %s", specs[i].name);
		CHECK_EQ(specs[i].op, i + 1);
		CHECK(strcmp(qft_op_name(specs[i].op), specs[i].name) == 0);
	}
	check_ctx("%s", "");
	CHECK(strcmp(qft_op_name(0), "?") == 0);
	CHECK(strcmp(qft_op_name(QFT_OP__COUNT), "?") == 0);
	CHECK(strcmp(qft_op_name(0xffff), "?") == 0);
}

static void test_roundtrip_all(void)
{
	for (size_t i = 0; i < NSPECS; i++) {
		const struct op_spec *sp = &specs[i];
		struct qft_msg m, req;

		check_ctx("%s request", sp->name);
		fill(&req, sp, false);
		CHECK_EQ(roundtrip(&req), 0);
		keep_frame(&req, "request");

		check_ctx("%s reply", sp->name);
		qft_msg_init_reply(&m, &req);
		CHECK_EQ(m.op, req.op);
		CHECK_EQ(m.id, req.id);
		CHECK_EQ(m.flags, QFT_F_REPLY);
		fill(&m, sp, true);
		CHECK_EQ(roundtrip(&m), 0);
		keep_frame(&m, "reply");

		/* An error reply carries status and message, never fields. */
		check_ctx("%s error reply", sp->name);
		qft_msg_init_reply(&m, &req);
		m.status = 1 + (sp->op * 7) % (QFT_STATUS__COUNT - 1);
		m.errmsg = S("something failed: dir one/\xc3\xbc");
		CHECK_EQ(roundtrip(&m), 0);
		keep_frame(&m, "error");

		/* Defaults: zero values and empty strings round-trip too. */
		check_ctx("%s empty request", sp->name);
		qft_msg_init(&m, sp->op, 0);
		if (sp->req & F_MAGIC)
			m.magic = QFT_MAGIC;
		if (sp->req & F_HANDLE)
			m.handle = 1;
		if (sp->req & F_PATH)
			m.path = S("");
		if (sp->req & F_PATH2)
			m.path2 = S("");
		if (sp->req & F_NAME)
			m.name = S("n");
		if (sp->req & F_NAME2)
			m.name2 = S("m");
		if (sp->req & F_TARGET)
			m.target = S("t");
		if (sp->req & F_XNAME)
			m.xname = S("x");
		if (sp->req & F_DATA)
			m.data = (struct qft_blob){ pattern, 0 };
		CHECK_EQ(roundtrip(&m), 0);
	}
	check_ctx("%s", "");
}

/* Data at the protocol's limits: a whole 1 MiB WRITE and READ reply. */
static void test_big_data(void)
{
	const struct op_spec *wr = &specs[QFT_OP_WRITE - 1];
	const struct op_spec *rd = &specs[QFT_OP_READ - 1];
	struct qft_msg m;

	check_ctx("1 MiB WRITE");
	fill(&m, wr, false);
	m.data = (struct qft_blob){ pattern, QFT_MAX_DATA };
	CHECK_EQ(roundtrip(&m), 0);
	m.data.len = QFT_MAX_DATA + 1;   /* still fits a frame */
	CHECK_EQ(roundtrip(&m), -EBADMSG);

	check_ctx("1 MiB READ reply");
	fill(&m, rd, true);
	m.data = (struct qft_blob){ pattern + 1, QFT_MAX_DATA };
	CHECK_EQ(roundtrip(&m), 0);
	m.data.len = QFT_MAX_DATA + 1;
	CHECK_EQ(roundtrip(&m), -EBADMSG);
	check_ctx("%s", "");
}

static void test_errmsg(void)
{
	const struct op_spec *sp = &specs[QFT_OP_UNLINK - 1];
	struct qft_msg req, m, got;
	static char longmsg[2000];
	struct qbuf b;
	uint8_t *copy;

	memset(longmsg, 'e', sizeof(longmsg));
	fill(&req, sp, false);

	check_ctx("errmsg absent");
	qft_msg_init_reply(&m, &req);
	m.status = QFT_ENOSPC;
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	copy = dup_exact(b.data, b.len);
	CHECK_EQ(qft_msg_decode(&got, copy, b.len), 0);
	CHECK_EQ(got.status, QFT_ENOSPC);
	CHECK(got.errmsg.s && got.errmsg.len == 0 && got.errmsg.s[0] == '\0');
	CHECK(got.path.s == NULL && got.name.s == NULL);
	free(copy);

	/* Longer messages are cut to QFT_MAX_ERRMSG when encoded. */
	static const size_t lens[] = { QFT_MAX_ERRMSG - 1, QFT_MAX_ERRMSG,
				       QFT_MAX_ERRMSG + 1, sizeof(longmsg) };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t want = lens[i] < QFT_MAX_ERRMSG ? lens[i] : QFT_MAX_ERRMSG;

		check_ctx("errmsg %zu bytes", lens[i]);
		m.errmsg = SN(longmsg, lens[i]);
		qbuf_reset(&b);
		CHECK_EQ(qft_msg_encode(&b, &m), 0);
		copy = dup_exact(b.data, b.len);
		CHECK_EQ(qft_msg_decode(&got, copy, b.len), 0);
		CHECK_EQ(got.errmsg.len, want);
		CHECK(memcmp(got.errmsg.s, longmsg, want) == 0 &&
		      got.errmsg.s[want] == '\0');
		free(copy);
	}

	/* A status this version does not know still decodes (errmap: EIO). */
	check_ctx("errmsg unknown status");
	m.status = 0xdeadbeefu;
	m.errmsg = S("from the future");
	CHECK_EQ(roundtrip(&m), 0);

	/* Embedded NUL: a malformed error reply, not a request to answer. */
	check_ctx("errmsg with NUL");
	m.status = QFT_EIO;
	m.errmsg = SN("bad\0msg", 7);
	CHECK_EQ(roundtrip(&m), -EBADMSG);

	/* An errmsg length over the limit, crafted by hand. */
	check_ctx("errmsg over limit");
	m.errmsg = SN(longmsg, QFT_MAX_ERRMSG);
	qbuf_reset(&b);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	CHECK_EQ(qbuf_put_u8(&b, 0), 0);   /* one more byte of message */
	b.data[QFT_HDR_SIZE + 4 + 4 + QFT_MAX_ERRMSG] = 'e';
	qbuf_set_u32(&b, QFT_HDR_SIZE + 4, QFT_MAX_ERRMSG + 1);
	qbuf_set_u32(&b, 0, (uint32_t)(b.len - QFT_HDR_SIZE));
	copy = dup_exact(b.data, b.len);
	CHECK_EQ(qft_msg_decode(&got, copy, b.len), -EBADMSG);
	free(copy);
	qbuf_free(&b);
	check_ctx("%s", "");
}

/* A tiny big-endian writer, independent of qbuf, for golden frames. */
struct wr {
	uint8_t b[1024];
	size_t n;
};

static void wput(struct wr *w, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		w->b[w->n++] = (uint8_t)(v >> (8 * i));
}

static void wstr(struct wr *w, const char *s)
{
	size_t n = strlen(s);

	wput(w, n, 4);
	memcpy(w->b + w->n, s, n + 1);
	w->n += n + 1;
}

static void whdr(struct wr *w, uint16_t op, uint16_t flags, uint64_t id)
{
	w->n = 0;
	wput(w, 0, 4);   /* length, patched by wdone */
	wput(w, op, 2);
	wput(w, flags, 2);
	wput(w, id, 8);
}

static void wdone(struct wr *w)
{
	uint32_t len = (uint32_t)(w->n - QFT_HDR_SIZE);

	w->b[0] = (uint8_t)(len >> 24);
	w->b[1] = (uint8_t)(len >> 16);
	w->b[2] = (uint8_t)(len >> 8);
	w->b[3] = (uint8_t)len;
}

static void wtime(struct wr *w, struct qft_time t)
{
	wput(w, (uint64_t)t.sec, 8);
	wput(w, t.nsec, 4);
}

static void wattr(struct wr *w, const struct qft_attr *a)
{
	wput(w, a->ino, 8);
	wput(w, a->mode, 4);
	wput(w, a->nlink, 4);
	wput(w, a->uid, 4);
	wput(w, a->gid, 4);
	wput(w, a->rdev, 8);
	wput(w, a->size, 8);
	wput(w, a->blocks, 8);
	wput(w, a->blksize, 4);
	wtime(w, a->atime);
	wtime(w, a->mtime);
	wtime(w, a->ctime);
	wput(w, a->flags, 4);
}

static void check_golden(const struct qft_msg *m, const struct wr *w)
{
	struct qbuf b;

	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, m), 0);
	CHECK_EQ(b.len, w->n);
	CHECK(b.len == w->n && memcmp(b.data, w->b, w->n) == 0);
	qbuf_free(&b);
}

static void test_golden(void)
{
	static const uint8_t hello[] = {
		0, 0, 0, 12, 0, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
		'Q', 'F', 'T', 'F', 0, 0, 0, 2, 0, 0, 0, 0,
	};
	static const uint8_t lstat_req[] = {
		0, 0, 0, 8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7,
		0, 0, 0, 3, 'a', '/', 'b', 0,
	};
	static const uint8_t lstat_err[] = {
		0, 0, 0, 11, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7,
		0, 0, 0, 2, 0, 0, 0, 2, 'n', 'o', 0,
	};
	struct qft_msg m;
	struct wr w;

	check_ctx("golden HELLO");
	qft_msg_init(&m, QFT_OP_HELLO, 0x0102030405060708ull);
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	memcpy(w.b, hello, sizeof(hello));
	w.n = sizeof(hello);
	check_golden(&m, &w);

	check_ctx("golden LSTAT");
	qft_msg_init(&m, QFT_OP_LSTAT, 7);
	m.path = S("a/b");
	memcpy(w.b, lstat_req, sizeof(lstat_req));
	w.n = sizeof(lstat_req);
	check_golden(&m, &w);

	check_ctx("golden LSTAT error");
	qft_msg_init(&m, QFT_OP_LSTAT, 7);
	m.flags = QFT_F_REPLY;
	m.status = QFT_ENOENT;
	m.errmsg = S("no");
	memcpy(w.b, lstat_err, sizeof(lstat_err));
	w.n = sizeof(lstat_err);
	check_golden(&m, &w);

	check_ctx("golden LSTAT reply");
	qft_msg_init(&m, QFT_OP_LSTAT, 9);
	m.flags = QFT_F_REPLY;
	m.attr = sample_attr;
	whdr(&w, QFT_OP_LSTAT, QFT_F_REPLY, 9);
	wput(&w, 0, 4);
	wattr(&w, &sample_attr);
	wdone(&w);
	CHECK_EQ(w.n, QFT_HDR_SIZE + 4 + QFT_ATTR_WIRE_SIZE);
	check_golden(&m, &w);

	check_ctx("golden STATFS reply");
	qft_msg_init(&m, QFT_OP_STATFS, 10);
	m.flags = QFT_F_REPLY;
	m.st = sample_st;
	whdr(&w, QFT_OP_STATFS, QFT_F_REPLY, 10);
	wput(&w, 0, 4);
	wput(&w, sample_st.bsize, 8);
	wput(&w, sample_st.frsize, 8);
	wput(&w, sample_st.blocks, 8);
	wput(&w, sample_st.bfree, 8);
	wput(&w, sample_st.bavail, 8);
	wput(&w, sample_st.files, 8);
	wput(&w, sample_st.ffree, 8);
	wput(&w, sample_st.favail, 8);
	wput(&w, sample_st.namemax, 8);
	wdone(&w);
	CHECK_EQ(w.n, QFT_HDR_SIZE + 4 + QFT_STATFS_WIRE_SIZE);
	check_golden(&m, &w);

	check_ctx("golden WRITE");
	qft_msg_init(&m, QFT_OP_WRITE, 11);
	m.handle = 3;
	m.offset = 0x123456789ull;
	m.data = (struct qft_blob){ (const uint8_t *)"\0xyz", 4 };
	whdr(&w, QFT_OP_WRITE, 0, 11);
	wput(&w, 3, 8);
	wput(&w, 0x123456789ull, 8);
	wput(&w, 4, 4);
	memcpy(w.b + w.n, "\0xyz", 4);
	w.n += 4;
	wdone(&w);
	check_golden(&m, &w);

	check_ctx("golden RENAME");
	qft_msg_init(&m, QFT_OP_RENAME, 12);
	m.path = S("d1");
	m.name = S("old");
	m.path2 = S("");
	m.name2 = S("new");
	m.opflags = QFT_RENAME_NOREPLACE;
	whdr(&w, QFT_OP_RENAME, 0, 12);
	wstr(&w, "d1");
	wstr(&w, "old");
	wstr(&w, "");
	wstr(&w, "new");
	wput(&w, QFT_RENAME_NOREPLACE, 4);
	wdone(&w);
	check_golden(&m, &w);

	check_ctx("golden SETATTR");
	qft_msg_init(&m, QFT_OP_SETATTR, 13);
	m.path = S("f");
	m.valid = QFT_SET_MODE | QFT_SET_ATIME | QFT_SET_MTIME;
	m.mode = 0600;
	m.uid = 5;
	m.gid = 6;
	m.size = 7;
	m.atime = (struct qft_time){ -2, 3 };
	m.mtime = (struct qft_time){ 4, 999999999 };
	whdr(&w, QFT_OP_SETATTR, 0, 13);
	wput(&w, 0, 8);
	wstr(&w, "f");
	wput(&w, m.valid, 4);
	wput(&w, 0600, 4);
	wput(&w, 5, 4);
	wput(&w, 6, 4);
	wput(&w, 7, 8);
	wtime(&w, m.atime);
	wtime(&w, m.mtime);
	wdone(&w);
	check_golden(&m, &w);
	check_ctx("%s", "");
}

/*
 * Every truncation of every frame: as cut (the header still announces the
 * full length), and with the header rewritten to the cut length so the
 * payload parser itself meets the end.  Also trailing bytes either way.
 */
static void test_truncation(void)
{
	struct qft_msg m;

	CHECK(nframes >= 3 * NSPECS);
	for (size_t f = 0; f < nframes; f++) {
		const struct frame *fr = &frames[f];

		for (size_t n = 0; n < fr->n; n++) {
			uint8_t *p = dup_exact(fr->p, n);

			check_ctx("%s cut to %zu of %zu", fr->what, n, fr->n);
			CHECK_EQ(qft_msg_decode(&m, p, n), -EBADMSG);
			if (n >= QFT_HDR_SIZE) {
				qft_store32(p, (uint32_t)(n - QFT_HDR_SIZE));
				CHECK_EQ(qft_msg_decode(&m, p, n), -EBADMSG);
			}
			free(p);
		}

		for (size_t extra = 1; extra <= 9; extra += 8) {
			uint8_t *p = malloc(fr->n + extra);

			check_ctx("%s + %zu bytes", fr->what, extra);
			memcpy(p, fr->p, fr->n);
			memset(p + fr->n, 0, extra);
			CHECK_EQ(qft_msg_decode(&m, p, fr->n + extra), -EBADMSG);
			qft_store32(p, (uint32_t)(fr->n + extra - QFT_HDR_SIZE));
			CHECK_EQ(qft_msg_decode(&m, p, fr->n + extra), -EBADMSG);
			free(p);
		}

		/* The untouched frame still decodes (sanity for the above). */
		uint8_t *p = dup_exact(fr->p, fr->n);

		check_ctx("%s intact", fr->what);
		CHECK_EQ(qft_msg_decode(&m, p, fr->n), 0);
		free(p);
	}
	check_ctx("%s", "");
}

static void test_header(void)
{
	static const uint32_t big[] = {
		QFT_MAX_PAYLOAD + 1, QFT_MAX_PAYLOAD + 4096, 0x7fffffffu,
		0x80000000u, UINT32_MAX,
	};
	static const uint16_t bad_ops[] = {
		0, QFT_OP__COUNT, QFT_OP__COUNT + 1, 0x100, 0x8000, 0xffff,
	};
	struct qft_msg m;
	struct qft_hdr h;
	uint8_t raw[QFT_HDR_SIZE];
	uint8_t *p;

	/* Length over the limit: refused from the 16 header bytes alone. */
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		check_ctx("header length %#x", big[i]);
		memset(raw, 0, sizeof(raw));
		qft_store32(raw, big[i]);
		qft_store16(raw + 4, QFT_OP_WRITE);
		p = dup_exact(raw, sizeof(raw));
		CHECK_EQ(qft_hdr_decode(&h, p, sizeof(raw)), -EBADMSG);
		CHECK_EQ(qft_msg_decode(&m, p, sizeof(raw)), -EBADMSG);
		/* Even when the opcode is unknown as well. */
		qft_store16(p + 4, 0xffff);
		CHECK_EQ(qft_msg_decode(&m, p, sizeof(raw)), -EBADMSG);
		free(p);
	}

	check_ctx("header at the limit");
	memset(raw, 0, sizeof(raw));
	qft_store32(raw, QFT_MAX_PAYLOAD);
	qft_store16(raw + 4, QFT_OP_WRITE);
	qft_store16(raw + 6, QFT_F_REPLY);
	qft_store64(raw + 8, 0x1122334455667788ull);
	CHECK_EQ(qft_hdr_decode(&h, raw, sizeof(raw)), 0);
	CHECK(h.len == QFT_MAX_PAYLOAD && h.op == QFT_OP_WRITE &&
	      h.flags == QFT_F_REPLY && h.id == 0x1122334455667788ull);
	/* The header alone is not the frame it announces. */
	CHECK_EQ(qft_msg_decode(&m, raw, sizeof(raw)), -EBADMSG);
	for (size_t n = 0; n < QFT_HDR_SIZE; n++) {
		p = dup_exact(raw, n);
		check_ctx("header cut to %zu", n);
		CHECK_EQ(qft_hdr_decode(&h, p, n), -EBADMSG);
		free(p);
	}

	/* Unknown opcodes: -ENOSYS from the header and the frame. */
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		struct qft_msg req;
		struct qbuf b;

		check_ctx("opcode %#x", bad_ops[i]);
		fill(&req, &specs[QFT_OP_LSTAT - 1], false);
		qbuf_init(&b, FRAME_LIMIT);
		CHECK_EQ(qft_msg_encode(&b, &req), 0);
		qft_store16(b.data + 4, bad_ops[i]);
		p = dup_exact(b.data, b.len);
		CHECK_EQ(qft_hdr_decode(&h, p, b.len), -ENOSYS);
		CHECK_EQ(qft_msg_decode(&m, p, b.len), -ENOSYS);
		qft_store16(p + 6, QFT_F_REPLY);
		CHECK_EQ(qft_msg_decode(&m, p, b.len), -ENOSYS);
		free(p);

		/* ... and encode refuses them, leaving the buffer alone. */
		size_t len = b.len;
		req.op = bad_ops[i];
		CHECK_EQ(qft_msg_encode(&b, &req), -EINVAL);
		CHECK_EQ(b.len, len);
		qbuf_free(&b);
	}

	/* Unknown frame flags (CRED, valid on a request, has its own test:
	 * test_cred_codec). */
	for (int bit = 1; bit < 16; bit++) {
		struct qft_msg req;
		struct qbuf b;

		if ((1u << bit) == QFT_F_CRED)
			continue;
		check_ctx("frame flag bit %d", bit);
		fill(&req, &specs[QFT_OP_CLOSE - 1], false);
		req.flags = (uint16_t)(1u << bit);
		qbuf_init(&b, FRAME_LIMIT);
		CHECK_EQ(qft_msg_encode(&b, &req), 0);
		p = dup_exact(b.data, b.len);
		CHECK_EQ(qft_hdr_decode(&h, p, b.len), -EBADMSG);
		CHECK_EQ(qft_msg_decode(&m, p, b.len), -EBADMSG);
		qft_store16(p + 6, (uint16_t)(1u << bit | QFT_F_REPLY));
		CHECK_EQ(qft_msg_decode(&m, p, b.len), -EBADMSG);
		free(p);
		qbuf_free(&b);
	}
	check_ctx("%s", "");
}

static char name255[256], name256[257], path4095[4096], path4096[4097];
static char path_long_comp[300];

static void build_long_strings(void)
{
	size_t n = 0;

	memset(name255, 'n', 255);
	memset(name256, 'n', 256);
	/* 16 names of 255 bytes joined by 15 slashes: exactly 4095. */
	for (int i = 0; i < 16; i++) {
		if (i)
			path4095[n++] = '/';
		memset(path4095 + n, 'a' + i, 255);
		n += 255;
	}
	CHECK_EQ(n, 4095);
	/* 17 names of 240 and 16 slashes: 4096, too long only as a whole. */
	n = 0;
	for (int i = 0; i < 17; i++) {
		if (i)
			path4096[n++] = '/';
		memset(path4096 + n, 'A' + i, 240);
		n += 240;
	}
	CHECK_EQ(n, 4096);
	snprintf(path_long_comp, sizeof(path_long_comp), "ok/%s/ok", name256);
}

static const struct {
	const char *s;
	size_t len;   /* 0: strlen */
} bad_names[] = {
	{ "", 0 }, { ".", 0 }, { "..", 0 }, { "a/b", 0 }, { "/", 0 },
	{ "a/", 0 }, { "/a", 0 }, { name256, 0 }, { "a\0b", 3 }, { "\0", 1 },
	{ "ab\0", 3 },
}, good_names[] = {
	{ "a", 0 }, { "...", 0 }, { ".a", 0 }, { "a.", 0 }, { "..a", 0 },
	{ "a b", 0 }, { "\xc3\xbc", 0 }, { "-", 0 }, { "\n\t\x7f\x01", 0 },
	{ name255, 0 },
}, bad_paths[] = {
	{ "/", 0 }, { "/a", 0 }, { "a/", 0 }, { "//", 0 }, { "a//b", 0 },
	{ "a/../b", 0 }, { "./a", 0 }, { "a/.", 0 }, { "..", 0 }, { ".", 0 },
	{ "a/b/", 0 }, { "../a", 0 }, { "a/./b", 0 }, { path4096, 0 },
	{ path_long_comp, 0 }, { "a\0b", 3 }, { "a/\0", 3 }, { "a/b\0", 4 },
}, good_paths[] = {
	{ "", 0 }, { "a", 0 }, { "a/b c/\xc3\xbc", 0 }, { name255, 0 },
	{ path4095, 0 }, { "a/.../b", 0 }, { "..a/b..", 0 }, { ".x/.y", 0 },
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define LEN(e) ((e).len ? (e).len : strlen((e).s))

static void test_name_path_valid(void)
{
	for (size_t i = 0; i < NELEM(bad_names); i++) {
		check_ctx("bad name #%zu", i);
		CHECK(!qft_name_valid(bad_names[i].s, LEN(bad_names[i])));
	}
	for (size_t i = 0; i < NELEM(good_names); i++) {
		check_ctx("good name #%zu", i);
		CHECK(qft_name_valid(good_names[i].s, LEN(good_names[i])));
	}
	for (size_t i = 0; i < NELEM(bad_paths); i++) {
		check_ctx("bad path #%zu", i);
		CHECK(!qft_path_valid(bad_paths[i].s, LEN(bad_paths[i])));
	}
	for (size_t i = 0; i < NELEM(good_paths); i++) {
		check_ctx("good path #%zu", i);
		CHECK(qft_path_valid(good_paths[i].s, LEN(good_paths[i])));
	}
	check_ctx("%s", "");
}

/* Names and paths through every opcode field that carries them. */
static void test_names_in_messages(void)
{
	for (size_t i = 0; i < NSPECS; i++) {
		const struct op_spec *sp = &specs[i];
		struct qft_msg m;

		for (int which = 0; which < 2; which++) {
			uint32_t nf = which ? F_NAME2 : F_NAME;
			uint32_t pf = which ? F_PATH2 : F_PATH;

			if (sp->req & nf) {
				for (size_t k = 0; k < NELEM(bad_names); k++) {
					check_ctx("%s name%s bad #%zu", sp->name,
						  which ? "2" : "", k);
					fill(&m, sp, false);
					*(which ? &m.name2 : &m.name) =
						SN(bad_names[k].s, LEN(bad_names[k]));
					CHECK_EQ(roundtrip(&m), -EINVAL);
				}
				for (size_t k = 0; k < NELEM(good_names); k++) {
					check_ctx("%s name%s good #%zu", sp->name,
						  which ? "2" : "", k);
					fill(&m, sp, false);
					*(which ? &m.name2 : &m.name) =
						SN(good_names[k].s, LEN(good_names[k]));
					CHECK_EQ(roundtrip(&m), 0);
				}
			}
			if (sp->req & pf) {
				for (size_t k = 0; k < NELEM(bad_paths); k++) {
					check_ctx("%s path%s bad #%zu", sp->name,
						  which ? "2" : "", k);
					fill(&m, sp, false);
					*(which ? &m.path2 : &m.path) =
						SN(bad_paths[k].s, LEN(bad_paths[k]));
					CHECK_EQ(roundtrip(&m), -EINVAL);
				}
				for (size_t k = 0; k < NELEM(good_paths); k++) {
					check_ctx("%s path%s good #%zu", sp->name,
						  which ? "2" : "", k);
					fill(&m, sp, false);
					*(which ? &m.path2 : &m.path) =
						SN(good_paths[k].s, LEN(good_paths[k]));
					CHECK_EQ(roundtrip(&m), 0);
				}
			}
		}
	}

	/* Symlink targets: any non-empty string up to a path's length. */
	static const struct { const char *s; size_t len; int r; } targets[] = {
		{ "", 0, -EINVAL }, { "/abs/olute", 0, 0 }, { "../..//x/", 0, 0 },
		{ path4095, 0, 0 }, { path4096, 0, -EINVAL }, { "a\0b", 3, -EINVAL },
	};
	for (size_t k = 0; k < NELEM(targets); k++) {
		struct qft_msg m;

		check_ctx("SYMLINK target #%zu", k);
		fill(&m, &specs[QFT_OP_SYMLINK - 1], false);
		m.target = SN(targets[k].s, LEN(targets[k]));
		CHECK_EQ(roundtrip(&m), targets[k].r);
		check_ctx("READLINK reply target #%zu", k);
		fill(&m, &specs[QFT_OP_READLINK - 1], true);
		m.target = SN(targets[k].s, LEN(targets[k]));
		CHECK_EQ(roundtrip(&m), targets[k].r);
	}

	/* Extended attribute names: 1..255 bytes. */
	static const struct { const char *s; size_t len; int r; } xnames[] = {
		{ "", 0, -EINVAL }, { "user.a", 0, 0 }, { name255, 0, 0 },
		{ name256, 0, -EINVAL }, { "user.\0x", 7, -EINVAL },
	};
	static const uint16_t xops[] = {
		QFT_OP_GETXATTR, QFT_OP_SETXATTR, QFT_OP_REMOVEXATTR,
	};
	for (size_t o = 0; o < NELEM(xops); o++) {
		for (size_t k = 0; k < NELEM(xnames); k++) {
			struct qft_msg m;

			check_ctx("%s xname #%zu", qft_op_name(xops[o]), k);
			fill(&m, &specs[xops[o] - 1], false);
			m.xname = SN(xnames[k].s, LEN(xnames[k]));
			CHECK_EQ(roundtrip(&m), xnames[k].r);
		}
	}
	check_ctx("%s", "");
}

/* Reply flags that are valid only with another: OPEN's EOF (and data)
 * only with DATA, SCAN's TRUNCATED only with EOF. */
static bool flag_needs_other(uint16_t op, uint32_t bit)
{
	return (op == QFT_OP_OPEN && bit == QFT_OPEN_EOF) ||
	       (op == QFT_OP_SCAN && bit == QFT_SCAN_TRUNCATED);
}

/* Unknown bits in opflags (both directions) and SETATTR's valid mask. */
static void test_flags(void)
{
	for (size_t i = 0; i < NSPECS; i++) {
		const struct op_spec *sp = &specs[i];

		for (int reply = 0; reply < 2; reply++) {
			uint32_t mask = reply ? sp->rep : sp->req;
			uint32_t known = reply ? sp->rep_flags : sp->req_flags;

			if (!(mask & F_OPFLAGS))
				continue;
			for (int bit = 0; bit < 32; bit++) {
				struct qft_msg m;

				if (known & (1u << bit))
					continue;
				check_ctx("%s %s flag bit %d", sp->name,
					  reply ? "reply" : "request", bit);
				fill(&m, sp, reply);
				m.opflags |= 1u << bit;
				CHECK_EQ(roundtrip(&m), -EINVAL);
			}
			/* Each known bit alone is fine. */
			for (int bit = 0; bit < 32; bit++) {
				struct qft_msg m;

				if (!(known & (1u << bit)))
					continue;
				check_ctx("%s %s known bit %d", sp->name,
					  reply ? "reply" : "request", bit);
				fill(&m, sp, reply);
				m.opflags = 1u << bit;
				CHECK_EQ(roundtrip(&m), reply &&
					 flag_needs_other(sp->op, 1u << bit) ?
					 -EINVAL : 0);
			}
		}
	}
	for (int bit = 0; bit < 32; bit++) {
		struct qft_msg m;

		check_ctx("SETATTR valid bit %d", bit);
		fill(&m, &specs[QFT_OP_SETATTR - 1], false);
		m.valid = 1u << bit;
		CHECK_EQ(roundtrip(&m), (QFT_SET_KNOWN & (1u << bit)) ? 0 : -EINVAL);
	}
	check_ctx("%s", "");
}

static const uint32_t bad_types[] = {
	0030000, 0050000, 0070000, 0110000, 0130000, 0150000, 0160000,
	0170000,
};
static const uint32_t good_types[] = {
	QFT_S_IFSOCK, QFT_S_IFLNK, QFT_S_IFREG, QFT_S_IFBLK, QFT_S_IFDIR,
	QFT_S_IFCHR, QFT_S_IFIFO,
};

static void test_modes(void)
{
	for (size_t i = 0; i < NSPECS; i++) {
		const struct op_spec *sp = &specs[i];
		struct qft_msg m;

		if (sp->req & F_MODE) {
			for (size_t k = 0; k < NELEM(bad_types); k++) {
				check_ctx("%s mode type %#o", sp->name, bad_types[k]);
				fill(&m, sp, false);
				m.mode = bad_types[k] | 0644;
				CHECK_EQ(roundtrip(&m), -EINVAL);
			}
			for (size_t k = 0; k < NELEM(good_types); k++) {
				check_ctx("%s mode type %#o", sp->name, good_types[k]);
				fill(&m, sp, false);
				m.mode = good_types[k] | 07777;
				CHECK_EQ(roundtrip(&m), 0);
			}
			for (int bit = 16; bit < 32; bit++) {
				check_ctx("%s mode bit %d", sp->name, bit);
				fill(&m, sp, false);
				m.mode |= 1u << bit;
				CHECK_EQ(roundtrip(&m), -EINVAL);
			}
			check_ctx("%s mode without type", sp->name);
			fill(&m, sp, false);
			m.mode = 07777;
			CHECK_EQ(roundtrip(&m), 0);
		}
		if (!(sp->rep & F_ATTR))
			continue;
		/* Attributes must name a real file type, always. */
		for (size_t k = 0; k < NELEM(good_types); k++) {
			check_ctx("%s attr type %#o", sp->name, good_types[k]);
			fill(&m, sp, true);
			m.attr.mode = good_types[k] | 07777;
			CHECK_EQ(roundtrip(&m), 0);
		}
		for (size_t k = 0; k < NELEM(bad_types); k++) {
			check_ctx("%s attr type %#o", sp->name, bad_types[k]);
			fill(&m, sp, true);
			m.attr.mode = bad_types[k] | 0644;
			CHECK_EQ(roundtrip(&m), -EINVAL);
		}
		check_ctx("%s attr without type", sp->name);
		fill(&m, sp, true);
		m.attr.mode = 0644;
		CHECK_EQ(roundtrip(&m), -EINVAL);
		check_ctx("%s attr mode bit 16", sp->name);
		m.attr.mode = QFT_S_IFREG | 0644 | 0200000;
		CHECK_EQ(roundtrip(&m), -EINVAL);
		check_ctx("%s attr size", sp->name);
		fill(&m, sp, true);
		m.attr.size = (uint64_t)INT64_MAX + 1;
		CHECK_EQ(roundtrip(&m), -EINVAL);
		check_ctx("%s attr blocks", sp->name);
		fill(&m, sp, true);
		m.attr.blocks = UINT64_MAX;
		CHECK_EQ(roundtrip(&m), -EINVAL);
		for (uint32_t bit = 1; bit; bit <<= 1) {
			check_ctx("%s attr flag %#x", sp->name, bit);
			fill(&m, sp, true);
			m.attr.flags = bit;
			CHECK_EQ(roundtrip(&m),
				 (bit & QFT_ATTR_KNOWN) ? 0 : -EINVAL);
		}
	}
	check_ctx("%s", "");
}

static void test_times(void)
{
	static const uint32_t bad_nsec[] = { 1000000000u, 1000000001u,
					     0x80000000u, UINT32_MAX };
	const struct op_spec *sa = &specs[QFT_OP_SETATTR - 1];
	const struct op_spec *ls = &specs[QFT_OP_LSTAT - 1];
	struct qft_msg m;

	for (size_t k = 0; k < NELEM(bad_nsec); k++) {
		check_ctx("nsec %u", bad_nsec[k]);
		fill(&m, sa, false);
		m.atime.nsec = bad_nsec[k];
		CHECK_EQ(roundtrip(&m), -EINVAL);
		fill(&m, sa, false);
		m.mtime.nsec = bad_nsec[k];
		CHECK_EQ(roundtrip(&m), -EINVAL);
		fill(&m, ls, true);
		m.attr.atime.nsec = bad_nsec[k];
		CHECK_EQ(roundtrip(&m), -EINVAL);
		fill(&m, ls, true);
		m.attr.mtime.nsec = bad_nsec[k];
		CHECK_EQ(roundtrip(&m), -EINVAL);
		fill(&m, ls, true);
		m.attr.ctime.nsec = bad_nsec[k];
		CHECK_EQ(roundtrip(&m), -EINVAL);
	}
	/* Any second, before or after the epoch, with any valid nsec. */
	static const int64_t secs[] = { INT64_MIN, -1, 0, 1, INT64_MAX };
	for (size_t k = 0; k < NELEM(secs); k++) {
		check_ctx("sec %" PRId64, secs[k]);
		fill(&m, sa, false);
		m.atime = (struct qft_time){ secs[k], 0 };
		m.mtime = (struct qft_time){ secs[k], 999999999 };
		CHECK_EQ(roundtrip(&m), 0);
		fill(&m, ls, true);
		m.attr.atime = (struct qft_time){ secs[k], 999999999 };
		m.attr.ctime = (struct qft_time){ secs[k], 1 };
		CHECK_EQ(roundtrip(&m), 0);
	}
	check_ctx("%s", "");
}

/* Handles, offsets, sizes and lengths at and past their bounds. */
static void test_ranges(void)
{
	struct qft_msg m;

	for (size_t i = 0; i < NSPECS; i++) {
		const struct op_spec *sp = &specs[i];

		if (sp->req & F_HANDLE) {
			static const uint64_t bad[] = {
				QFT_MAX_HANDLES + 1, 1ull << 32, UINT64_MAX,
			};

			for (size_t k = 0; k < NELEM(bad); k++) {
				check_ctx("%s handle %#" PRIx64, sp->name, bad[k]);
				fill(&m, sp, false);
				m.handle = bad[k];
				CHECK_EQ(roundtrip(&m), -EINVAL);
			}
			check_ctx("%s handle 0", sp->name);
			fill(&m, sp, false);
			m.handle = 0;
			CHECK_EQ(roundtrip(&m), sp->handle_optional ? 0 : -EINVAL);
			check_ctx("%s handle 1 and max", sp->name);
			m.handle = 1;
			CHECK_EQ(roundtrip(&m), 0);
			m.handle = QFT_MAX_HANDLES;
			CHECK_EQ(roundtrip(&m), 0);
		}
		if (sp->req & F_OFFSET) {
			bool cookie = sp->op == QFT_OP_READDIR;

			check_ctx("%s offset", sp->name);
			fill(&m, sp, false);
			m.length = 0;
			m.data.len = 0;
			m.offset = INT64_MAX;
			CHECK_EQ(roundtrip(&m), 0);
			m.offset = (uint64_t)INT64_MAX + 1;
			CHECK_EQ(roundtrip(&m), cookie ? 0 : -EINVAL);
			m.offset = UINT64_MAX;
			CHECK_EQ(roundtrip(&m), cookie ? 0 : -EINVAL);
		}
		if (sp->req & F_LENGTH) {
			check_ctx("%s length", sp->name);
			fill(&m, sp, false);
			m.offset = 0;
			m.length = sp->max_length;
			CHECK_EQ(roundtrip(&m), 0);
			m.length = sp->max_length + 1;
			CHECK_EQ(roundtrip(&m), -EINVAL);
			m.length = UINT64_MAX;
			CHECK_EQ(roundtrip(&m), -EINVAL);
			m.length = 0;
			CHECK_EQ(roundtrip(&m), 0);
		}
	}

	check_ctx("READ length");
	fill(&m, &specs[QFT_OP_READ - 1], false);
	m.length = QFT_MAX_DATA + 1;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.length = QFT_MAX_DATA;
	CHECK_EQ(roundtrip(&m), 0);

	check_ctx("SETATTR size");
	fill(&m, &specs[QFT_OP_SETATTR - 1], false);
	m.size = (uint64_t)INT64_MAX + 1;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.size = 0;
	CHECK_EQ(roundtrip(&m), 0);

	/* WRITE: the last byte written must still be a valid off_t. */
	static const struct { uint64_t off; uint32_t len; int r; } wr[] = {
		{ INT64_MAX - 10, 10, 0 }, { INT64_MAX - 9, 10, -EINVAL },
		{ INT64_MAX, 0, 0 }, { INT64_MAX, 1, -EINVAL },
		{ INT64_MAX - 1000, 1000, 0 }, { INT64_MAX - 999, 1000, -EINVAL },
		{ 0, 1000, 0 },
	};
	for (size_t k = 0; k < NELEM(wr); k++) {
		check_ctx("WRITE offset %#" PRIx64 " len %u", wr[k].off, wr[k].len);
		fill(&m, &specs[QFT_OP_WRITE - 1], false);
		m.offset = wr[k].off;
		m.data = (struct qft_blob){ pattern, wr[k].len };
		CHECK_EQ(roundtrip(&m), wr[k].r);
	}
	/* A WRITE reply has no offset and no such check. */
	check_ctx("WRITE reply count");
	fill(&m, &specs[QFT_OP_WRITE - 1], true);
	m.count = UINT64_MAX;
	CHECK_EQ(roundtrip(&m), 0);

	static const struct { uint64_t off, len; int r; } fa[] = {
		{ 0, INT64_MAX, 0 }, { 1, INT64_MAX, -EINVAL },
		{ INT64_MAX, 0, 0 }, { INT64_MAX, 1, -EINVAL },
		{ 1ull << 62, 1ull << 62, -EINVAL },
		{ (1ull << 62) - 1, 1ull << 62, 0 },
	};
	for (size_t k = 0; k < NELEM(fa); k++) {
		check_ctx("FALLOCATE offset %#" PRIx64 " len %#" PRIx64,
			  fa[k].off, fa[k].len);
		fill(&m, &specs[QFT_OP_FALLOCATE - 1], false);
		m.offset = fa[k].off;
		m.length = fa[k].len;
		CHECK_EQ(roundtrip(&m), fa[k].r);
	}

	check_ctx("HELLO magic");
	fill(&m, &specs[QFT_OP_HELLO - 1], false);
	m.magic = QFT_MAGIC ^ 1;
	CHECK_EQ(roundtrip(&m), -EBADMSG);
	fill(&m, &specs[QFT_OP_HELLO - 1], true);
	m.magic = 0;
	CHECK_EQ(roundtrip(&m), -EBADMSG);
	check_ctx("%s", "");
}

/* Oversized encodes fail with -EMSGSIZE and leave the buffer as it was. */
static void test_encode_limits(void)
{
	struct qft_msg m, first;
	struct qbuf b;
	uint8_t *snap;
	size_t len;

	/* A frame already in the buffer must survive a failed encode. */
	qbuf_init(&b, 2 * FRAME_LIMIT);
	fill(&first, &specs[QFT_OP_LSTAT - 1], false);
	CHECK_EQ(qft_msg_encode(&b, &first), 0);
	len = b.len;
	snap = dup_exact(b.data, b.len);

	/* WRITE payload: handle 8 + offset 8 + blob length 4 + data. */
	fill(&m, &specs[QFT_OP_WRITE - 1], false);
	m.offset = 0;
	static const uint32_t over[] = {
		QFT_MAX_PAYLOAD - 20 + 1, QFT_MAX_PAYLOAD, QFT_MAX_PAYLOAD + 1,
	};
	for (size_t k = 0; k < NELEM(over); k++) {
		check_ctx("encode WRITE data %u", over[k]);
		m.data = (struct qft_blob){ pattern, over[k] };
		CHECK_EQ(qft_msg_encode(&b, &m), -EMSGSIZE);
		CHECK_EQ(b.len, len);
		CHECK(memcmp(b.data, snap, len) == 0);
	}

	/* Exactly QFT_MAX_PAYLOAD encodes (decode then rejects the data). */
	check_ctx("encode WRITE at the payload limit");
	m.data = (struct qft_blob){ pattern, QFT_MAX_PAYLOAD - 20 };
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	CHECK_EQ(b.len, len + QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	CHECK_EQ(qft_load32(b.data + len), QFT_MAX_PAYLOAD);
	CHECK(memcmp(b.data, snap, len) == 0);
	struct qft_msg got;
	CHECK_EQ(qft_msg_decode(&got, b.data + len, b.len - len), -EBADMSG);
	free(snap);
	qbuf_free(&b);

	/* A buffer whose own limit is smaller than the frame. */
	fill(&m, &specs[QFT_OP_LSTAT - 1], false);
	m.path = S(path4095);
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	size_t need = b.len;
	qbuf_free(&b);
	static const size_t limits[] = { 0, 15, 16, 17, 20, 100, 4095 + 20 };
	for (size_t k = 0; k < NELEM(limits); k++) {
		check_ctx("encode into limit %zu", limits[k]);
		qbuf_init(&b, limits[k]);
		CHECK(limits[k] < need);
		CHECK_EQ(qft_msg_encode(&b, &m), -EMSGSIZE);
		CHECK_EQ(b.len, 0);
		qbuf_free(&b);
	}
	check_ctx("encode into exact limit");
	qbuf_init(&b, need);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	CHECK_EQ(b.len, need);
	/* Full now: the next frame fails and leaves the first intact. */
	snap = dup_exact(b.data, b.len);
	CHECK_EQ(qft_msg_encode(&b, &first), -EMSGSIZE);
	CHECK_EQ(b.len, need);
	CHECK(memcmp(b.data, snap, need) == 0);
	free(snap);
	qbuf_free(&b);

	/* An error reply too: status is written before errmsg fails. */
	check_ctx("encode error reply into small limit");
	qft_msg_init_reply(&m, &first);
	m.status = QFT_EIO;
	m.errmsg = S("0123456789");
	qbuf_init(&b, QFT_HDR_SIZE + 4 + 4 + 5);
	CHECK_EQ(qft_msg_encode(&b, &m), -EMSGSIZE);
	CHECK_EQ(b.len, 0);
	qbuf_free(&b);
	check_ctx("%s", "");
}

static bool dirent_same(const struct qft_dirent *a, const struct qft_dirent *b)
{
	return a->ino == b->ino && a->off == b->off && a->type == b->type &&
	       str_same(a->name, b->name) && a->has_attr == b->has_attr &&
	       (!a->has_attr || attr_same(&a->attr, &b->attr));
}

/* Encodes d, decodes an exact copy; returns decode's result. */
static int dirent_rt(const struct qft_dirent *d, bool plus)
{
	struct qft_dirent got;
	struct qbuf b;
	struct qcur c;
	uint8_t *copy;
	int r;

	qbuf_init(&b, 4096);
	CHECK_EQ(qft_dirent_encode(&b, d), 0);
	copy = dup_exact(b.data, b.len);
	qcur_init(&c, copy, b.len);
	r = qft_dirent_decode(&c, &got, plus);
	if (r == 0) {
		CHECK(dirent_same(d, &got));
		CHECK_EQ(c.left, 0);
	} else {
		CHECK(c.p == copy && c.left == b.len);
	}
	free(copy);
	qbuf_free(&b);
	return r;
}

static void test_dirents(void)
{
	struct qft_dirent d = {
		.ino = 0x1122334455667788ull, .off = UINT64_MAX,
		.type = QFT_S_IFREG, .name = S("file \xc3\xbc"),
		.has_attr = true, .attr = sample_attr,
	};

	check_ctx("dirent with attr");
	CHECK_EQ(dirent_rt(&d, true), 0);
	CHECK_EQ(dirent_rt(&d, false), -EINVAL);   /* attrs not asked for */
	check_ctx("dirent without attr");
	d.has_attr = false;
	CHECK_EQ(dirent_rt(&d, true), 0);
	CHECK_EQ(dirent_rt(&d, false), 0);

	static const struct { const char *s; size_t len; int r; } names[] = {
		{ ".", 0, 0 }, { "..", 0, 0 }, { "...", 0, 0 }, { name255, 0, 0 },
		{ "a/b", 0, -EINVAL }, { "/", 0, -EINVAL }, { "", 0, -EINVAL },
		{ "a\0b", 3, -EINVAL }, { name256, 0, -EBADMSG },
	};
	for (size_t k = 0; k < NELEM(names); k++) {
		check_ctx("dirent name #%zu", k);
		d.name = SN(names[k].s, LEN(names[k]));
		d.has_attr = k % 2;
		CHECK_EQ(dirent_rt(&d, true), names[k].r);
	}
	d.name = S("x");
	d.has_attr = false;
	for (size_t k = 0; k < NELEM(good_types); k++) {
		check_ctx("dirent type %#o", good_types[k]);
		d.type = good_types[k];
		CHECK_EQ(dirent_rt(&d, false), 0);
	}
	check_ctx("dirent type unknown (0)");
	d.type = 0;
	CHECK_EQ(dirent_rt(&d, false), 0);
	for (size_t k = 0; k < NELEM(bad_types); k++) {
		check_ctx("dirent type %#o", bad_types[k]);
		d.type = bad_types[k];
		CHECK_EQ(dirent_rt(&d, false), -EINVAL);
	}
	check_ctx("dirent type with permission bits");
	d.type = QFT_S_IFREG | 0644;
	CHECK_EQ(dirent_rt(&d, false), -EINVAL);
	d.type = QFT_S_IFREG;

	check_ctx("dirent bad attr");
	d.has_attr = true;
	d.attr.mtime.nsec = 1000000000u;
	CHECK_EQ(dirent_rt(&d, true), -EINVAL);
	d.attr = sample_attr;
	d.attr.mode = 0644;
	CHECK_EQ(dirent_rt(&d, true), -EINVAL);
	d.attr = sample_attr;

	/* has_attr is a boolean byte. */
	check_ctx("dirent has_attr byte");
	{
		struct qbuf b;
		struct qft_dirent got;
		struct qcur c;

		d.has_attr = false;
		qbuf_init(&b, 4096);
		CHECK_EQ(qft_dirent_encode(&b, &d), 0);
		b.data[b.len - 1] = 2;
		qcur_init(&c, b.data, b.len);
		CHECK_EQ(qft_dirent_decode(&c, &got, true), -EINVAL);
		CHECK_EQ(c.left, b.len);
		qbuf_free(&b);
	}

	/* Every truncation of a dirent with attrs: cursor left in place. */
	check_ctx("dirent truncation");
	{
		struct qbuf b;

		d.has_attr = true;
		qbuf_init(&b, 4096);
		CHECK_EQ(qft_dirent_encode(&b, &d), 0);
		for (size_t n = 0; n < b.len; n++) {
			uint8_t *p = dup_exact(b.data, n);
			struct qft_dirent got;
			struct qcur c;

			check_ctx("dirent cut to %zu", n);
			qcur_init(&c, p, n);
			CHECK_EQ(qft_dirent_decode(&c, &got, true), -EBADMSG);
			CHECK(c.p == p && c.left == n);
			free(p);
		}
		/* Encode into a buffer too small: nothing left behind. */
		check_ctx("dirent encode limit");
		size_t need = b.len;
		for (size_t lim = 0; lim < need; lim += 7) {
			struct qbuf s;

			qbuf_init(&s, lim);
			CHECK_EQ(qft_dirent_encode(&s, &d), -EMSGSIZE);
			CHECK_EQ(s.len, 0);
			qbuf_free(&s);
		}
		qbuf_free(&b);
	}

	/* The READDIR reply payload built at start-up: a list in order. */
	check_ctx("dirent list");
	{
		static const char *const want[] = {
			".", "..", "file", "sub dir", "\xc3\xbc", "...",
		};
		struct qcur c;
		size_t k = 0;

		qcur_init(&c, readdir_data.data, readdir_data.len);
		while (c.left) {
			struct qft_dirent got;

			if (qft_dirent_decode(&c, &got, true) != 0)
				break;
			CHECK(k < NELEM(want) && strcmp(got.name.s, want[k]) == 0);
			CHECK_EQ(got.ino, 1000 + k);
			CHECK_EQ(got.has_attr, k % 2 == 0);
			k++;
		}
		CHECK_EQ(k, NELEM(want));
		CHECK_EQ(c.left, 0);
	}
	check_ctx("%s", "");
}

/*
 * Lazy handles: QFT_O_LAZY (0x200) on OPEN and CREATE, under HELLO
 * feature LAZY (0x20).  The numbers are the wire's (docs/protocol.md):
 * pinned here so that a renumbering shows up as a failure, not as old and
 * new programs quietly disagreeing.
 */
static void test_lazy_open(void)
{
	const struct op_spec *op = &specs[QFT_OP_OPEN - 1];
	struct qft_msg m;
	struct wr w;

	check_ctx("lazy: wire values");
	CHECK_EQ(QFT_O_LAZY, 0x200u);
	CHECK_EQ(QFT_FEAT_LAZY, 0x20u);
	CHECK(QFT_O_KNOWN & QFT_O_LAZY);
	CHECK(QFT_FEAT_KNOWN & QFT_FEAT_LAZY);

	check_ctx("golden CREATE request, lazy");
	qft_msg_init(&m, QFT_OP_CREATE, 4);
	m.handle = 7;
	m.path = S("d");
	m.name = S("n");
	m.opflags = QFT_O_WRONLY | QFT_O_TRUNC | QFT_O_LAZY;
	m.mode = 0644;
	whdr(&w, QFT_OP_CREATE, 0, 4);
	wput(&w, 7, 8);
	wstr(&w, "d");
	wstr(&w, "n");
	wput(&w, 0x211, 4);
	wput(&w, 0644, 4);
	wdone(&w);
	check_golden(&m, &w);
	CHECK_EQ(roundtrip(&m), 0);
	keep_frame(&m, "lazy");

	check_ctx("golden HELLO request asking for LAZY");
	qft_msg_init(&m, QFT_OP_HELLO, 1);
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = QFT_FEAT_PROGRESS | QFT_FEAT_LAZY;
	whdr(&w, QFT_OP_HELLO, 0, 1);
	wput(&w, QFT_MAGIC, 4);
	wput(&w, QFT_VERSION, 4);
	wput(&w, 0x28, 4);
	wdone(&w);
	check_golden(&m, &w);

	check_ctx("lazy OPEN requests");
	fill(&m, op, false);
	for (uint32_t acc = 0; acc < 3; acc++) {
		m.opflags = acc | QFT_O_LAZY;
		CHECK_EQ(roundtrip(&m), 0);
	}
	/* The access mode check still holds with the bit. */
	m.opflags = QFT_O_ACCMODE | QFT_O_LAZY;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	/* The next bit is still unknown. */
	m.opflags = QFT_O_RDWR | (QFT_O_LAZY << 1);
	CHECK_EQ(roundtrip(&m), -EINVAL);
	/* Open flags only: not a FLUSH or FSYNC flag, not in OPEN's reply. */
	check_ctx("lazy bit elsewhere");
	fill(&m, &specs[QFT_OP_FLUSH - 1], false);
	m.opflags = QFT_O_LAZY;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	fill(&m, &specs[QFT_OP_FSYNC - 1], false);
	m.opflags = QFT_O_LAZY;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	fill(&m, op, true);
	m.opflags = QFT_O_LAZY;
	m.data.len = 0;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	check_ctx("%s", "");
}

static void test_host_conversions(void)
{
	struct qft_attr a = {
		.ino = 123456789012ull, .mode = QFT_S_IFLNK | 0777, .nlink = 3,
		.uid = 1000, .gid = 100, .rdev = 0x0801, .size = 1ull << 40,
		.blocks = 1ull << 31, .blksize = 4096,
		.atime = { 1700000000, 1 }, .mtime = { -5, 999999999 },
		.ctime = { 0, 500 },
	}, back;
	struct qft_statfs s = {
		.bsize = 4096, .frsize = 512, .blocks = 1ull << 40,
		.bfree = 12345, .bavail = 1234, .files = 1u << 30,
		.ffree = 99, .favail = 98, .namemax = 255,
	}, sback;
	struct statvfs v;
	struct stat st;

	check_ctx("host conversions");
	memset(&back, 0xa5, sizeof(back));
	qft_attr_to_stat(&a, &st);
	CHECK(S_ISLNK(st.st_mode));
	CHECK_EQ(st.st_size, 1ull << 40);
	CHECK_EQ(st.st_mtim.tv_nsec, 999999999);
	qft_attr_from_stat(&back, &st);
	CHECK(attr_same(&a, &back));

	qft_statfs_to_host(&s, &v);
	CHECK_EQ(v.f_namemax, 255);
	qft_statfs_from_host(&sback, &v);
	CHECK(statfs_same(&s, &sback));
	check_ctx("%s", "");
}

/* splitmix64: a fixed, portable sequence for the garbage loop. */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t rnd_below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static const uint32_t interesting32[] = {
	0, 1, 2, 3, 4, 0x7f, 0x80, 0xff, 0x100, 255, 256, 4095, 4096,
	QFT_MAX_DATA, QFT_MAX_DATA + 1, QFT_MAX_PAYLOAD, QFT_MAX_PAYLOAD + 1,
	0x7fffffff, 0x80000000u, 0xfffffffeu, 0xffffffffu, 999999999,
	1000000000, QFT_MAX_HANDLES, QFT_MAX_HANDLES + 1,
};

/* Applies one random mutation to p[0..*n) within cap bytes. */
static void mutate(uint8_t *p, size_t *n, size_t cap)
{
	size_t at = rnd_below(*n);

	switch (rnd_below(7)) {
	case 0: /* flip a bit */
		if (*n)
			p[at] ^= (uint8_t)(1u << rnd_below(8));
		break;
	case 1: /* random byte */
		if (*n)
			p[at] = (uint8_t)rnd();
		break;
	case 2: /* interesting u32, often onto a length field */
		if (*n >= 4) {
			at = rnd_below(*n - 3);
			qft_store32(p + at, interesting32[rnd_below(
				sizeof(interesting32) / sizeof(interesting32[0]))]);
		}
		break;
	case 3: /* delete a run */
		if (*n) {
			size_t k = 1 + rnd_below(*n - at < 16 ? *n - at : 16);

			memmove(p + at, p + at + k, *n - at - k);
			*n -= k;
		}
		break;
	case 4: /* insert a run */
		if (*n < cap) {
			size_t k = 1 + rnd_below(cap - *n < 16 ? cap - *n : 16);

			memmove(p + at + k, p + at, *n - at);
			for (size_t i = 0; i < k; i++)
				p[at + i] = (uint8_t)(rnd_below(3) ? 0 : rnd());
			*n += k;
		}
		break;
	case 5: /* truncate */
		*n = at;
		break;
	case 6: /* 0x00 / 0xff / '/' / '.' byte: strings and flags */
		if (*n) {
			static const uint8_t v[] = { 0, 0xff, '/', '.', 0x80 };

			p[at] = v[rnd_below(sizeof(v))];
		}
		break;
	}
}

/*
 * Walks a SCAN blob record by record as a client would, re-encoding each;
 * returns the records, and checks that qft_scan_check agrees with the
 * walk on whether the blob is acceptable.
 */
static unsigned long scan_walk(const struct qft_blob *data)
{
	struct qft_scan_rec rec;
	unsigned long n = 0;
	uint64_t next;
	uint32_t base;
	struct qcur c;
	int r = 0, want;

	want = qft_scan_check(data);
	qcur_init(&c, data->p, data->len);
	if ((r = qft_scan_head_decode(&c, &base)) < 0) {
		CHECK_EQ(want, r);
		return 0;
	}
	next = base;
	while (c.left) {
		struct qcur save = c;
		struct qbuf e;

		if ((r = qft_scan_rec_decode(&c, &rec)) < 0) {
			CHECK(c.p == save.p && c.left == save.left);
			break;
		}
		qbuf_init(&e, 4096);
		CHECK_EQ(qft_scan_rec_encode(&e, &rec), 0);
		CHECK(e.len == (size_t)(c.p - save.p) &&
		      memcmp(e.data, save.p, e.len) == 0);
		qbuf_free(&e);
		if (rec.index >= next) {
			r = -EINVAL;
			break;
		}
		if (rec.kind == QFT_SCAN_REC_ENTRY &&
		    (rec.attr.mode & QFT_S_IFMT) == QFT_S_IFDIR)
			next++;
		n++;
	}
	CHECK_EQ(want, r < 0 ? r : (int)n);
	return n;
}

/* HELLO: version 2's reply fields, and other versions' HELLOs. */
static void test_hello_versions(void)
{
	struct qft_msg m, got;
	struct wr w;
	uint8_t *p;

	check_ctx("golden HELLO reply");
	qft_msg_init(&m, QFT_OP_HELLO, 5);
	m.flags = QFT_F_REPLY;
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = QFT_FEAT_LZ4;
	m.uid = 1000;
	m.gid = 0xfffffffeu;
	whdr(&w, QFT_OP_HELLO, QFT_F_REPLY, 5);
	wput(&w, 0, 4);
	wput(&w, QFT_MAGIC, 4);
	wput(&w, 2, 4);
	wput(&w, QFT_FEAT_LZ4, 4);
	wput(&w, 1000, 4);
	wput(&w, 0xfffffffeu, 4);
	wdone(&w);
	check_golden(&m, &w);
	CHECK_EQ(roundtrip(&m), 0);

	/* A version 2 reply without gid, or with more, is malformed. */
	check_ctx("HELLO reply without gid");
	p = dup_exact(w.b, w.n - 4);
	qft_store32(p, (uint32_t)(w.n - 4 - QFT_HDR_SIZE));
	CHECK_EQ(qft_msg_decode(&got, p, w.n - 4), -EBADMSG);
	free(p);

	/* Version 1's reply (no uid, gid) and a future one with more
	 * fields: decoded up to the version, so the mismatch is seen. */
	for (uint32_t v = 1; v <= 3; v += 2) {
		size_t extra = v == 1 ? 0 : 13;

		check_ctx("HELLO reply of version %u", v);
		whdr(&w, QFT_OP_HELLO, QFT_F_REPLY, 6);
		wput(&w, 0, 4);
		wput(&w, QFT_MAGIC, 4);
		wput(&w, v, 4);
		wput(&w, 0, 4);
		for (size_t i = 0; i < extra; i++)
			wput(&w, 0xee, 1);
		wdone(&w);
		p = dup_exact(w.b, w.n);
		CHECK_EQ(qft_msg_decode(&got, p, w.n), 0);
		CHECK_EQ(got.version, v);
		CHECK_EQ(got.uid, 0);
		free(p);

		check_ctx("HELLO request of version %u", v);
		whdr(&w, QFT_OP_HELLO, 0, 7);
		wput(&w, QFT_MAGIC, 4);
		wput(&w, v, 4);
		wput(&w, QFT_FEAT_LZ4, 4);
		for (size_t i = 0; i < extra; i++)
			wput(&w, 0xee, 1);
		wdone(&w);
		p = dup_exact(w.b, w.n);
		CHECK_EQ(qft_msg_decode(&got, p, w.n), 0);
		CHECK_EQ(got.version, v);
		free(p);

		/* The magic is still checked first; a frame cut before the
		 * version is still malformed. */
		check_ctx("HELLO request of version %u, bad magic", v);
		p = dup_exact(w.b, w.n);
		p[QFT_HDR_SIZE] ^= 1;
		CHECK_EQ(qft_msg_decode(&got, p, w.n), -EBADMSG);
		free(p);
		check_ctx("HELLO request of version %u, cut", v);
		p = dup_exact(w.b, QFT_HDR_SIZE + 6);
		qft_store32(p, 6);
		CHECK_EQ(qft_msg_decode(&got, p, QFT_HDR_SIZE + 6), -EBADMSG);
		free(p);
	}
	check_ctx("%s", "");
}

/* OPEN's first data and FLUSH's attributes. */
static void test_open_flush(void)
{
	const struct op_spec *op = &specs[QFT_OP_OPEN - 1];
	const struct op_spec *fl = &specs[QFT_OP_FLUSH - 1];
	struct qft_msg m;
	struct wr w;

	check_ctx("golden OPEN request");
	qft_msg_init(&m, QFT_OP_OPEN, 3);
	m.handle = 9;
	m.path = S("d/f");
	m.opflags = QFT_O_RDONLY;
	m.length = 65536;
	whdr(&w, QFT_OP_OPEN, 0, 3);
	wput(&w, 9, 8);
	wstr(&w, "d/f");
	wput(&w, 0, 4);
	wput(&w, 65536, 8);
	wdone(&w);
	check_golden(&m, &w);

	check_ctx("golden OPEN reply");
	qft_msg_init(&m, QFT_OP_OPEN, 3);
	m.flags = QFT_F_REPLY;
	m.attr = sample_attr;
	m.opflags = QFT_OPEN_DATA | QFT_OPEN_EOF;
	m.data = (struct qft_blob){ (const uint8_t *)"hi\n", 3 };
	whdr(&w, QFT_OP_OPEN, QFT_F_REPLY, 3);
	wput(&w, 0, 4);
	wattr(&w, &sample_attr);
	wput(&w, QFT_OPEN_DATA | QFT_OPEN_EOF, 4);
	wput(&w, 3, 4);
	memcpy(w.b + w.n, "hi\n", 3);
	w.n += 3;
	wdone(&w);
	check_golden(&m, &w);

	/* Old clients leave length 0: no data asked, none sent. */
	check_ctx("OPEN reply without data");
	fill(&m, op, true);
	m.opflags = 0;
	m.data = (struct qft_blob){ pattern, 0 };
	CHECK_EQ(roundtrip(&m), 0);
	m.data.len = 1;                 /* data without DATA */
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.data.len = 0;
	m.opflags = QFT_OPEN_EOF;       /* EOF without DATA */
	CHECK_EQ(roundtrip(&m), -EINVAL);
	check_ctx("OPEN reply DATA, empty file");
	m.opflags = QFT_OPEN_DATA | QFT_OPEN_EOF;
	CHECK_EQ(roundtrip(&m), 0);
	check_ctx("OPEN reply 1 MiB of data");
	m.opflags = QFT_OPEN_DATA;
	m.data = (struct qft_blob){ pattern, QFT_MAX_DATA };
	CHECK_EQ(roundtrip(&m), 0);
	m.data.len = QFT_MAX_DATA + 1;
	CHECK_EQ(roundtrip(&m), -EBADMSG);
	check_ctx("OPEN reply bad attr");
	fill(&m, op, true);
	m.attr.mode = 0644;
	CHECK_EQ(roundtrip(&m), -EINVAL);

	check_ctx("OPEN request length");
	fill(&m, op, false);
	m.length = 0;
	CHECK_EQ(roundtrip(&m), 0);
	m.length = QFT_MAX_DATA + 1;
	CHECK_EQ(roundtrip(&m), -EINVAL);

	check_ctx("golden FLUSH reply");
	qft_msg_init(&m, QFT_OP_FLUSH, 4);
	m.flags = QFT_F_REPLY;
	m.attr = sample_attr;
	whdr(&w, QFT_OP_FLUSH, QFT_F_REPLY, 4);
	wput(&w, 0, 4);
	wattr(&w, &sample_attr);
	wdone(&w);
	check_golden(&m, &w);
	check_ctx("FLUSH reply bad attr");
	fill(&m, fl, true);
	m.attr.atime.nsec = 1000000000u;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	/* A FLUSH error reply still carries no attributes. */
	check_ctx("FLUSH error reply");
	qft_msg_init(&m, QFT_OP_FLUSH, 4);
	m.flags = QFT_F_REPLY;
	m.status = QFT_ENOSPC;
	m.errmsg = S("disk full");
	CHECK_EQ(roundtrip(&m), 0);
	check_ctx("%s", "");
}

static int scan_rec_rt(const struct qft_scan_rec *rec)
{
	struct qft_scan_rec got;
	struct qbuf b;
	struct qcur c;
	uint8_t *p;
	int r;

	qbuf_init(&b, 4096);
	r = qft_scan_rec_encode(&b, rec);
	CHECK_EQ(r, 0);
	if (r < 0) {
		qbuf_free(&b);
		return ENCODE_FAILED;
	}
	p = dup_exact(b.data, b.len);
	qcur_init(&c, p, b.len);
	r = qft_scan_rec_decode(&c, &got);
	if (r == 0) {
		CHECK_EQ(c.left, 0);
		CHECK_EQ(got.kind, rec->kind);
		CHECK_EQ(got.index, rec->index);
		if (rec->kind == QFT_SCAN_REC_ENTRY) {
			CHECK(str_same(rec->name, got.name));
			CHECK(attr_same(&rec->attr, &got.attr));
			CHECK_EQ(got.attr.flags, rec->attr.flags);
		} else {
			CHECK_EQ(got.status, rec->status);
		}
	} else {
		CHECK(c.p == p && c.left == b.len);
	}
	free(p);
	qbuf_free(&b);
	return r;
}

/* SCAN records one by one: layout, limits, truncation. */
static void test_scan_records(void)
{
	struct qft_scan_rec ent = {
		.kind = QFT_SCAN_REC_ENTRY, .index = 0xfffffffeu,
		.name = S("file \xc3\xbc"), .attr = sample_attr,
	};
	struct qft_scan_rec end = {
		.kind = QFT_SCAN_REC_DIR_END, .index = 7, .status = QFT_EACCES,
	};
	struct qft_scan_rec watched = {
		.kind = QFT_SCAN_REC_WATCHED, .index = 9,
	};
	const struct qft_scan_rec *kinds[] = { &ent, &end, &watched };
	struct wr w;
	struct qbuf b;

	check_ctx("scan ENTRY");
	CHECK_EQ(scan_rec_rt(&ent), 0);
	check_ctx("scan DIR_END");
	CHECK_EQ(scan_rec_rt(&end), 0);
	end.status = 0xdeadbeefu;       /* unknown codes arrive as EIO */
	CHECK_EQ(scan_rec_rt(&end), 0);
	end.status = QFT_EACCES;
	check_ctx("scan WATCHED");
	CHECK_EQ(scan_rec_rt(&watched), 0);

	/* Byte layout. */
	check_ctx("scan golden");
	qbuf_init(&b, 4096);
	CHECK_EQ(qft_scan_head_encode(&b, 3), 0);
	CHECK_EQ(qft_scan_rec_encode(&b, &ent), 0);
	CHECK_EQ(qft_scan_rec_encode(&b, &end), 0);
	CHECK_EQ(qft_scan_rec_encode(&b, &watched), 0);
	w.n = 0;
	wput(&w, 3, 4);
	wput(&w, QFT_SCAN_REC_ENTRY, 1);
	wput(&w, 0xfffffffeu, 4);
	wstr(&w, "file \xc3\xbc");
	wattr(&w, &sample_attr);
	wput(&w, QFT_SCAN_REC_DIR_END, 1);
	wput(&w, 7, 4);
	wput(&w, QFT_EACCES, 4);
	wput(&w, QFT_SCAN_REC_WATCHED, 1);
	wput(&w, 9, 4);
	CHECK(b.len == w.n && memcmp(b.data, w.b, w.n) == 0);
	qbuf_free(&b);

	static const struct { const char *s; size_t len; int r; } names[] = {
		{ "...", 0, 0 }, { name255, 0, 0 }, { ".", 0, -EINVAL },
		{ "..", 0, -EINVAL }, { "a/b", 0, -EINVAL }, { "/", 0, -EINVAL },
		{ "", 0, -EINVAL }, { "a\0b", 3, -EINVAL },
		{ name256, 0, -EBADMSG },
	};
	for (size_t k = 0; k < NELEM(names); k++) {
		struct qft_scan_rec r = ent;

		check_ctx("scan name #%zu", k);
		r.name = SN(names[k].s, names[k].len ? names[k].len :
			    strlen(names[k].s));
		CHECK_EQ(scan_rec_rt(&r), names[k].r);
	}
	check_ctx("scan ENTRY bad attr");
	{
		struct qft_scan_rec r = ent;

		r.attr.mode = 0755;
		CHECK_EQ(scan_rec_rt(&r), -EINVAL);
		r.attr = sample_attr;
		r.attr.flags = 0x80;
		CHECK_EQ(scan_rec_rt(&r), -EINVAL);
	}
	check_ctx("scan unknown kinds");
	{
		struct qft_scan_rec r = end;
		struct qbuf e;

		for (unsigned k = 0; k < 256; k++) {
			if (k == QFT_SCAN_REC_ENTRY ||
			    k == QFT_SCAN_REC_DIR_END ||
			    k == QFT_SCAN_REC_WATCHED)
				continue;
			r.kind = (uint8_t)k;
			qbuf_init(&e, 64);
			CHECK_EQ(qft_scan_rec_encode(&e, &r), -EINVAL);
			CHECK_EQ(e.len, 0);
			qbuf_free(&e);
		}
	}

	/* Every cut of every kind fails and consumes nothing; a name
	 * length far beyond the data is short input, not a read past it. */
	for (size_t k = 0; k < NELEM(kinds); k++) {
		struct qbuf e;

		qbuf_init(&e, 4096);
		CHECK_EQ(qft_scan_rec_encode(&e, kinds[k]), 0);
		for (size_t n = 0; n < e.len; n++) {
			uint8_t *p = dup_exact(e.data, n);
			struct qft_scan_rec got;
			struct qcur c;

			check_ctx("scan kind %u cut to %zu of %zu",
				  kinds[k]->kind, n, e.len);
			qcur_init(&c, p, n);
			CHECK_EQ(qft_scan_rec_decode(&c, &got), -EBADMSG);
			CHECK(c.p == p && c.left == n);
			free(p);
		}
		check_ctx("scan kind %u encode limit", kinds[k]->kind);
		for (size_t lim = 0; lim < e.len; lim++) {
			struct qbuf s;

			qbuf_init(&s, lim);
			CHECK_EQ(qft_scan_rec_encode(&s, kinds[k]), -EMSGSIZE);
			CHECK_EQ(s.len, 0);
			qbuf_free(&s);
		}
		qbuf_free(&e);
	}
	check_ctx("scan ENTRY name length oversized");
	{
		static const uint32_t lens[] = { 256, 0x7fffffffu, UINT32_MAX };
		struct qbuf e;

		qbuf_init(&e, 4096);
		CHECK_EQ(qft_scan_rec_encode(&e, &ent), 0);
		for (size_t k = 0; k < NELEM(lens); k++) {
			uint8_t *p = dup_exact(e.data, e.len);
			struct qft_scan_rec got;
			struct qcur c;

			qft_store32(p + 5, lens[k]);
			qcur_init(&c, p, e.len);
			CHECK_EQ(qft_scan_rec_decode(&c, &got), -EBADMSG);
			CHECK(c.p == p && c.left == e.len);
			free(p);
		}
		qbuf_free(&e);
	}
	check_ctx("scan head");
	{
		uint8_t h[4] = { 0, 0, 0, 0 };
		uint32_t base = 0;
		struct qcur c;

		qcur_init(&c, h, 4);
		CHECK_EQ(qft_scan_head_decode(&c, &base), -EINVAL);
		CHECK_EQ(c.left, 4);
		for (size_t n = 0; n < 4; n++) {
			qcur_init(&c, h, n);
			CHECK_EQ(qft_scan_head_decode(&c, &base), -EBADMSG);
			CHECK_EQ(c.left, n);
		}
		h[3] = 1;
		qcur_init(&c, h, 4);
		CHECK_EQ(qft_scan_head_decode(&c, &base), 0);
		CHECK_EQ(base, 1);
	}
	check_ctx("%s", "");
}

/* Checks a blob built from (kind, index, name, mode, status) rows. */
struct scan_row {
	uint8_t kind;
	uint32_t index;
	const char *name;
	uint32_t mode;
};

static int scan_check_rows(uint32_t base, const struct scan_row *rows,
			   size_t n, const void *tail, size_t tail_len)
{
	struct qft_blob blob;
	struct qbuf b;
	uint8_t *p;
	int r;

	qbuf_init(&b, QFT_MAX_DATA);
	CHECK_EQ(qbuf_put_u32(&b, base), 0);
	for (size_t i = 0; i < n; i++)
		put_scan(&b, rows[i].kind, rows[i].index, rows[i].name,
			 rows[i].mode, 0);
	if (tail_len)
		CHECK_EQ(qbuf_put_bytes(&b, tail, tail_len), 0);
	p = dup_exact(b.data, b.len);
	blob = (struct qft_blob){ p, (uint32_t)b.len };
	r = qft_scan_check(&blob);
	scan_walk(&blob);   /* a record-by-record walk must agree */
	free(p);
	qbuf_free(&b);
	return r;
}

/* qft_scan_check: what a client may rely on once it returned >= 0. */
static void test_scan_check(void)
{
	enum { E = QFT_SCAN_REC_ENTRY, D = QFT_SCAN_REC_DIR_END };
	const uint32_t dir = QFT_S_IFDIR | 0755, reg = QFT_S_IFREG | 0644;
	const uint32_t lnk = QFT_S_IFLNK | 0777;
	struct qft_blob blob;

	check_ctx("scan check: sample");
	blob = (struct qft_blob){ scan_data.data, (uint32_t)scan_data.len };
	CHECK_EQ(qft_scan_check(&blob), 8);

	check_ctx("scan check: head only");
	CHECK_EQ(scan_check_rows(1, NULL, 0, NULL, 0), 0);
	check_ctx("scan check: no head");
	blob = (struct qft_blob){ scan_data.data, 0 };
	CHECK_EQ(qft_scan_check(&blob), -EBADMSG);
	blob.len = 3;
	CHECK_EQ(qft_scan_check(&blob), -EBADMSG);
	check_ctx("scan check: base 0");
	CHECK_EQ(scan_check_rows(0, NULL, 0, NULL, 0), -EINVAL);

	/* Indexes: below base, or announced earlier in the blob. */
	{
		const struct scan_row ok[] = {
			{ E, 4, "a", dir },     /* announces 5 */
			{ E, 5, "b", dir },     /* announces 6 */
			{ D, 6 }, { D, 5 }, { E, 0, "c", reg }, { D, 0 },
		};
		const struct scan_row parent_ahead[] = {
			{ E, 4, "a", dir }, { E, 6, "b", reg },
		};
		const struct scan_row end_ahead[] = {
			{ E, 4, "a", reg }, { D, 5 },
		};
		const struct scan_row at_base[] = { { E, 5, "a", reg } };
		const struct scan_row symlink_no_index[] = {
			{ E, 0, "l", lnk }, { E, 5, "x", reg },
		};
		const struct scan_row huge[] = { { D, UINT32_MAX } };

		check_ctx("scan check: good indexes");
		CHECK_EQ(scan_check_rows(5, ok, NELEM(ok), NULL, 0), 6);
		check_ctx("scan check: parent not announced");
		CHECK_EQ(scan_check_rows(5, parent_ahead, NELEM(parent_ahead),
					 NULL, 0), -EINVAL);
		check_ctx("scan check: DIR_END not announced");
		CHECK_EQ(scan_check_rows(5, end_ahead, NELEM(end_ahead),
					 NULL, 0), -EINVAL);
		check_ctx("scan check: index == base");
		CHECK_EQ(scan_check_rows(5, at_base, NELEM(at_base), NULL, 0),
			 -EINVAL);
		check_ctx("scan check: a symlink announces nothing");
		CHECK_EQ(scan_check_rows(5, symlink_no_index,
					 NELEM(symlink_no_index), NULL, 0),
			 -EINVAL);
		check_ctx("scan check: index UINT32_MAX");
		CHECK_EQ(scan_check_rows(5, huge, NELEM(huge), NULL, 0),
			 -EINVAL);
		CHECK_EQ(scan_check_rows(UINT32_MAX, huge, 0, NULL, 0), 0);
	}
	/* Trailing garbage: a partial record, an unknown kind. */
	{
		const struct scan_row one[] = { { E, 0, "a", reg } };
		static const uint8_t partial[] = { QFT_SCAN_REC_DIR_END, 0, 0 };
		static const uint8_t unknown[] = { 9, 0, 0, 0, 0, 0, 0, 0, 0 };
		static const uint8_t zero[] = { 0 };

		check_ctx("scan check: partial record");
		CHECK_EQ(scan_check_rows(1, one, 1, partial, sizeof(partial)),
			 -EBADMSG);
		check_ctx("scan check: unknown kind");
		CHECK_EQ(scan_check_rows(1, one, 1, unknown, sizeof(unknown)),
			 -EBADMSG);
		check_ctx("scan check: one zero byte");
		CHECK_EQ(scan_check_rows(1, one, 1, zero, sizeof(zero)),
			 -EBADMSG);
	}
	/* Names, rebuilt by hand: the encoder would write them too. */
	{
		static const char *const bad[] = { "a/b", ".", "..", "" };

		for (size_t k = 0; k < NELEM(bad); k++) {
			const struct scan_row r[] = { { E, 0, bad[k], reg } };

			check_ctx("scan check: name \"%s\"", bad[k]);
			CHECK_EQ(scan_check_rows(1, r, 1, NULL, 0), -EINVAL);
		}
	}
	check_ctx("scan check: name length oversized");
	{
		struct qbuf b;

		qbuf_init(&b, 4096);
		CHECK_EQ(qbuf_put_u32(&b, 1), 0);
		put_scan(&b, E, 0, "abc", reg, 0);
		qbuf_set_u32(&b, 4 + 5, 0xfffffff0u);
		blob = (struct qft_blob){ b.data, (uint32_t)b.len };
		CHECK_EQ(qft_scan_check(&blob), -EBADMSG);
		qbuf_set_u32(&b, 4 + 5, 4);  /* swallows the NUL: no end */
		CHECK_EQ(qft_scan_check(&blob), -EBADMSG);
		qbuf_free(&b);
	}
	/* Every cut of the sample is refused or a shorter valid blob,
	 * never a read past the end (ASan watches the exact copies). */
	check_ctx("scan check: cuts of the sample");
	for (size_t n = 0; n < scan_data.len; n++) {
		uint8_t *p = dup_exact(scan_data.data, n);
		int r;

		blob = (struct qft_blob){ p, (uint32_t)n };
		r = qft_scan_check(&blob);
		CHECK(r == -EBADMSG || r >= 0);
		free(p);
	}
	check_ctx("%s", "");
}

struct fuzz_stats {
	unsigned long accepted, ebadmsg, einval, enosys, dirents;
	unsigned long other_hello, scan_recs;
};

/* Decodes an exact copy; anything accepted must re-encode to the input. */
static void fuzz_one(const uint8_t *buf, size_t n, struct fuzz_stats *st)
{
	uint8_t *p = dup_exact(buf, n);
	struct qft_msg m;
	int r;

	r = qft_msg_decode(&m, p, n);
	switch (r) {
	case 0: st->accepted++; break;
	case -EBADMSG: st->ebadmsg++; break;
	case -EINVAL: st->einval++; break;
	case -ENOSYS: st->enosys++; break;
	default:
		CHECK_EQ(r, 0);   /* not a documented result */
		break;
	}
	/* A HELLO of another version is decoded only up to its version
	 * (the rest is ignored), so it cannot re-encode to its bytes. */
	if (r == 0 && m.op == QFT_OP_HELLO && m.version != QFT_VERSION)
		st->other_hello++;
	else if (r == 0) {
		struct qbuf b;

		qbuf_init(&b, FRAME_LIMIT);
		CHECK_EQ(qft_msg_encode(&b, &m), 0);
		CHECK(b.len == n && memcmp(b.data, p, n) == 0);
		qbuf_free(&b);

		/* A SCAN reply: the validator's verdict must agree with a
		 * walk of the records, and what it accepts re-encodes. */
		if (m.op == QFT_OP_SCAN && (m.flags & QFT_F_REPLY) &&
		    m.status == QFT_OK)
			st->scan_recs += scan_walk(&m.data);

		/* A READDIR reply: walk its entries the way the client does. */
		if (m.op == QFT_OP_READDIR && (m.flags & QFT_F_REPLY) &&
		    m.status == QFT_OK) {
			struct qcur c;

			qcur_init(&c, m.data.p, m.data.len);
			while (c.left) {
				struct qcur save = c;
				struct qft_dirent d;
				struct qbuf e;

				if (qft_dirent_decode(&c, &d, true) != 0) {
					CHECK(c.p == save.p && c.left == save.left);
					break;
				}
				st->dirents++;
				qbuf_init(&e, 4096);
				CHECK_EQ(qft_dirent_encode(&e, &d), 0);
				CHECK(e.len == (size_t)(c.p - save.p) &&
				      memcmp(e.data, save.p, e.len) == 0);
				qbuf_free(&e);
			}
		}
	}
	free(p);
}

/* ---- Change notification: NOTIFY and UNWATCH ---------------------------- */

/* Encodes *m and decodes an exact copy into *got (whose strings then
 * point into *copy, freed by the caller). */
static int notify_roundtrip(const struct qft_msg *m, struct qft_msg *got,
			    uint8_t **copy)
{
	struct qbuf b;
	int r;

	qbuf_init(&b, FRAME_LIMIT);
	r = qft_msg_encode(&b, m);
	CHECK_EQ(r, 0);
	*copy = dup_exact(b.data, b.len);
	r = r < 0 ? ENCODE_FAILED : qft_msg_decode(got, *copy, b.len);
	qbuf_free(&b);
	return r;
}

/* Builds a NOTIFY payload by hand (name with an explicit length, so that
 * lengths that lie can be written) behind a header with `flags`/`id`,
 * decodes an exact copy and returns the result. */
static int notify_raw(uint16_t op, uint16_t flags, uint64_t id,
		      uint64_t ino, uint32_t kind, const char *name,
		      uint32_t claim, size_t have, bool nul)
{
	uint8_t buf[QFT_HDR_SIZE + 16 + 512 + 1];
	size_t n = QFT_HDR_SIZE;
	uint8_t *p;
	int r;

	qft_store64(buf + n, ino);
	qft_store32(buf + n + 8, kind);
	qft_store32(buf + n + 12, claim);
	n += 16;
	memcpy(buf + n, name, have);
	n += have;
	if (nul)
		buf[n++] = 0;
	qft_store32(buf, (uint32_t)(n - QFT_HDR_SIZE));
	qft_store16(buf + 4, op);
	qft_store16(buf + 6, flags);
	qft_store64(buf + 8, id);
	p = dup_exact(buf, n);
	{
		struct qft_msg m;

		r = qft_msg_decode(&m, p, n);
	}
	free(p);
	return r;
}

#define NOTIFY_OK(ino, kind, name) \
	notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, ino, kind, name, \
		   (uint32_t)strlen(name), strlen(name), true)

static void test_notify_codec(void)
{
	static const struct {
		uint64_t ino;
		uint32_t kind;
		const char *name;
	} good[] = {
		{ 1, QFT_NOTIFY_CHANGED, "" },
		{ 0xfffffffffffffffeull, QFT_NOTIFY_CHANGED, "file name.txt" },
		{ 42, QFT_NOTIFY_CHANGED, name255 },
		{ 7, QFT_NOTIFY_GONE, "" },
		{ 0, QFT_NOTIFY_ALL, "" },
	};
	struct qft_msg m, got;
	uint8_t *copy;

	for (size_t i = 0; i < NELEM(good); i++) {
		check_ctx("NOTIFY #%zu", i);
		qft_msg_init_notify(&m, good[i].ino, good[i].kind,
				    good[i].name,
				    (uint32_t)strlen(good[i].name));
		CHECK_EQ(m.op, QFT_OP_NOTIFY);
		CHECK_EQ(m.flags, QFT_F_NOTIFY);
		CHECK_EQ(m.id, 0);
		CHECK_EQ(notify_roundtrip(&m, &got, &copy), 0);
		CHECK_EQ(got.op, QFT_OP_NOTIFY);
		CHECK_EQ(got.flags, QFT_F_NOTIFY);
		CHECK_EQ(got.id, 0);
		CHECK_EQ(got.ino, good[i].ino);
		CHECK_EQ(got.kind, good[i].kind);
		CHECK(str_same(m.name, got.name));
		free(copy);
		/* For the truncation test and the garbage loop. */
		keep_frame(&m, "notify");
	}
	check_ctx("NOTIFY NULL name");
	qft_msg_init_notify(&m, 9, QFT_NOTIFY_GONE, NULL, 5);
	CHECK_EQ(m.name.len, 0);
	CHECK_EQ(notify_roundtrip(&m, &got, &copy), 0);
	CHECK_EQ(got.name.len, 0);
	free(copy);

	/* The wire layout, byte for byte. */
	check_ctx("NOTIFY golden");
	{
		static const uint8_t want[] = {
			0, 0, 0, 19, 0, 30, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
			1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1,
			0, 0, 0, 2, 'a', 'b', 0,
		};
		struct qbuf b;

		qft_msg_init_notify(&m, 0x0102030405060708ull,
				    QFT_NOTIFY_CHANGED, "ab", 2);
		qbuf_init(&b, FRAME_LIMIT);
		CHECK_EQ(qft_msg_encode(&b, &m), 0);
		CHECK(b.len == sizeof(want) &&
		      memcmp(b.data, want, sizeof(want)) == 0);
		qbuf_free(&b);
	}

	/* Well framed, but not what a kind allows: -EINVAL. */
	check_ctx("NOTIFY invalid");
	CHECK_EQ(NOTIFY_OK(1, QFT_NOTIFY_CHANGED, "ok"), 0);
	CHECK_EQ(NOTIFY_OK(1, 0, ""), -EINVAL);
	CHECK_EQ(NOTIFY_OK(1, 4, ""), -EINVAL);
	CHECK_EQ(NOTIFY_OK(1, 0xffffffffu, ""), -EINVAL);
	CHECK_EQ(NOTIFY_OK(0, QFT_NOTIFY_CHANGED, ""), -EINVAL);
	CHECK_EQ(NOTIFY_OK(0, QFT_NOTIFY_GONE, ""), -EINVAL);
	CHECK_EQ(NOTIFY_OK(5, QFT_NOTIFY_GONE, "x"), -EINVAL);
	CHECK_EQ(NOTIFY_OK(5, QFT_NOTIFY_ALL, ""), -EINVAL);
	CHECK_EQ(NOTIFY_OK(0, QFT_NOTIFY_ALL, "x"), -EINVAL);
	for (size_t i = 0; i < NELEM(bad_names); i++) {
		size_t len = LEN(bad_names[i]);

		if (len == 0)
			continue;       /* empty is allowed here */
		check_ctx("NOTIFY bad name #%zu", i);
		CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
				    QFT_NOTIFY_CHANGED, bad_names[i].s,
				    (uint32_t)len, len, true), -EINVAL);
	}

	/* Framing: truncated, oversized, unterminated: -EBADMSG. */
	check_ctx("NOTIFY framing");
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "abc", 3, 3, false), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "abc", 4, 3, true), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "abc", 2, 3, true), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "abc", 0xffffffffu, 3, true),
		 -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "abc", QFT_MAX_PAYLOAD + 1, 3,
			    true), -EBADMSG);
	{
		static char big[512];

		/* A name over NAME_MAX that is framed correctly. */
		memset(big, 'n', sizeof(big));
		CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
				    QFT_NOTIFY_CHANGED, big, 256, 256, true),
			 -EINVAL);
		CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 0, 1,
				    QFT_NOTIFY_CHANGED, big, 512, 512, true),
			 -EINVAL);
	}

	/* The header: NOTIFY and its flag go together, alone, with id 0. */
	check_ctx("NOTIFY header");
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, 0, 0, 1, QFT_NOTIFY_CHANGED, "",
			    0, 0, true), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_REPLY, 0, 1,
			    QFT_NOTIFY_CHANGED, "", 0, 0, true), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_REPLY | QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "", 0, 0, true), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_NOTIFY, QFT_F_NOTIFY, 1, 1,
			    QFT_NOTIFY_CHANGED, "", 0, 0, true), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_LSTAT, QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "", 0, 0, true), -EBADMSG);
	CHECK_EQ(notify_raw(QFT_OP_UNWATCH, QFT_F_NOTIFY, 0, 1,
			    QFT_NOTIFY_CHANGED, "", 0, 0, true), -EBADMSG);
	{
		struct qft_hdr h;
		uint8_t raw[QFT_HDR_SIZE] = { 0 };

		qft_store16(raw + 4, QFT_OP_NOTIFY);
		qft_store16(raw + 6, QFT_F_NOTIFY);
		CHECK_EQ(qft_hdr_decode(&h, raw, sizeof(raw)), 0);
		CHECK_EQ(h.flags, QFT_F_NOTIFY);
		qft_store16(raw + 6, QFT_F_NOTIFY | 0x0008);
		CHECK_EQ(qft_hdr_decode(&h, raw, sizeof(raw)), -EBADMSG);
		qft_store16(raw + 6, QFT_F_NOTIFY);
		qft_store32(raw, QFT_MAX_PAYLOAD + 1);
		CHECK_EQ(qft_hdr_decode(&h, raw, sizeof(raw)), -EBADMSG);
	}
	check_ctx("%s", "");
}

/* A caller with `n` groups, all ids distinct and non-trivial. */
static void set_cred(struct qft_msg *m, uint32_t n)
{
	m->flags |= QFT_F_CRED;
	m->cred.uid = 0xfffffffeu;   /* the largest valid id */
	m->cred.gid = 1000 + n;
	m->cred.ngroups = n;
	for (uint32_t i = 0; i < n && i < QFT_MAX_GROUPS; i++)
		m->cred.groups[i] = 0x10000u * i + 7;
}

/* Decodes the frame in `w` from an exact heap copy, which lives (as
 * *m's strings point into it) until the next call; NULL frees it. */
static int decode_wr(const struct wr *w, struct qft_msg *m)
{
	static uint8_t *copy;

	free(copy);
	copy = NULL;
	if (!w)
		return 0;
	copy = dup_exact(w->b, w->n);
	return qft_msg_decode(m, copy, w->n);
}

/*
 * QFT_F_CRED (QFT_FEAT_CRED): the caller's fsuid, fsgid and groups before
 * a request's fields.  Every request carries it with 0, 1 and the most
 * groups; the bytes are pinned; a count over the limit is malformed, an
 * id of (uint32_t)-1 invalid, and the flag anywhere but on a request
 * (replies, HELLO, RESUME, NOTIFY, PROGRESS) malformed.  Frames are kept
 * for the truncation and garbage tests, so every cut inside the
 * credential is checked too.
 */
static void test_cred_codec(void)
{
	static const uint32_t counts[] = { 0, 1, 2, QFT_MAX_GROUPS };
	struct qft_msg m, got;
	struct qbuf b;
	struct wr w;
	size_t len;

	for (size_t i = 0; i < NSPECS; i++) {
		const struct op_spec *sp = &specs[i];

		if (sp->op == QFT_OP_HELLO)
			continue;
		for (size_t k = 0; k < NELEM(counts); k++) {
			check_ctx("%s with %u groups", sp->name, counts[k]);
			fill(&m, sp, false);
			set_cred(&m, counts[k]);
			CHECK_EQ(roundtrip(&m), 0);
			if (k == 2 && (sp->op == QFT_OP_LSTAT ||
				       sp->op == QFT_OP_CREATE ||
				       sp->op == QFT_OP_CLOSE))
				keep_frame(&m, "with cred");
		}
	}

	/* The most groups and the largest WRITE still fit a frame. */
	check_ctx("1 MiB WRITE with cred");
	fill(&m, &specs[QFT_OP_WRITE - 1], false);
	m.offset = 0;
	m.data = (struct qft_blob){ pattern, QFT_MAX_DATA };
	set_cred(&m, QFT_MAX_GROUPS);
	CHECK_EQ(roundtrip(&m), 0);

	check_ctx("golden LSTAT with cred");
	qft_msg_init(&m, QFT_OP_LSTAT, 21);
	m.path = S("a");
	m.flags = QFT_F_CRED;
	m.cred.uid = 1000;
	m.cred.gid = 100;
	m.cred.ngroups = 2;
	m.cred.groups[0] = 4;
	m.cred.groups[1] = 27;
	whdr(&w, QFT_OP_LSTAT, QFT_F_CRED, 21);
	wput(&w, 1000, 4);
	wput(&w, 100, 4);
	wput(&w, 2, 4);
	wput(&w, 4, 4);
	wput(&w, 27, 4);
	wstr(&w, "a");
	wdone(&w);
	check_golden(&m, &w);
	CHECK_EQ(decode_wr(&w, &got), 0);
	CHECK_EQ(got.flags, QFT_F_CRED);
	CHECK(got.cred.uid == 1000 && got.cred.gid == 100 &&
	      got.cred.ngroups == 2 && got.cred.groups[0] == 4 &&
	      got.cred.groups[1] == 27);
	CHECK(str_same(got.path, S("a")));

	/* Without the flag nothing is read or written for it. */
	check_ctx("no cred");
	m.flags = 0;
	whdr(&w, QFT_OP_LSTAT, 0, 21);
	wstr(&w, "a");
	wdone(&w);
	check_golden(&m, &w);

	/* More groups than the limit: a length out of range, whatever
	 * follows (and nothing is read for them). */
	static const uint32_t over[] = { QFT_MAX_GROUPS + 1, 0x10000u,
					 UINT32_MAX };
	for (size_t k = 0; k < NELEM(over); k++) {
		check_ctx("%u groups on the wire", over[k]);
		whdr(&w, QFT_OP_LSTAT, QFT_F_CRED, 22);
		wput(&w, 1, 4);
		wput(&w, 1, 4);
		wput(&w, over[k], 4);
		for (int g = 0; g < 70; g++)
			wput(&w, 5, 4);
		wstr(&w, "");
		wdone(&w);
		CHECK_EQ(decode_wr(&w, &got), -EBADMSG);
	}
	/* Exactly the limit on the wire decodes. */
	check_ctx("%u groups on the wire", QFT_MAX_GROUPS);
	whdr(&w, QFT_OP_LSTAT, QFT_F_CRED, 22);
	wput(&w, 1, 4);
	wput(&w, 1, 4);
	wput(&w, QFT_MAX_GROUPS, 4);
	for (uint32_t g = 0; g < QFT_MAX_GROUPS; g++)
		wput(&w, g, 4);
	wstr(&w, "");
	wdone(&w);
	CHECK_EQ(decode_wr(&w, &got), 0);
	CHECK_EQ(got.cred.groups[QFT_MAX_GROUPS - 1], QFT_MAX_GROUPS - 1);
	/* The count says more groups than the frame holds. */
	check_ctx("groups cut short");
	whdr(&w, QFT_OP_PING, QFT_F_CRED, 23);
	wput(&w, 1, 4);
	wput(&w, 1, 4);
	wput(&w, 3, 4);
	wput(&w, 9, 4);
	wput(&w, 9, 4);
	wdone(&w);
	CHECK_EQ(decode_wr(&w, &got), -EBADMSG);

	/* (uint32_t)-1 is no id: invalid in every place, both ways. */
	for (int where = 0; where < 3; where++) {
		check_ctx("id -1 as %s", where == 0 ? "uid" :
			  where == 1 ? "gid" : "a group");
		fill(&m, &specs[QFT_OP_MKDIR - 1], false);
		set_cred(&m, 3);
		if (where == 0)
			m.cred.uid = UINT32_MAX;
		else if (where == 1)
			m.cred.gid = UINT32_MAX;
		else
			m.cred.groups[2] = UINT32_MAX;
		qbuf_init(&b, FRAME_LIMIT);
		CHECK_EQ(qbuf_put_u8(&b, 0xaa), 0);
		CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
		CHECK_EQ(b.len, 1);
		qbuf_free(&b);
		whdr(&w, QFT_OP_UNLINK, QFT_F_CRED, 24);
		wput(&w, where == 0 ? UINT32_MAX : 0, 4);
		wput(&w, where == 1 ? UINT32_MAX : 0, 4);
		wput(&w, 1, 4);
		wput(&w, where == 2 ? UINT32_MAX : 0, 4);
		wstr(&w, "");
		wstr(&w, "n");
		wdone(&w);
		CHECK_EQ(decode_wr(&w, &got), -EINVAL);
	}
	/* A count over the limit is refused by the encoder too. */
	check_ctx("encode %u groups", QFT_MAX_GROUPS + 1);
	fill(&m, &specs[QFT_OP_LSTAT - 1], false);
	set_cred(&m, QFT_MAX_GROUPS);
	m.cred.ngroups = QFT_MAX_GROUPS + 1;
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
	CHECK_EQ(b.len, 0);

	/* Only requests carry one, and not the first frame. */
	check_ctx("cred on a reply");
	fill(&m, &specs[QFT_OP_LSTAT - 1], true);
	set_cred(&m, 1);
	CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
	CHECK_EQ(b.len, 0);
	whdr(&w, QFT_OP_PING, QFT_F_REPLY | QFT_F_CRED, 25);
	wput(&w, 1, 4);
	wput(&w, 1, 4);
	wput(&w, 0, 4);
	wput(&w, 0, 4);
	wdone(&w);
	CHECK_EQ(decode_wr(&w, &got), -EBADMSG);
	static const uint16_t first[] = { QFT_OP_HELLO, QFT_OP_RESUME };
	for (size_t k = 0; k < NELEM(first); k++) {
		check_ctx("cred on %s", qft_op_name(first[k]));
		qft_msg_init(&m, first[k], 26);
		m.magic = QFT_MAGIC;
		m.version = QFT_VERSION;
		set_cred(&m, 0);
		len = b.len;
		CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
		CHECK_EQ(b.len, len);
		m.flags = 0;
		CHECK_EQ(qft_msg_encode(&b, &m), 0);
		qft_store16(b.data + 6, QFT_F_CRED);
		{
			struct qft_hdr h;
			uint8_t *p = dup_exact(b.data, b.len);

			CHECK_EQ(qft_hdr_decode(&h, p, b.len), -EBADMSG);
			CHECK_EQ(qft_msg_decode(&got, p, b.len), -EBADMSG);
			free(p);
		}
		qbuf_reset(&b);
	}
	check_ctx("cred on NOTIFY and PROGRESS");
	qft_msg_init_notify(&m, 5, QFT_NOTIFY_CHANGED, "x", 1);
	m.flags |= QFT_F_CRED;
	CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
	whdr(&w, QFT_OP_PROGRESS, QFT_F_PROGRESS | QFT_F_CRED, 27);
	wput(&w, 1, 4);
	wput(&w, 1, 4);
	wput(&w, 0, 4);
	wdone(&w);
	CHECK_EQ(decode_wr(&w, &got), -EBADMSG);
	decode_wr(NULL, NULL);
	qbuf_free(&b);
	check_ctx("%s", "");
}

/* SYNCFS: no fields either way; any byte after the header is garbage. */
static void test_syncfs_codec(void)
{
	struct qft_msg m, got;
	uint8_t *copy;
	struct qbuf b;

	check_ctx("SYNCFS request");
	qft_msg_init(&m, QFT_OP_SYNCFS, 91);
	CHECK_EQ(roundtrip(&m), 0);
	keep_frame(&m, "request");
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	CHECK_EQ(b.len, QFT_HDR_SIZE);
	CHECK(strcmp(qft_op_name(QFT_OP_SYNCFS), "SYNCFS") == 0);
	/* One byte more, with the length saying so: trailing garbage. */
	CHECK_EQ(qbuf_put_u8(&b, 0), 0);
	b.data[3] = 1;
	copy = dup_exact(b.data, b.len);
	CHECK_EQ(qft_msg_decode(&got, copy, b.len), -EBADMSG);
	free(copy);
	qbuf_free(&b);

	check_ctx("SYNCFS reply");
	qft_msg_init_reply(&got, &m);
	CHECK_EQ(roundtrip(&got), 0);
	keep_frame(&got, "reply");
	got.status = QFT_EIO;
	got.errmsg = S("syncfs: Input/output error");
	CHECK_EQ(roundtrip(&got), 0);
	check_ctx("%s", "");
}

/*
 * RESUME and BYE (QFT_FEAT_RESUME): RESUME carries HELLO's magic, version
 * and features, its lane flag and a sequence number each way; BYE carries
 * nothing.  Frames are kept for the truncation and garbage tests.
 */
static int decode_copy(const struct qft_msg *m, struct qft_msg *got,
		       uint8_t **copy)
{
	struct qbuf b;
	int r;

	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, m), 0);
	*copy = dup_exact(b.data, b.len);
	r = qft_msg_decode(got, *copy, b.len);
	qbuf_free(&b);
	return r;
}

/*
 * LOCK and GETLK (QFT_FEAT_LOCKS): the lock travels whole each way; a
 * range beyond off_t or backwards, an unknown type or an unknown LOCK
 * flag is well framed but invalid (-EINVAL), so the server answers it and
 * keeps the connection.
 */
static void test_lock_codec(void)
{
	static const struct {
		uint64_t start, end;
		uint32_t type, opflags;
		int want;
	} cases[] = {
		{ 0, INT64_MAX, QFT_LK_WRLCK, 0, 0 },
		{ 5, 5, QFT_LK_RDLCK, QFT_LOCK_FLOCK, 0 },
		{ 0, INT64_MAX, QFT_LK_UNLCK, QFT_LOCK_CLOSE, 0 },
		{ 6, 5, QFT_LK_WRLCK, 0, -EINVAL },
		{ 0, (uint64_t)INT64_MAX + 1, QFT_LK_WRLCK, 0, -EINVAL },
		{ UINT64_MAX, UINT64_MAX, QFT_LK_WRLCK, 0, -EINVAL },
		{ 0, 1, QFT_LK_WRLCK + 1, 0, -EINVAL },
		{ 0, 1, QFT_LK_WRLCK, QFT_LOCK_KNOWN + 1, -EINVAL },
	};
	struct qft_msg m, got;
	uint8_t *copy;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_ctx("LOCK case %zu", i);
		qft_msg_init(&m, QFT_OP_LOCK, 300 + i);
		m.handle = 4;
		m.opflags = cases[i].opflags;
		m.lk.owner = 0x0123456789abcdefull;
		m.lk.start = cases[i].start;
		m.lk.end = cases[i].end;
		m.lk.type = cases[i].type;
		m.lk.pid = 4242;
		CHECK_EQ(decode_copy(&m, &got, &copy), cases[i].want);
		if (cases[i].want == 0) {
			CHECK_EQ(got.opflags, m.opflags);
			CHECK(got.lk.owner == m.lk.owner &&
			      got.lk.start == m.lk.start &&
			      got.lk.end == m.lk.end &&
			      got.lk.type == m.lk.type && got.lk.pid == 4242);
			if (i == 0)
				keep_frame(&m, "request");
		}
		free(copy);
	}

	check_ctx("GETLK");
	qft_msg_init(&m, QFT_OP_GETLK, 320);
	m.handle = 9;
	m.lk = (struct qft_lock){ 7, 10, 19, QFT_LK_WRLCK, 1 };
	CHECK_EQ(decode_copy(&m, &got, &copy), 0);
	CHECK(got.handle == 9 && got.lk.end == 19);
	free(copy);
	keep_frame(&m, "request");
	qft_msg_init_reply(&got, &m);
	got.lk = (struct qft_lock){ 7, 0, INT64_MAX, QFT_LK_RDLCK, 0 };
	CHECK_EQ(decode_copy(&got, &m, &copy), 0);
	CHECK(m.lk.type == QFT_LK_RDLCK && m.lk.end == INT64_MAX);
	free(copy);
	keep_frame(&got, "reply");
	/* A reply's lock is checked as a request's. */
	got.lk.start = 20;
	got.lk.end = 10;
	CHECK_EQ(decode_copy(&got, &m, &copy), -EINVAL);
	free(copy);
	check_ctx("%s", "");
}

/*
 * A HELLO reply as the wire has it (uid and gid 0), with `feat` and,
 * after the gid, the strings that are not NULL: the boot id, then the
 * congestion control.  Truncated by the caller where it wants.
 */
static void whello_reply(struct wr *w, uint64_t id, uint32_t feat,
			 const char *boot_id, const char *tcpcc)
{
	whdr(w, QFT_OP_HELLO, QFT_F_REPLY, id);
	wput(w, 0, 4);
	wput(w, QFT_MAGIC, 4);
	wput(w, QFT_VERSION, 4);
	wput(w, feat, 4);
	wput(w, 0, 4);
	wput(w, 0, 4);
	if (boot_id)
		wstr(w, boot_id);
	if (tcpcc)
		wstr(w, tcpcc);
	wdone(w);
}

/* Each of `bad` (then `longest`) in the HELLO reply's string `feat`
 * carries is refused as malformed (-EINVAL), not passed on. */
static void hello_reply_refuses(uint32_t feat, const char *const *bad,
				size_t n, const char *longest)
{
	struct qft_msg got;
	struct wr w;
	uint8_t *p;

	for (size_t i = 0; i < n + 1; i++) {
		const char *v = i < n ? bad[i] : longest;

		check_ctx("HELLO reply with %s #%zu",
			  feat == QFT_FEAT_BOOTID ? "boot id" :
			  "congestion control", i);
		whello_reply(&w, 9, feat, feat == QFT_FEAT_BOOTID ? v : NULL,
			     feat == QFT_FEAT_TCPCC ? v : NULL);
		p = dup_exact(w.b, w.n);
		CHECK_EQ(qft_msg_decode(&got, p, w.n), -EINVAL);
		free(p);
	}
}

/*
 * The HELLO reply's boot id (QFT_FEAT_BOOTID): present exactly when its
 * features say so, visible ASCII of 1 to QFT_MAX_BOOT_ID bytes, and a
 * reply cut anywhere inside it is malformed.
 */
static void test_bootid_codec(void)
{
	static const char id[] = "7e2b0c55-1d3a-4f8e-9a61-0c1f2e3d4c5b";
	char longid[QFT_MAX_BOOT_ID + 2];
	struct qft_msg m, got;
	struct qbuf b;
	uint8_t *p;
	struct wr w;

	check_ctx("golden HELLO reply with a boot id");
	qft_msg_init(&m, QFT_OP_HELLO, 9);
	m.flags = QFT_F_REPLY;
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = QFT_FEAT_RESUME | QFT_FEAT_BOOTID;
	m.uid = 0;
	m.gid = 7;
	m.boot_id = S(id);
	whdr(&w, QFT_OP_HELLO, QFT_F_REPLY, 9);
	wput(&w, 0, 4);
	wput(&w, QFT_MAGIC, 4);
	wput(&w, QFT_VERSION, 4);
	wput(&w, QFT_FEAT_RESUME | QFT_FEAT_BOOTID, 4);
	wput(&w, 0, 4);
	wput(&w, 7, 4);
	wstr(&w, id);
	wdone(&w);
	check_golden(&m, &w);
	p = dup_exact(w.b, w.n);
	CHECK_EQ(qft_msg_decode(&got, p, w.n), 0);
	CHECK_EQ(got.boot_id.len, strlen(id));
	CHECK(got.boot_id.s && strcmp(got.boot_id.s, id) == 0);
	free(p);
	keep_frame(&m, "HELLO reply with boot id");

	/* Cut anywhere after the gid: inside the boot id, never a frame. */
	check_ctx("HELLO reply with a boot id, truncated");
	for (size_t n = w.n - 1; n >= w.n - strlen(id) - 5; n--) {
		p = dup_exact(w.b, n);
		qft_store32(p, (uint32_t)(n - QFT_HDR_SIZE));
		CHECK(qft_msg_decode(&got, p, n) < 0);
		free(p);
	}

	check_ctx("HELLO reply without the bit carries no boot id");
	m.features = QFT_FEAT_RESUME;
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	CHECK_EQ(b.len, QFT_HDR_SIZE + 24u);
	p = dup_exact(b.data, b.len);
	CHECK_EQ(qft_msg_decode(&got, p, b.len), 0);
	CHECK(got.boot_id.s == NULL && got.boot_id.len == 0);
	free(p);
	qbuf_free(&b);
	/* ... and one that has it anyway is malformed (an older client
	 * reading a reply it did not ask for sees trailing bytes too). */
	check_ctx("HELLO reply with a boot id but not the bit");
	p = dup_exact(w.b, w.n);
	qft_store32(p + QFT_HDR_SIZE + 12, QFT_FEAT_RESUME);
	CHECK_EQ(qft_msg_decode(&got, p, w.n), -EBADMSG);
	free(p);

	check_ctx("HELLO reply with the bit but an empty or unsendable id");
	m.features = QFT_FEAT_BOOTID;
	m.boot_id = S("");
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	m.boot_id = (struct qft_str){ longid, QFT_MAX_BOOT_ID + 1 };
	CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
	qbuf_free(&b);

	/* Decoded: empty, too long, or with a byte that is not visible
	 * ASCII (it goes into logs) -- refused, not passed on. */
	static const char *const bad[] = { "", "a b", "tab\there", "nl\n",
					   "\x7f", "\xc3\xa9t\xc3\xa9" };
	hello_reply_refuses(QFT_FEAT_BOOTID, bad, sizeof(bad) / sizeof(bad[0]),
			    longid);
	/* The longest allowed goes through. */
	check_ctx("HELLO reply with the longest boot id");
	longid[QFT_MAX_BOOT_ID] = '\0';
	m.boot_id = (struct qft_str){ longid, QFT_MAX_BOOT_ID };
	CHECK_EQ(decode_copy(&m, &got, &p), 0);
	CHECK_EQ(got.boot_id.len, QFT_MAX_BOOT_ID);
	free(p);
}

/*
 * The HELLO reply's congestion control (QFT_FEAT_TCPCC): after the boot
 * id when both are there, present exactly when its bit says so, 1 to
 * QFT_MAX_TCPCC bytes of [a-z0-9_], and a reply cut inside it is
 * malformed.
 */
static void test_tcpcc_codec(void)
{
	static const char id[] = "b00t";
	char longcc[QFT_MAX_TCPCC + 2];
	struct qft_msg m, got;
	uint8_t *p;
	struct wr w;

	check_ctx("golden HELLO reply with boot id and congestion control");
	qft_msg_init(&m, QFT_OP_HELLO, 3);
	m.flags = QFT_F_REPLY;
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = QFT_FEAT_BOOTID | QFT_FEAT_TCPCC;
	m.boot_id = S(id);
	m.tcpcc = S("bbr");
	whello_reply(&w, 3, QFT_FEAT_BOOTID | QFT_FEAT_TCPCC, id, "bbr");
	check_golden(&m, &w);
	p = dup_exact(w.b, w.n);
	CHECK_EQ(qft_msg_decode(&got, p, w.n), 0);
	CHECK_EQ(got.tcpcc.len, 3);
	CHECK(got.tcpcc.s && strcmp(got.tcpcc.s, "bbr") == 0);
	CHECK(got.boot_id.s && strcmp(got.boot_id.s, id) == 0);
	free(p);
	keep_frame(&m, "HELLO reply with congestion control");

	check_ctx("HELLO reply with congestion control, truncated");
	for (size_t n = w.n - 1; n >= w.n - 3 - 4; n--) {
		p = dup_exact(w.b, n);
		qft_store32(p, (uint32_t)(n - QFT_HDR_SIZE));
		CHECK(qft_msg_decode(&got, p, n) < 0);
		free(p);
	}

	check_ctx("HELLO reply with congestion control alone");
	m.features = QFT_FEAT_TCPCC;
	m.boot_id = S("");
	m.tcpcc = S("cubic");
	CHECK_EQ(decode_copy(&m, &got, &p), 0);
	CHECK(got.boot_id.len == 0);
	CHECK(got.tcpcc.s && strcmp(got.tcpcc.s, "cubic") == 0);
	free(p);

	check_ctx("HELLO reply with congestion control but not the bit");
	p = dup_exact(w.b, w.n);
	qft_store32(p + QFT_HDR_SIZE + 12, QFT_FEAT_BOOTID);
	CHECK_EQ(qft_msg_decode(&got, p, w.n), -EBADMSG);
	free(p);

	/* Encoded: empty or too long is the caller's bug, refused. */
	check_ctx("HELLO reply with an unsendable congestion control");
	memset(longcc, 'a', sizeof(longcc) - 1);
	longcc[sizeof(longcc) - 1] = '\0';
	{
		struct qbuf b;

		qbuf_init(&b, FRAME_LIMIT);
		m.tcpcc = S("");
		CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
		m.tcpcc = (struct qft_str){ longcc, QFT_MAX_TCPCC + 1 };
		CHECK_EQ(qft_msg_encode(&b, &m), -EINVAL);
		qbuf_free(&b);
	}

	/* Decoded: anything but a module name is refused (it becomes part
	 * of a stats key and a log line). */
	static const char *const bad[] = { "", "BBR", "b r", "x/y", "nl\n",
					   "\xc3\xa9", "bbr%n" };
	hello_reply_refuses(QFT_FEAT_TCPCC, bad, sizeof(bad) / sizeof(bad[0]),
			    longcc);
	check_ctx("HELLO reply with the longest congestion control");
	longcc[QFT_MAX_TCPCC] = '\0';
	m.tcpcc = (struct qft_str){ longcc, QFT_MAX_TCPCC };
	CHECK_EQ(decode_copy(&m, &got, &p), 0);
	CHECK_EQ(got.tcpcc.len, QFT_MAX_TCPCC);
	free(p);
}

static void test_resume_codec(void)
{
	struct qft_msg m, rep, got;
	uint8_t *copy;

	check_ctx("RESUME request");
	CHECK(strcmp(qft_op_name(QFT_OP_RESUME), "RESUME") == 0);
	CHECK(strcmp(qft_op_name(QFT_OP_BYE), "BYE") == 0);
	qft_msg_init(&m, QFT_OP_RESUME, 7);
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = QFT_FEAT_RESUME | QFT_FEAT_NOTIFY;
	m.opflags = QFT_RESUME_META;
	m.seq = 0x0123456789abcdefull;
	CHECK_EQ(decode_copy(&m, &got, &copy), 0);
	CHECK_EQ(got.seq, m.seq);
	CHECK_EQ(got.opflags, QFT_RESUME_META);
	CHECK_EQ(got.features, m.features);
	free(copy);
	keep_frame(&m, "request");

	check_ctx("RESUME unknown lane flag");
	m.opflags = QFT_RESUME_KNOWN << 1;
	CHECK_EQ(decode_copy(&m, &got, &copy), -EINVAL);
	free(copy);
	check_ctx("RESUME wrong magic");
	m.opflags = 0;
	m.magic = QFT_MAGIC ^ 1;
	CHECK_EQ(decode_copy(&m, &got, &copy), -EBADMSG);
	free(copy);
	m.magic = QFT_MAGIC;

	check_ctx("RESUME reply");
	qft_msg_init_reply(&rep, &m);
	rep.magic = QFT_MAGIC;
	rep.version = QFT_VERSION;
	rep.features = QFT_FEAT_RESUME;
	rep.uid = 1000;
	rep.gid = 1001;
	rep.opflags = QFT_RESUME_REP_LOST_NOTIFY;
	rep.seq = UINT64_MAX;
	CHECK_EQ(decode_copy(&rep, &got, &copy), 0);
	CHECK_EQ(got.seq, UINT64_MAX);
	CHECK_EQ(got.uid, 1000);
	CHECK_EQ(got.gid, 1001);
	CHECK_EQ(got.opflags, QFT_RESUME_REP_LOST_NOTIFY);
	free(copy);
	keep_frame(&rep, "reply");
	rep.opflags = QFT_RESUME_REP_KNOWN << 1;
	check_ctx("RESUME reply unknown flag");
	CHECK_EQ(decode_copy(&rep, &got, &copy), -EINVAL);
	free(copy);
	check_ctx("RESUME refused");
	qft_msg_init_reply(&rep, &m);
	rep.status = QFT_ESTALE;
	rep.errmsg = S("no such session");
	CHECK_EQ(roundtrip(&rep), 0);
	keep_frame(&rep, "error");

	check_ctx("BYE");
	qft_msg_init(&m, QFT_OP_BYE, 1025);
	CHECK_EQ(roundtrip(&m), 0);
	keep_frame(&m, "request");
	qft_msg_init_reply(&rep, &m);
	CHECK_EQ(roundtrip(&rep), 0);
	keep_frame(&rep, "reply");
	check_ctx("%s", "");
}

/* PROGRESS: a bare header with its own flag, naming a request (id != 0);
 * nothing else may carry the flag, and it carries nothing else. */
static int progress_hdr(uint16_t op, uint16_t flags, uint64_t id,
			uint32_t extra)
{
	uint8_t raw[QFT_HDR_SIZE + 4] = { 0 };
	struct qft_msg m;
	uint8_t *copy;
	int r;

	qft_store32(raw, extra);
	qft_store16(raw + 4, op);
	qft_store16(raw + 6, flags);
	qft_store64(raw + 8, id);
	copy = dup_exact(raw, QFT_HDR_SIZE + extra);
	r = qft_msg_decode(&m, copy, QFT_HDR_SIZE + extra);
	if (r == 0 && (m.op != op || m.flags != flags || m.id != id))
		r = -EPROTO;
	free(copy);
	return r;
}

static void test_progress_codec(void)
{
	struct qft_msg m;

	check_ctx("PROGRESS");
	qft_msg_init(&m, QFT_OP_PROGRESS, 42);
	m.flags = QFT_F_PROGRESS;
	CHECK_EQ(roundtrip(&m), 0);
	CHECK(strcmp(qft_op_name(QFT_OP_PROGRESS), "PROGRESS") == 0);
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_PROGRESS, 42, 0), 0);
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_PROGRESS, UINT64_MAX, 0),
		 0);
	/* No request named, or anything after the header. */
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_PROGRESS, 0, 0),
		 -EBADMSG);
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_PROGRESS, 42, 4),
		 -EBADMSG);
	/* The opcode and the flag go together, and alone. */
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, 0, 42, 0), -EBADMSG);
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_REPLY, 42, 0), -EBADMSG);
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_PROGRESS | QFT_F_REPLY,
			      42, 0), -EBADMSG);
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_PROGRESS | QFT_F_NOTIFY,
			      42, 0), -EBADMSG);
	CHECK_EQ(progress_hdr(QFT_OP_FLUSH, QFT_F_PROGRESS, 42, 0), -EBADMSG);
	CHECK_EQ(progress_hdr(QFT_OP_NOTIFY, QFT_F_PROGRESS, 0, 0), -EBADMSG);
	CHECK_EQ(progress_hdr(QFT_OP_PING, QFT_F_PROGRESS, 42, 0), -EBADMSG);
	/* The next bit is still unknown. */
	CHECK_EQ(progress_hdr(QFT_OP_PROGRESS, QFT_F_PROGRESS | 0x0010, 42,
			      0), -EBADMSG);
	check_ctx("%s", "");
}

static void test_unwatch_codec(void)
{
	struct qft_msg m, got;
	uint8_t *copy;
	struct qbuf b;

	check_ctx("UNWATCH request");
	qft_msg_init(&m, QFT_OP_UNWATCH, 77);
	m.ino = 0x8000000000000001ull;
	CHECK_EQ(notify_roundtrip(&m, &got, &copy), 0);
	CHECK_EQ(got.op, QFT_OP_UNWATCH);
	CHECK_EQ(got.flags, 0);
	CHECK_EQ(got.ino, m.ino);
	free(copy);
	keep_frame(&m, "request");
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	CHECK_EQ(b.len, QFT_HDR_SIZE + 8);
	/* Inode 0 names nothing a server watches. */
	m.ino = 0;
	qbuf_reset(&b);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	copy = dup_exact(b.data, b.len);
	CHECK_EQ(qft_msg_decode(&got, copy, b.len), -EINVAL);
	free(copy);
	qbuf_free(&b);

	check_ctx("UNWATCH reply");
	m.ino = 5;
	qft_msg_init_reply(&got, &m);
	CHECK_EQ(roundtrip(&got), 0);
	keep_frame(&got, "reply");
	got.status = QFT_EINVAL;
	got.errmsg = S("no");
	CHECK_EQ(roundtrip(&got), 0);
	check_ctx("%s", "");
}

/* COPY and SEEK (QFT_FEAT_COPY, QFT_FEAT_HOLES): every range and flag
 * checked by the decoder, the destination handle never 0. */
static void test_copy_seek_codec(void)
{
	struct qft_msg m, got;
	struct qbuf b;
	uint8_t *copy;

	check_ctx("COPY request");
	qft_msg_init(&m, QFT_OP_COPY, 9);
	m.handle = 3;
	m.offset = 4097;
	m.handle2 = QFT_MAX_HANDLES;
	m.offset2 = 12345;
	m.length = QFT_MAX_COPY;
	CHECK_EQ(roundtrip(&m), 0);
	keep_frame(&m, "request");
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&b, &m), 0);
	CHECK_EQ(b.len, QFT_HDR_SIZE + 5 * 8 + 4);
	copy = dup_exact(b.data, b.len);
	CHECK_EQ(qft_msg_decode(&got, copy, b.len), 0);
	CHECK_EQ(got.handle2, m.handle2);
	CHECK_EQ(got.offset2, m.offset2);
	free(copy);
	qbuf_free(&b);
	m.handle2 = 0;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.handle2 = QFT_MAX_HANDLES + 1;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.handle2 = 1;
	m.length = QFT_MAX_COPY + 1ull;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.length = 10;
	m.offset2 = (uint64_t)INT64_MAX - 5;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.offset2 = (uint64_t)INT64_MAX + 1;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.offset2 = 0;
	m.offset = (uint64_t)INT64_MAX - 5;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.offset = 0;
	m.opflags = 1;
	CHECK_EQ(roundtrip(&m), -EINVAL);

	check_ctx("COPY reply");
	m.opflags = 0;
	qft_msg_init_reply(&got, &m);
	got.count = 10;
	got.attr = sample_attr;
	CHECK_EQ(roundtrip(&got), 0);
	keep_frame(&got, "reply");

	check_ctx("SEEK");
	qft_msg_init(&m, QFT_OP_SEEK, 10);
	m.handle = 1;
	m.offset = 1ull << 40;
	m.opflags = QFT_SEEK_DATA;
	CHECK_EQ(roundtrip(&m), 0);
	keep_frame(&m, "request");
	m.opflags = QFT_SEEK_HOLE;
	CHECK_EQ(roundtrip(&m), 0);
	m.opflags = 0;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.opflags = QFT_SEEK_DATA | QFT_SEEK_HOLE;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.opflags = 4;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	m.opflags = QFT_SEEK_DATA;
	m.offset = (uint64_t)INT64_MAX + 1;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	qft_msg_init_reply(&got, &m);
	got.offset = 1ull << 41;
	CHECK_EQ(roundtrip(&got), 0);
	keep_frame(&got, "reply");
	got.offset = (uint64_t)INT64_MAX + 1;
	CHECK_EQ(roundtrip(&got), -EINVAL);
	check_ctx("%s", "");
}

/* READDIR's change notification flags: WATCH asked, WATCHED answered. */
static void test_readdir_watch_flags(void)
{
	struct qft_msg m;

	check_ctx("READDIR WATCH");
	fill(&m, &specs[QFT_OP_READDIR - 1], false);
	m.opflags = QFT_READDIR_WATCH | QFT_READDIR_PLUS;
	CHECK_EQ(roundtrip(&m), 0);
	m.opflags = 0x4;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	fill(&m, &specs[QFT_OP_READDIR - 1], true);
	m.opflags = QFT_READDIR_WATCHED | QFT_READDIR_EOF;
	CHECK_EQ(roundtrip(&m), 0);
	m.opflags = 0x4;
	CHECK_EQ(roundtrip(&m), -EINVAL);
	check_ctx("%s", "");
}

static void test_garbage(void)
{
	const char *env_iters = getenv("QFT_FUZZ_ITERS");
	const char *env_seed = getenv("QFT_FUZZ_SEED");
	unsigned long iters = env_iters ? strtoul(env_iters, NULL, 0) : 200000;
	uint64_t seed = env_seed ? strtoull(env_seed, NULL, 0) :
				   0x71f7f5c0ffee1234ull;
	struct fuzz_stats st = { 0 };
	static uint8_t buf[8192];
	size_t seeds = 0;

	/* Seed with the small frames; the 1 MiB ones add nothing but time. */
	for (size_t f = 0; f < nframes; f++)
		if (frames[f].n <= sizeof(buf) / 2)
			seeds++;
	CHECK(seeds > 0);
	if (!seeds)
		return;

	rng_state = seed;
	for (unsigned long it = 0; it < iters; it++) {
		size_t n = 0;
		unsigned kind = (unsigned)rnd_below(8);

		check_ctx("garbage seed %#" PRIx64 " iteration %lu", seed, it);
		if (kind == 0) {
			/* Pure noise. */
			n = rnd_below(600);
			for (size_t i = 0; i < n; i++)
				buf[i] = (uint8_t)rnd();
		} else if (kind == 1) {
			/* Noise behind a plausible header. */
			n = QFT_HDR_SIZE + rnd_below(600);
			for (size_t i = 0; i < n; i++)
				buf[i] = (uint8_t)(rnd_below(4) ? rnd() : 0);
			qft_store32(buf, (uint32_t)(n - QFT_HDR_SIZE));
			qft_store16(buf + 4, (uint16_t)rnd_below(QFT_OP__COUNT + 1));
			qft_store16(buf + 6, (uint16_t)rnd_below(2));
		} else {
			/* Mutations of a valid frame, or of two spliced. */
			const struct frame *a;
			unsigned muts = 1 + (unsigned)rnd_below(8);

			do
				a = &frames[rnd_below(nframes)];
			while (a->n > sizeof(buf) / 2);
			memcpy(buf, a->p, a->n);
			n = a->n;
			if (kind == 7) {
				const struct frame *b;
				size_t cut = rnd_below(n + 1), from;

				do
					b = &frames[rnd_below(nframes)];
				while (b->n > sizeof(buf) / 2);
				from = rnd_below(b->n + 1);
				memcpy(buf + cut, b->p + from, b->n - from);
				n = cut + b->n - from;
				muts = (unsigned)rnd_below(3);
			}
			for (unsigned k = 0; k < muts; k++)
				mutate(buf, &n, sizeof(buf));
			/* Mostly keep the header consistent, to reach the
			 * payload parser. */
			if (n >= QFT_HDR_SIZE && rnd_below(4))
				qft_store32(buf, (uint32_t)(n - QFT_HDR_SIZE));
		}
		fuzz_one(buf, n, &st);
	}
	check_ctx("%s", "");
	printf("garbage: seed %#" PRIx64 ", %lu inputs: %lu accepted, "
	       "%lu EBADMSG, %lu EINVAL, %lu ENOSYS, %lu dirents and %lu "
	       "scan records walked, %lu HELLOs of other versions\n",
	       seed, iters, st.accepted, st.ebadmsg, st.einval, st.enosys,
	       st.dirents, st.scan_recs, st.other_hello);
	/* The loop must reach past the framing checks to mean anything. */
	if (iters >= 10000) {
		CHECK(st.accepted > iters / 100);
		CHECK(st.einval > iters / 100);
		CHECK(st.ebadmsg > iters / 10);
	}
}

/* FETCH (walk-ahead): the request's names and the reply's records. */
static void test_fetch_codec(void)
{
	struct qft_fetch_rec rec, got;
	struct qft_attr reg = sample_attr;
	struct qft_str name;
	struct qft_msg m;
	struct qbuf b;
	struct qcur c;
	uint8_t *copy;

	check_ctx("%s", "FETCH");
	reg.mode = QFT_S_IFREG | 0644;
	CHECK(strcmp(qft_op_name(QFT_OP_FETCH), "FETCH") == 0);

	/* Names: valid ones decode in order; a bad one anywhere fails the
	 * list; 1 to QFT_FETCH_MAX_NAMES of them. */
	qbuf_init(&b, FRAME_LIMIT);
	CHECK_EQ(qbuf_put_str(&b, "a.h", 3), 0);
	CHECK_EQ(qbuf_put_str(&b, "b", 1), 0);
	CHECK_EQ(qft_fetch_names_check(&(struct qft_blob){ b.data,
		 (uint32_t)b.len }), 2);
	qcur_init(&c, b.data, b.len);
	CHECK_EQ(qft_fetch_name_next(&c, &name), 0);
	CHECK(strcmp(name.s, "a.h") == 0);
	CHECK_EQ(qbuf_put_str(&b, "..", 2), 0);
	CHECK_EQ(qft_fetch_names_check(&(struct qft_blob){ b.data,
		 (uint32_t)b.len }), -EINVAL);
	qbuf_reset(&b);
	CHECK_EQ(qbuf_put_str(&b, "x/y", 3), 0);
	CHECK_EQ(qft_fetch_names_check(&(struct qft_blob){ b.data,
		 (uint32_t)b.len }), -EINVAL);
	qbuf_reset(&b);
	CHECK_EQ(qft_fetch_names_check(&(struct qft_blob){ b.data, 0 }),
		 -EINVAL);
	for (unsigned i = 0; i <= QFT_FETCH_MAX_NAMES; i++)
		CHECK_EQ(qbuf_put_str(&b, "n", 1), 0);
	CHECK_EQ(qft_fetch_names_check(&(struct qft_blob){ b.data,
		 (uint32_t)b.len }), -EINVAL);
	/* Short: a length past the end. */
	qbuf_reset(&b);
	CHECK_EQ(qbuf_put_u32(&b, 10), 0);
	CHECK_EQ(qft_fetch_names_check(&(struct qft_blob){ b.data,
		 (uint32_t)b.len }), -EBADMSG);

	/* Records round-trip; an error record carries nothing else. */
	qbuf_reset(&b);
	memset(&rec, 0, sizeof(rec));
	rec.attr = reg;
	rec.attr.size = 5;
	rec.flags = QFT_FETCH_EOF;
	rec.data = (struct qft_blob){ pattern, 5 };
	CHECK_EQ(qft_fetch_rec_encode(&b, &rec), 0);
	memset(&rec, 0, sizeof(rec));
	rec.status = QFT_ENOENT;
	CHECK_EQ(qft_fetch_rec_encode(&b, &rec), 0);
	CHECK_EQ(b.len, 4 + QFT_ATTR_WIRE_SIZE + 4 + 4 + 5 + 4);
	qcur_init(&c, b.data, b.len);
	CHECK_EQ(qft_fetch_rec_decode(&c, &got, 5), 0);
	CHECK_EQ(got.status, QFT_OK);
	CHECK_EQ(got.flags, QFT_FETCH_EOF);
	CHECK_EQ(got.data.len, 5);
	CHECK(memcmp(got.data.p, pattern, 5) == 0);
	CHECK_EQ(got.attr.size, 5);
	CHECK_EQ(qft_fetch_rec_decode(&c, &got, 5), 0);
	CHECK_EQ(got.status, QFT_ENOENT);
	CHECK_EQ(c.left, 0);

	/* More data than asked for, unknown flags or status, not a regular
	 * file's attributes, a short record: refused, nothing consumed. */
	qcur_init(&c, b.data, b.len);
	CHECK_EQ(qft_fetch_rec_decode(&c, &got, 4), -EINVAL);
	CHECK_EQ(c.left, b.len);
	qbuf_reset(&b);
	rec.status = QFT_OK;
	rec.attr = reg;
	rec.flags = 0x2;
	rec.data = (struct qft_blob){ pattern, 1 };
	CHECK_EQ(qft_fetch_rec_encode(&b, &rec), 0);
	qcur_init(&c, b.data, b.len);
	CHECK_EQ(qft_fetch_rec_decode(&c, &got, 10), -EINVAL);
	qbuf_reset(&b);
	rec.flags = 0;
	rec.attr.mode = QFT_S_IFDIR | 0755;
	CHECK_EQ(qft_fetch_rec_encode(&b, &rec), 0);
	qcur_init(&c, b.data, b.len);
	CHECK_EQ(qft_fetch_rec_decode(&c, &got, 10), -EINVAL);
	qbuf_reset(&b);
	CHECK_EQ(qbuf_put_u32(&b, QFT_STATUS__COUNT), 0);
	qcur_init(&c, b.data, b.len);
	CHECK_EQ(qft_fetch_rec_decode(&c, &got, 10), -EINVAL);
	qbuf_reset(&b);
	rec.attr = reg;
	CHECK_EQ(qft_fetch_rec_encode(&b, &rec), 0);
	qcur_init(&c, b.data, b.len - 1);
	CHECK_EQ(qft_fetch_rec_decode(&c, &got, 10), -EBADMSG);
	CHECK_EQ(c.left, b.len - 1);

	/* The request: `length` is bounded by QFT_FETCH_FILE_MAX. */
	qft_msg_init(&m, QFT_OP_FETCH, 9);
	m.path = S("dir");
	m.length = QFT_FETCH_FILE_MAX;
	m.data = (struct qft_blob){ (const uint8_t *)"\0\0\0\1a\0", 6 };
	CHECK_EQ(roundtrip(&m), 0);
	m.length = QFT_FETCH_FILE_MAX + 1;
	qbuf_reset(&b);
	if (qft_msg_encode(&b, &m) == 0) {
		copy = dup_exact(b.data, b.len);
		CHECK(qft_msg_decode(&m, copy, b.len) < 0);
		free(copy);
	}
	qbuf_free(&b);
	check_ctx("%s", "");
}

int main(void)
{
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
	build_long_strings();
	build_readdir_data();
	build_scan_data();

	test_op_names();
	test_roundtrip_all();
	test_big_data();
	test_errmsg();
	test_golden();
	test_notify_codec();
	test_unwatch_codec();
	test_syncfs_codec();
	test_progress_codec();
	test_resume_codec();
	test_bootid_codec();
	test_tcpcc_codec();
	test_lock_codec();
	test_readdir_watch_flags();
	test_copy_seek_codec();
	test_cred_codec();
	test_truncation();
	test_header();
	test_name_path_valid();
	test_names_in_messages();
	test_flags();
	test_modes();
	test_times();
	test_ranges();
	test_encode_limits();
	test_dirents();
	test_hello_versions();
	test_open_flush();
	test_lazy_open();
	test_scan_records();
	test_scan_check();
	test_fetch_codec();
	test_host_conversions();
	test_garbage();

	for (size_t f = 0; f < nframes; f++)
		free(frames[f].p);
	qbuf_free(&readdir_data);
	qbuf_free(&scan_data);
	return check_exit("test_msg");
}
