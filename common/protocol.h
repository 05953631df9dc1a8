/* SPDX-License-Identifier: MIT */
/*
 * qftfs wire protocol, version 2: the one place that fixes the format.
 *
 * Everything on the wire is big-endian.  A connection carries frames; each
 * frame is a fixed 16-byte header followed by a payload:
 *
 *   offset size field
 *   0      4    payload length in bytes (<= QFT_MAX_PAYLOAD)
 *   4      2    opcode (enum qft_op)
 *   6      2    frame flags (QFT_F_*)
 *   8      8    request id, chosen by the client, echoed in the reply
 *
 * A request payload is the opcode's request fields (msg.c has the table);
 * a reply payload is a u32 status (enum qft_status, 0 = success) followed
 * by the opcode's reply fields on success, or by an error string on
 * failure.  docs/protocol.md describes every message in prose.
 *
 * Requests may be pipelined: the client never has to wait for a reply before
 * sending the next request.  The server executes requests of one connection
 * in the order received, so a CREATE, its WRITEs and its RELEASE can be sent
 * back to back; replies carry the request id and may be matched in any order.
 *
 * Handles (open files and directories) are numbers chosen by the client in
 * 1..QFT_MAX_HANDLES, so that an OPEN and the operations on its handle can be
 * pipelined without waiting for the OPEN's reply.  0 means "no handle".
 */
#ifndef QFT_PROTOCOL_H
#define QFT_PROTOCOL_H

#include <stdint.h>

#define QFT_MAGIC          0x51465446u /* "QFTF", first field of HELLO */
#define QFT_VERSION        2u

#define QFT_HDR_SIZE       16u
#define QFT_MAX_DATA       (1u << 20)            /* one READ/WRITE */
#define QFT_MAX_PAYLOAD    (QFT_MAX_DATA + 16384u)
#define QFT_MAX_NAME       255u                  /* NAME_MAX */
#define QFT_MAX_PATH       4095u                 /* PATH_MAX - 1 */
#define QFT_MAX_XATTR_NAME 255u                  /* XATTR_NAME_MAX */
#define QFT_MAX_XATTR_SIZE 65536u                /* XATTR_SIZE_MAX */
#define QFT_MAX_XATTR_LIST 65536u                /* XATTR_LIST_MAX */
#define QFT_MAX_HANDLES    65536u
#define QFT_MAX_ERRMSG     1024u
#define QFT_MAX_READDIR    (256u * 1024u)        /* READDIR reply budget */
#define QFT_MAX_SCAN       QFT_MAX_DATA          /* SCAN reply budget */
#define QFT_MAX_GROUPS     64u                   /* QFT_F_CRED groups */

/* Frame flags. */
#define QFT_F_REPLY        0x0001u /* frame is a reply to request `id` */
/*
 * The payload is one lz4chunk (lz4chunk.h) that expands to the real
 * payload, at most QFT_MAX_PAYLOAD bytes.  Only sent once HELLO agreed on
 * QFT_FEAT_LZ4; the channel (chan.c) expands it before anyone decodes the
 * frame, so no other layer ever sees this bit.
 */
#define QFT_F_LZ4          0x0002u
/*
 * Change notification (QFT_FEAT_NOTIFY): a frame the server sends on its
 * own, not a reply: opcode QFT_OP_NOTIFY, id 0, no status.  Valid only
 * with that opcode and only once HELLO agreed on QFT_FEAT_NOTIFY.
 */
#define QFT_F_NOTIFY       0x0004u
/*
 * Progress (QFT_FEAT_PROGRESS): a frame the server sends on its own while
 * it works on request `id` (a FLUSH's fdatasync on slow storage), so that
 * the client counts the time as the server working, not as silence:
 * opcode QFT_OP_PROGRESS, no payload, never answered.  Valid only with
 * that opcode, a non-zero id, and once HELLO agreed on QFT_FEAT_PROGRESS.
 */
