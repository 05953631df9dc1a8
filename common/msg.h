/* SPDX-License-Identifier: MIT */
/*
 * Encoding and decoding of protocol messages (see protocol.h).
 *
 * One struct carries any request or reply; which of its fields an opcode
 * uses, in which order, is fixed by the table in msg.c, so that every
 * message is encoded and decoded by the same code and checked the same way
 * on both sides.  Decoding is zero-copy: strings and data point into the
 * frame buffer, which must outlive the message.
 *
 * Error convention: 0 or a negative errno.  Decoders return
 *   -EBADMSG  malformed: truncated, trailing bytes, length out of range;
 *   -ENOSYS   an opcode this version does not know (header decode);
 *   -EINVAL   well-formed but invalid: a name with '/', a path with '..',
 *             unknown flag bits, a bad file type.
 * and leave *m in an unspecified state on failure.
 */
#ifndef QFT_MSG_H
#define QFT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "buf.h"
#include "protocol.h"

struct qft_str {
	const char *s;   /* NUL-terminated; NULL when absent */
	uint32_t len;
};

struct qft_blob {
	const uint8_t *p;
	uint32_t len;
};

struct qft_time {
	int64_t sec;
	uint32_t nsec;   /* < 1e9 */
};

struct qft_attr {
	uint64_t ino;
	uint32_t mode;   /* QFT_S_IF* | permission bits */
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	uint64_t size;
	uint64_t blocks; /* 512-byte units, as st_blocks */
	uint32_t blksize;
	struct qft_time atime, mtime, ctime;
	uint32_t flags;  /* QFT_ATTR_* hints */
};

struct qft_statfs {
	uint64_t bsize, frsize, blocks, bfree, bavail, files, ffree, favail;
	uint64_t namemax;
};

/*
 * The caller a request acts for (QFT_F_CRED), as the server knows it:
 * fsuid, fsgid and supplementary groups.  (uint32_t)-1 is no id and is
 * invalid anywhere here (setfsuid(-1) would change nothing).
 */
struct qft_cred {
	uint32_t uid, gid;
	uint32_t ngroups;                /* <= QFT_MAX_GROUPS */
	uint32_t groups[QFT_MAX_GROUPS];
};

/* A lock (QFT_OP_LOCK, QFT_OP_GETLK; protocol.h, "Locks"). */
struct qft_lock {
	uint64_t owner;
	uint64_t start, end;  /* inclusive; end <= INT64_MAX */
	uint32_t type;        /* QFT_LK_* */
	uint32_t pid;
};

struct qft_hdr {
	uint32_t len;    /* payload bytes after the header */
	uint16_t op;
	uint16_t flags;
	uint64_t id;
};

struct qft_msg {
	uint16_t op;
	uint16_t flags;      /* QFT_F_REPLY for replies; QFT_F_CRED */
	uint64_t id;

	/* With QFT_F_CRED in `flags` (requests only): the caller the
	 * request acts for, encoded before the opcode's fields. */
	struct qft_cred cred;

	uint32_t status;     /* replies: enum qft_status */
	struct qft_str errmsg; /* replies with status != 0; may be empty */

	/* Fields; msg.c's table says which ones each opcode carries. */
	uint32_t magic, version, features;      /* HELLO */
	uint64_t handle;
	struct qft_str path;  /* the object, or the directory holding `name` */
	struct qft_str name;
	struct qft_str path2; /* RENAME/LINK: directory holding `name2` */
	struct qft_str name2;
	struct qft_str target; /* SYMLINK/READLINK */
	struct qft_str xname;  /* extended attribute name */
	uint32_t opflags;     /* op-specific QFT_O_*, QFT_RENAME_*, ... */
	uint32_t mode;
	uint32_t uid, gid;    /* SETATTR; HELLO reply: the server's ids */
	uint32_t valid;       /* SETATTR: QFT_SET_* */
	uint64_t rdev;
	uint64_t size;        /* SETATTR new size */
	uint64_t offset;
	uint64_t length;      /* READ, OPEN: data wanted; SCAN: reply budget */
	uint64_t count;       /* WRITE: bytes written; xattr: value size */
	struct qft_time atime, mtime;
	struct qft_blob data;
	struct qft_attr attr;
	struct qft_statfs st;

	/* Change notification: NOTIFY (ino, kind, name) and UNWATCH (ino).
	 * A NOTIFY's name is `name` above, and may be empty there. */
	uint64_t ino;         /* the watched directory's inode number */
	uint32_t kind;        /* NOTIFY: QFT_NOTIFY_* */

	/* RESUME: the client's lowest unanswered request id on the
	 * connection (request), the id the server expects next (reply). */
	uint64_t seq;

	/* HELLO reply with QFT_FEAT_BOOTID: the server host's boot id. */
	struct qft_str boot_id;
	/* HELLO reply with QFT_FEAT_TCPCC: the server's congestion control. */
	struct qft_str tcpcc;

	/* COPY: the destination handle and where its bytes go (the source
	 * is `handle` at `offset`). */
	uint64_t handle2;
	uint64_t offset2;
	/* LOCK, GETLK (request and reply). */
	struct qft_lock lk;
};

/* Clears *m and sets op and id (for requests). */
void qft_msg_init(struct qft_msg *m, uint16_t op, uint64_t id);
/* Clears *r and makes it the (successful) reply to request `req`. */
void qft_msg_init_reply(struct qft_msg *r, const struct qft_msg *req);

/*
 * Clears *m and makes it a NOTIFY frame (QFT_F_NOTIFY, id 0) about
 * directory `ino`; `name` (len bytes, may be 0) must outlive *m.
 */
void qft_msg_init_notify(struct qft_msg *m, uint64_t ino, uint32_t kind,
			 const char *name, uint32_t len);

/* Name of an opcode for logs ("LSTAT"), or "?" when unknown. */
const char *qft_op_name(uint16_t op);

/*
 * Appends one whole frame (header and payload) for *m to *b.  Requests
 * carry the opcode's request fields, after m->cred when m->flags has
 * QFT_F_CRED; replies (QFT_F_REPLY) carry status and then either the
 * reply fields or errmsg.  Fails with -EMSGSIZE when the frame would
 * exceed QFT_MAX_PAYLOAD and -EINVAL on an unknown opcode or a credential
 * the decoder would refuse (on a reply, HELLO or RESUME; more than
 * QFT_MAX_GROUPS groups; an id of (uint32_t)-1), leaving *b as it was.
 */
int qft_msg_encode(struct qbuf *b, const struct qft_msg *m);
/*
 * The same, but a data field that is the frame's last (WRITE's data, a
 * READ reply's) is left out except for its length: *tail is then
 * m->data, which the sender sends right behind the head
 * (qft_chan_sendv), so the bytes are never copied into the frame.  For
 * every other message *tail is empty and b holds the whole frame.  The
 * header counts the whole payload, tail included.
 */
int qft_msg_encode_head(struct qbuf *b, const struct qft_msg *m,
			struct qft_blob *tail);

/* Decodes and checks a 16-byte frame header. */
int qft_hdr_decode(struct qft_hdr *h, const uint8_t *p, size_t n);

/*
 * Decodes one whole frame (header then exactly h.len payload bytes).
 * Pointers in *m refer into `frame`.  With QFT_F_CRED the credential is
 * copied into m->cred: a count of groups above QFT_MAX_GROUPS is
 * -EBADMSG, an id of (uint32_t)-1 -EINVAL.  A NOTIFY frame (QFT_F_NOTIFY)
 * carries its fields like a request; one whose kind is unknown, whose
 * name is neither empty nor a valid name, or whose fields do not fit its
 * kind (a name with GONE or ALL, an inode with ALL, inode 0 otherwise) is
 * -EINVAL.
 */
int qft_msg_decode(struct qft_msg *m, const uint8_t *frame, size_t n);

/* Validity of names and paths as the protocol defines them. */
bool qft_name_valid(const char *s, size_t len);
bool qft_path_valid(const char *s, size_t len);