#define QFT_F_PROGRESS     0x0008u
/*
 * Credentials (QFT_FEAT_CRED): the request's payload starts with the
 * caller it acts for (struct qft_cred in msg.h), before the opcode's own
 * fields:
 *
 *   u32 uid, u32 gid, u32 ngroups (<= QFT_MAX_GROUPS), ngroups x u32 gid
 *
 * as the server knows them (the client mapped them through its idmap).
 * Only on requests (never on a reply, NOTIFY or PROGRESS frame, nor on
 * HELLO or RESUME), and only once HELLO agreed on QFT_FEAT_CRED; the
 * server closes a connection that sends one otherwise.
 */
#define QFT_F_CRED         0x0010u

/*
 * HELLO features.  The client's HELLO asks, the server's reply says what
 * it accepts (a subset of what was asked); bits a side does not know are
 * ignored, never an error.
 *   LZ4       both sides may send QFT_F_LZ4 frames after the HELLO reply;
 *   LZ4_AUTO  with LZ4: the server compresses its replies with the auto
 *             policy (compress=auto) rather than every large frame.
 */
#define QFT_FEAT_LZ4       0x00000001u
#define QFT_FEAT_LZ4_AUTO  0x00000002u
/*
 * NOTIFY: the server watches the directories the client lists with
 * QFT_READDIR_WATCH and sends QFT_OP_NOTIFY frames when someone else
 * changes them (granted only where the server can watch: inotify).
 */
#define QFT_FEAT_NOTIFY    0x00000004u
/*
 * PROGRESS: the client counts QFT_OP_PROGRESS frames as the server
 * working on a request (and on those queued behind it); the server sends
 * them at least every QFT_PROGRESS_INTERVAL_MS while a FLUSH, FSYNC or
 * SYNCFS is in progress on this connection.
 */
#define QFT_FEAT_PROGRESS  0x00000008u
/*
 * FOLLOW: the client was asked to follow symlinks (-o follow_symlinks);
 * the server grants it when it was started with --follow-symlinks, which
 * only whoever starts it decides, so that a client whose server command
 * was replaced (a forced command) learns that links will not be followed
 * instead of showing them as links without a word.
 */
#define QFT_FEAT_FOLLOW    0x00000010u
/*
 * LAZY: the client may mark OPEN and CREATE with QFT_O_LAZY.  A server
 * that does not know the bit refuses it (unknown open flags are EINVAL),
 * so the client sends it only where this was agreed.
 */
#define QFT_FEAT_LAZY      0x00000020u
/*
 * RESUME: the session outlives its connections (docs/protocol.md,
 * "Resuming a session").  The client asks when it would resume (-o
 * resume= above 0); the server grants it on a --session TCP connection
 * when it was started with --resume above 0.  Where granted, the
 * requests after HELLO are numbered 1, 2, 3 ... on that connection (the
 * frame id), the server keeps the replies a retransmission may need, an
 * end of stream without BYE leaves the session waiting for a RESUME, and
 * the client sends BYE before it closes for good.
 */
#define QFT_FEAT_RESUME    0x00000040u
/*
 * BOOTID: the HELLO reply ends with the server host's boot id (a string
 * of 1 to QFT_MAX_BOOT_ID bytes, /proc/sys/kernel/random/boot_id on
 * Linux), present only when this bit is set in the reply's features.  A
 * client whose server died asks the new one, and when both name the
 * same boot, data the old server acknowledged is still in the host's
 * page cache: the client carries its session over (docs/protocol.md,
 * "Carrying a session over to a new server").
 */
#define QFT_FEAT_BOOTID    0x00000080u
#define QFT_MAX_BOOT_ID    64u
/*
 * CRED: the server acts as each caller (docs/protocol.md, "Acting as the
 * caller").  The client asks on a mount other local users share
 * (-o allow_other); a server running as root that can switch its
 * threads' credentials grants it.  Where granted, a request marked
 * QFT_F_CRED runs with that caller's fsuid, fsgid and groups, one on an
 * open handle without the mark with those it was opened with, and one
 * that names a path and carries none is refused (EACCES).  A client that
 * asked and finds the server running as root without granting it fails
 * the handshake: every local user would act as root.
 */
#define QFT_FEAT_CRED      0x00000100u
/*
 * LOCKS: the server takes flock(2), POSIX record and OFD locks for the
 * client on the files its handles have open (LOCK, GETLK; docs/protocol.md,
 * "Locks"), so that they conflict with other clients and with processes on
 * the server host.  A client without it keeps locks local to its mount.
 */
#define QFT_FEAT_LOCKS     0x00000200u
/*
 * COPY: the client may send QFT_OP_COPY, which copies a range of one
 * open file into another on the server (its copy_file_range, which
 * shares the blocks where its file system can, else its own reads and
 * writes), so a copy within the mount moves no file data over the link.
 * An older server closes the connection on the opcode: never sent
 * without this bit.
 */
#define QFT_FEAT_COPY      0x00000400u
/*
 * HOLES: the client may send QFT_OP_SEEK, answered by the server's own
 * lseek(SEEK_DATA / SEEK_HOLE) on the handle's file, so that holes are
 * seen through the mount as they are on the server.
 */
#define QFT_FEAT_HOLES     0x00000800u
/*
 * FETCH (walk-ahead): the client may send QFT_OP_FETCH, which reads the
 * contents of several small files of one directory in one round trip
 * (docs/protocol.md, "Walk-ahead").  A server that does not know the
 * opcode cannot decode the frame, so the client sends it only where this
 * was agreed.
 */
#define QFT_FEAT_FETCH     0x00001000u
/*
 * NOATIME: the client was mounted -o noatime, so reading through
 * this session must not change a file's access time on the server
 * either (executing a program reads it).  A server that grants it opens
 * the files of OPEN with O_NOATIME where the kernel lets it (the owner,
 * or CAP_FOWNER), and reads as before elsewhere.  Nothing in a frame
 * changes.
 */
#define QFT_FEAT_NOATIME   0x00004000u
/*
 * TCPCC: the HELLO reply ends (after the boot id, when that is there)
 * with the TCP congestion control the server's socket uses for what it
 * sends on this connection (1 to QFT_MAX_TCPCC bytes of [a-z0-9_]),
 * present only when this bit is set in the reply's features: granted
 * on TCP connections, for the client's statistics and log.
 */
#define QFT_FEAT_TCPCC     0x00008000u
#define QFT_MAX_TCPCC      15u
/*
 * STRIPES: bulk data may also travel over up to QFT_MAX_STRIPES - 1
 * more connections (docs/protocol.md, "Striping").  Asked on the bulk
 * HELLO; granted on a resumable TCP session, whose listener takes them:
 * each is authenticated like a resumed connection and its first frame
 * is STRIPE with count 0 (a join).  A STRIPE with count n on bulk then
 * takes n joined ones, and each side sends striped from the frame after
 * its STRIPE (request, reply) and reads striped from the frame after
 * the peer's.
 */
#define QFT_FEAT_STRIPES   0x00010000u
#define QFT_MAX_STRIPES    8u
/* STRIPE request flag: the user asked for the stripes (-o streams=N):
 * the server sends on all of them too, whatever its congestion control. */
#define QFT_STRIPE_ALL     0x0001u
#define QFT_STRIPE_KNOWN   0x0001u
#define QFT_FEAT_KNOWN     0x0001dfffu
#define QFT_PROGRESS_INTERVAL_MS 1000u

/*
 * Resuming (QFT_FEAT_RESUME).  The client never sends request n on a
 * connection while request n - QFT_RESUME_WINDOW (or an earlier one) of
 * it is unanswered, so the server keeps at most that many replies per
 * connection.  The grace a session waits for its client is capped at
 * QFT_RESUME_MAX_S on both sides.
 */
#define QFT_RESUME_WINDOW  1024u
#define QFT_RESUME_MAX_S   3600u
/* RESUME request opflags: this connection takes the meta lane's place
 * (otherwise bulk's). */
#define QFT_RESUME_META    0x0001u
#define QFT_RESUME_KNOWN   0x0001u
/* RESUME reply opflags: change notifications were lost while the
 * session was detached; the client must drop every lease. */
#define QFT_RESUME_REP_LOST_NOTIFY 0x0001u
#define QFT_RESUME_REP_KNOWN       0x0001u