/* Directory entries inside a READDIR reply's data. */
struct qft_dirent {
	uint64_t ino;
	uint64_t off;    /* cookie to resume after this entry */
	uint32_t type;   /* QFT_S_IF* of the entry, or 0 if unknown */
	struct qft_str name; /* a valid name, or "." or ".." */
	bool has_attr;
	struct qft_attr attr;
};

int qft_dirent_encode(struct qbuf *b, const struct qft_dirent *d);
/* Decodes the next entry; -EBADMSG/-EINVAL as above, 0 on success. */
int qft_dirent_decode(struct qcur *c, struct qft_dirent *d, bool plus);

/*
 * SCAN reply data (protocol.h, docs/protocol.md): a head, u32 base, then
 * records.  Every ENTRY whose attributes are a directory's announces the
 * next directory index, counting on from `base`.
 */
struct qft_scan_rec {
	uint8_t kind;          /* QFT_SCAN_REC_* */
	uint32_t index;        /* ENTRY: the parent's; DIR_END, WATCHED: its
				* own */
	uint32_t status;       /* DIR_END: enum qft_status, 0 = complete */
	struct qft_str name;   /* ENTRY: a valid name (never "." or "..") */
	struct qft_attr attr;  /* ENTRY */
};

int qft_scan_head_encode(struct qbuf *b, uint32_t base);
/* -EBADMSG when short, -EINVAL for base 0; consumes nothing on failure. */
int qft_scan_head_decode(struct qcur *c, uint32_t *base);
/* Leaves *b as it was on failure (-EMSGSIZE, -EINVAL for a bad kind). */
int qft_scan_rec_encode(struct qbuf *b, const struct qft_scan_rec *rec);
/*
 * The next record; -EBADMSG (short, unknown kind, name over NAME_MAX) or
 * -EINVAL (invalid name or attributes), consuming nothing on failure.
 * Does not check indexes: qft_scan_check does.
 */
int qft_scan_rec_decode(struct qcur *c, struct qft_scan_rec *rec);
/*
 * Checks a SCAN reply's data before any of it is used: the head, every
 * record decodes, every index names a directory announced before it
 * (below base, or by an earlier ENTRY of this data), nothing trails.
 * Returns the number of records, or -EBADMSG/-EINVAL.  Pure: the client
 * and the fuzzers call it.  The client must still check that `base` is
 * the count it has itself (no reply lost or repeated).
 */
int qft_scan_check(const struct qft_blob *data);

/*
 * FETCH (protocol.h, docs/protocol.md "Walk-ahead").  The request's data
 * is a list of names; each reply record says how reading one went.
 */
struct qft_fetch_rec {
	uint32_t status;       /* enum qft_status; the rest only when 0 */
	struct qft_attr attr;  /* a regular file's */
	uint32_t flags;        /* QFT_FETCH_EOF */
	struct qft_blob data;  /* from offset 0 */
};

/* The next name of a request's list: -EBADMSG when short, -EINVAL for
 * an invalid name ("", ".", "..", a '/'); consumes nothing on failure. */
int qft_fetch_name_next(struct qcur *c, struct qft_str *name);
/* Checks a whole list: the number of names (1 to QFT_FETCH_MAX_NAMES),
 * or -EBADMSG/-EINVAL.  Pure: the server and the fuzzers call it. */
int qft_fetch_names_check(const struct qft_blob *data);
/* Leaves *b as it was on failure (-EMSGSIZE). */
int qft_fetch_rec_encode(struct qbuf *b, const struct qft_fetch_rec *rec);
/*
 * The next record; -EBADMSG (short) or -EINVAL (unknown status or flag,
 * more data than `max_len`, attributes invalid or not a regular file's),
 * consuming nothing on failure.
 */
int qft_fetch_rec_decode(struct qcur *c, struct qft_fetch_rec *rec,
			 uint64_t max_len);

/* Conversions between wire structures and host structures. */
void qft_attr_from_stat(struct qft_attr *a, const struct stat *st);
void qft_attr_to_stat(const struct qft_attr *a, struct stat *st);
void qft_statfs_from_host(struct qft_statfs *s, const struct statvfs *v);
void qft_statfs_to_host(const struct qft_statfs *s, struct statvfs *v);

#endif /* QFT_MSG_H */