/*
 * Attaching over ssh (docs/protocol.md, "Attaching over ssh"): a
 * resumable session's id, reported in the greeting to a client that can
 * attach, is this many lowercase hex digits; `qftfs-server --attach ID`
 * exits with QFT_ATTACH_EXIT_GONE (after the line "QFTFS <version> gone")
 * when no such session runs any more.
 */
#define QFT_ATTACH_ID_HEX    32u
#define QFT_ATTACH_EXIT_GONE 3

enum qft_op {
	QFT_OP_HELLO       = 1,  /* version handshake, first frame each way */
	QFT_OP_LSTAT       = 2,  /* attributes of a path, not following it */
	QFT_OP_FSTAT       = 3,  /* attributes of an open handle */
	QFT_OP_SETATTR     = 4,
	QFT_OP_OPENDIR     = 5,
	QFT_OP_READDIR     = 6,
	QFT_OP_MKDIR       = 7,
	QFT_OP_RMDIR       = 8,
	QFT_OP_UNLINK      = 9,
	QFT_OP_CREATE      = 10,
	QFT_OP_OPEN        = 11,
	QFT_OP_READ        = 12,
	QFT_OP_WRITE       = 13,
	QFT_OP_FLUSH       = 14, /* make a handle's writes durable (close) */
	QFT_OP_FSYNC       = 15,
	QFT_OP_CLOSE       = 16, /* release a file or directory handle */
	QFT_OP_RENAME      = 17,
	QFT_OP_SYMLINK     = 18,
	QFT_OP_READLINK    = 19,
	QFT_OP_LINK        = 20,
	QFT_OP_STATFS      = 21,
	QFT_OP_FALLOCATE   = 22,
	QFT_OP_GETXATTR    = 23,
	QFT_OP_SETXATTR    = 24,
	QFT_OP_LISTXATTR   = 25,
	QFT_OP_REMOVEXATTR = 26,
	QFT_OP_MKNOD       = 27,
	QFT_OP_PING        = 28, /* keepalive and round-trip probe; no fields */
	QFT_OP_SCAN        = 29, /* a subtree's names and attributes */
	/* Change notification (QFT_FEAT_NOTIFY): */
	QFT_OP_NOTIFY      = 30, /* server -> client, QFT_F_NOTIFY, id 0 */
	QFT_OP_UNWATCH     = 31, /* the client no longer needs a watch */
	QFT_OP_SYNCFS      = 32, /* make everything written durable; no fields */
	/* server -> client, QFT_F_PROGRESS (QFT_FEAT_PROGRESS): still
	 * working on request `id`; no fields */
	QFT_OP_PROGRESS    = 33,
	/* Resuming (QFT_FEAT_RESUME): */
	QFT_OP_RESUME      = 34, /* first frame of a resumed connection */
	QFT_OP_BYE         = 35, /* the client ends the session; no fields */
	/* Locks (QFT_FEAT_LOCKS): never waits; see QFT_LOCK_* below */
	QFT_OP_LOCK        = 36, /* take, change or drop a lock */
	QFT_OP_GETLK       = 37, /* the lock that would conflict, if any */
	/* 38: reserved for locks */
	/* Server-side copy and holes (QFT_FEAT_COPY, QFT_FEAT_HOLES): */
	QFT_OP_COPY        = 39, /* a range of one open file into another */
	QFT_OP_SEEK        = 40, /* lseek SEEK_DATA / SEEK_HOLE on a handle */
	/* Walk-ahead (QFT_FEAT_FETCH): the contents of named small files of
	 * one directory, read without handles (42 is kept for it). */
	QFT_OP_FETCH       = 41,
	/* Striping (QFT_FEAT_STRIPES): join a session's bulk stream, or
	 * take the joined connections as stripes (count). */
	QFT_OP_STRIPE      = 43,
	QFT_OP__COUNT
};

/*
 * Fixed protocol error set.  Host errno values are mapped onto it by
 * errmap.c on the sending side and back on the receiving side, so the two
 * ends need not share errno numbering; anything unknown becomes QFT_EIO.
 * The values are part of the wire format: never renumber, only append.
 */
enum qft_status {
	QFT_OK = 0,
	QFT_EPERM = 1,
	QFT_ENOENT = 2,
	QFT_EIO = 3,
	QFT_EBADF = 4,
	QFT_ENOMEM = 5,
	QFT_EACCES = 6,
	QFT_EBUSY = 7,
	QFT_EEXIST = 8,
	QFT_EXDEV = 9,
	QFT_ENOTDIR = 10,
	QFT_EISDIR = 11,
	QFT_EINVAL = 12,
	QFT_ENFILE = 13,
	QFT_EMFILE = 14,
	QFT_ETXTBSY = 15,
	QFT_EFBIG = 16,
	QFT_ENOSPC = 17,
	QFT_ESPIPE = 18,
	QFT_EROFS = 19,
	QFT_EMLINK = 20,
	QFT_ERANGE = 21,
	QFT_ENAMETOOLONG = 22,
	QFT_ENOSYS = 23,
	QFT_ENOTEMPTY = 24,
	QFT_ELOOP = 25,
	QFT_ENODATA = 26,
	QFT_EOVERFLOW = 27,
	QFT_EPROTO = 28,
	QFT_EOPNOTSUPP = 29,
	QFT_EDQUOT = 30,
	QFT_ESTALE = 31,
	QFT_ETIMEDOUT = 32,
	QFT_EAGAIN = 33,
	QFT_EINTR = 34,
	QFT_E2BIG = 35,
	QFT_ENXIO = 36,
	QFT_ENODEV = 37,
	QFT_ECANCELED = 38,
	QFT_STATUS__COUNT
};

/* Open flags (OPEN, CREATE): a fixed set, mapped from and to host O_*. */
#define QFT_O_ACCMODE   0x0003u
#define QFT_O_RDONLY    0x0000u
#define QFT_O_WRONLY    0x0001u
#define QFT_O_RDWR      0x0002u
#define QFT_O_APPEND    0x0008u
#define QFT_O_TRUNC     0x0010u
#define QFT_O_EXCL      0x0020u
#define QFT_O_SYNC      0x0040u
#define QFT_O_DSYNC     0x0080u
#define QFT_O_NOATIME   0x0100u
/*
 * No host flag: the client will not wait for this handle's data to be
 * durable at close (commit=async, commit=none), so the server does not
 * pace its WRITEs to the disk (no write-out behind the stream); FLUSH and
 * FSYNC still sync when asked.  Valid only once HELLO agreed on
 * QFT_FEAT_LAZY.
 */
#define QFT_O_LAZY      0x0200u
#define QFT_O_KNOWN     0x03fbu

/*
 * Locks (QFT_FEAT_LOCKS).  A lock field is
 *
 *   u64 owner, u64 start, u64 end, u32 type, u32 pid
 *
 * `owner` is the client's lock owner (FUSE's lock_owner): POSIX record
 * locks of one owner on one file merge, split and are dropped together;
 * an OFD or flock owner is one open file.  [start, end] is inclusive,
 * end <= INT64_MAX (INT64_MAX: to the end of the file, however long);
 * start <= end.  `pid` is informational: the client's process in a
 * request, 0 (unknown, perhaps on another host) in a GETLK reply.  LOCK
 * never waits: a conflicting lock is EAGAIN, and a client that must wait
 * asks again (docs/protocol.md, "Locks").
 */
#define QFT_LK_UNLCK    0u
#define QFT_LK_RDLCK    1u
#define QFT_LK_WRLCK    2u
/* LOCK opflags */
#define QFT_LOCK_FLOCK  0x0001u /* a flock(2) lock: whole file, own kind */
/* the owner closed the file (FLUSH with its lock owner, or the release
 * of a flock's file): every lock of the owner on the file goes, of both
 * kinds; type must be UNLCK */
#define QFT_LOCK_CLOSE  0x0002u
#define QFT_LOCK_KNOWN  0x0003u

/* SETATTR: which fields to change. */
#define QFT_SET_MODE      0x0001u
#define QFT_SET_UID       0x0002u
#define QFT_SET_GID       0x0004u
#define QFT_SET_SIZE      0x0008u
#define QFT_SET_ATIME     0x0010u
#define QFT_SET_MTIME     0x0020u
#define QFT_SET_ATIME_NOW 0x0040u
#define QFT_SET_MTIME_NOW 0x0080u
#define QFT_SET_KNOWN     0x00ffu

/* RENAME flags. */
#define QFT_RENAME_NOREPLACE 0x0001u
#define QFT_RENAME_EXCHANGE  0x0002u
#define QFT_RENAME_KNOWN     0x0003u

/* FALLOCATE modes. */
#define QFT_FALLOC_KEEP_SIZE  0x0001u
#define QFT_FALLOC_PUNCH_HOLE 0x0002u
#define QFT_FALLOC_ZERO_RANGE 0x0004u
#define QFT_FALLOC_KNOWN      0x0007u

/* SETXATTR flags. */
#define QFT_XATTR_CREATE  0x0001u
#define QFT_XATTR_REPLACE 0x0002u
#define QFT_XATTR_KNOWN   0x0003u

/* READDIR request flags. */
#define QFT_READDIR_PLUS  0x0001u /* include attributes of each entry */
#define QFT_READDIR_WATCH 0x0002u /* watch the directory (FEAT_NOTIFY) */
#define QFT_READDIR_KNOWN 0x0003u

/* READDIR reply flags. */
#define QFT_READDIR_EOF     0x0001u
#define QFT_READDIR_WATCHED 0x0002u /* the watch is in place */
#define QFT_READDIR_REPLY_KNOWN 0x0003u

/* FSYNC flags. */
#define QFT_FSYNC_DATASYNC 0x0001u
#define QFT_FSYNC_KNOWN    0x0001u

/*
 * COPY: at most this many bytes per request (the reply's count may be
 * less: the source ends, or the server stopped early), so one request
 * stays a bounded piece of work however long the application's copy.
 * No flags are defined yet (opflags 0).
 */
#define QFT_MAX_COPY       (1u << 30)
#define QFT_COPY_KNOWN     0x0000u

/* SEEK: what to look for from `offset`; exactly one of the two. */
#define QFT_SEEK_DATA      0x0001u
#define QFT_SEEK_HOLE      0x0002u
#define QFT_SEEK_KNOWN     0x0003u

/* FLUSH flags. */
#define QFT_FLUSH_NOSYNC   0x0001u /* report errors but skip fdatasync */
#define QFT_FLUSH_KNOWN    0x0001u

/*
 * OPEN reply flags.  An OPEN with a non-zero `length` of a regular file
 * opened for reading gets the file's first bytes with the reply, read
 * right after the open; a read error fails nothing, it only leaves DATA
 * clear (the client then READs as usual).
 *   DATA  `data` holds the file's bytes from offset 0 (maybe none);
 *   EOF   with DATA: the read was short, so `data` is the whole file as
 *         it was when read.
 */
#define QFT_OPEN_DATA      0x0001u
#define QFT_OPEN_EOF       0x0002u
#define QFT_OPEN_REP_KNOWN 0x0003u

/*
 * SCAN request flags.  WATCH: watch every directory listed (under
 * QFT_FEAT_NOTIFY), each one confirmed by a WATCHED record.
 */
#define QFT_SCAN_WATCH     0x0001u
#define QFT_SCAN_KNOWN     0x0001u

/*
 * SCAN reply flags.
 *   EOF        the scan is over: no further SCAN returns records;
 *   TRUNCATED  with EOF: the server's limits cut the scan short, so some
 *              directories announced were never listed (they have no
 *              DIR_END record: the client must not treat them as known).
 */
#define QFT_SCAN_EOF       0x0001u
#define QFT_SCAN_TRUNCATED 0x0002u
#define QFT_SCAN_REP_KNOWN 0x0003u

/*
 * SCAN reply data: u32 base (directory indexes announced before this
 * reply; the scanned directory is index 0, so base >= 1), then records,
 * each a u8 kind and its fields:
 *   ENTRY    u32 parent index, string name, attr.  An entry that is a
 *            directory is announced by it: it gets the next index.
 *   DIR_END  u32 index, u32 status: the directory's listing is over;
 *            status 0 = every entry was sent (the listing is complete),
 *            else the protocol error that kept it from being complete.
 */
#define QFT_SCAN_REC_ENTRY   1u
#define QFT_SCAN_REC_DIR_END 2u
/*
 * SCAN with QFT_SCAN_WATCH under QFT_FEAT_NOTIFY: the directory with this
 * index is watched since before its entries were read, and still was when
 * its listing ended (sent right before its DIR_END).
 */
#define QFT_SCAN_REC_WATCHED 3u

/*
 * FETCH (QFT_FEAT_FETCH).  Request: path (a directory), length (the most
 * data of any one file, at most QFT_FETCH_FILE_MAX), data: 1 to
 * QFT_FETCH_MAX_NAMES names, each a string (u32 length, bytes), every
 * one a valid name.  Reply data: one record per name, in the request's
 * order, for as many names as fit QFT_MAX_DATA (a prefix of them):
 *   u32 status (enum qft_status; 0 = the file was read), and with 0:
 *   attr (of the open file), u32 flags, blob data (u32 length <= the
 *   request's, bytes from offset 0).
 * EOF in flags: the read was short, so `data` is the whole file as it
 * was when read.  A name that is not a regular file is QFT_EINVAL; a
 * symlink is never followed.
 */
#define QFT_FETCH_FILE_MAX  ((uint64_t)256 << 10)
#define QFT_FETCH_MAX_NAMES 256u
#define QFT_FETCH_EOF       0x0001u
#define QFT_FETCH_KNOWN     0x0001u

/*
 * File modes use the traditional octal layout (S_IFREG 0100000, permission
 * bits 07777), which every POSIX system shares in practice; the decoder
 * accepts only the seven standard file types.
 */
#define QFT_S_IFMT   0170000u
#define QFT_S_IFSOCK 0140000u
#define QFT_S_IFLNK  0120000u
#define QFT_S_IFREG  0100000u
#define QFT_S_IFBLK  0060000u
#define QFT_S_IFDIR  0040000u
#define QFT_S_IFCHR  0020000u
#define QFT_S_IFIFO  0010000u

/*
 * Attribute flags: hints the server adds to an object's attributes.
 * NOXATTR says the object had no extended attributes when it was
 * stat'ed, so the client may answer getxattr/listxattr for it locally for
 * as long as it trusts the attributes themselves (ls -l asks for two
 * xattrs of every entry; at 40 ms that was most of its time).
 */
#define QFT_ATTR_NOXATTR 0x0001u
/*
 * FOLLOWED (servers started with --follow-symlinks only): the name is a
 * symlink and these are the attributes of what it leads to, an object
 * that may live in another directory or outside the root, or its own
 * while it leads nowhere; no watch on the name's directory reports a
 * change of either, so a client trusts them (and the name's type) for its
 * timeouts only, never for a directory lease.
 */
#define QFT_ATTR_FOLLOWED 0x0002u
#define QFT_ATTR_KNOWN   0x0003u

/*
 * NOTIFY kinds (docs/protocol.md, "Change notification").
 *   CHANGED  entries of directory `ino` changed: `name` (created, removed,
 *            renamed, its attributes or data), or anything in it when the
 *            name is empty; the directory's own attributes with it;
 *   GONE     the watch on `ino` ended (removed, moved, unmounted, evicted
 *            by the cap, UNWATCH raced with it); name empty;
 *   ALL      the server lost track: every watch ended; ino 0, name empty.
 */
#define QFT_NOTIFY_CHANGED 1u
#define QFT_NOTIFY_GONE    2u
#define QFT_NOTIFY_ALL     3u

/* Size of struct qft_attr on the wire. */
#define QFT_ATTR_WIRE_SIZE 92u
/* Size of struct qft_statfs on the wire. */
#define QFT_STATFS_WIRE_SIZE 72u

#endif /* QFT_PROTOCOL_H */
