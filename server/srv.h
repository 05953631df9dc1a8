/* SPDX-License-Identifier: MIT */
/*
 * State of one qftfs-server connection, shared by the server's modules.
 * Each connection has its own thread and its own struct srv: nothing here
 * is locked.  What the connections of a session share (the root, the
 * options, the change notification state `watch`) is immutable or locks
 * itself (watch.h).
 */
#ifndef SRV_SRV_H
#define SRV_SRV_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "chan.h"
#include "cred.h"
#include "handle.h"
#include "lock.h"
#include "msg.h"
#include "path.h"
#include "protocol.h"
#include "pulse.h"
#include "replay.h"
#include "resume.h"
#include "uring.h"
#include "watch.h"

/*
 * The I/O engine's pool: every frame is received into one of these
 * buffers (a WRITE's data is written from there, a READ's data read into
 * another), so they bound the memory of requests in flight, and an empty
 * pool is what stops the server reading the socket.
 */
#define SRV_XFER_BUFS 8u

/* A handle with operations in the engine (xfer.c). */
struct srv_xfer_stream {
	uint64_t handle;               /* 0 when unused */
	struct srv_uring_stream st;
};

struct srv {
	struct srv_root root;
	struct srv_handles handles;
	struct qft_chan chan;
	bool hello_done;     /* the first frame was a matching HELLO */
	int fatal;           /* -errno: close the connection after this reply */
	bool no_compress;    /* --no-compress: HELLO refuses QFT_FEAT_LZ4 */

	/* Change notification: the session's watches (shared with the other
	 * connection, locked inside; NULL in harnesses without one), whether
	 * this connection is the meta one, and whether its HELLO was granted
	 * QFT_FEAT_NOTIFY (READDIR honours QFT_READDIR_WATCH). */
	struct srv_watch *watch;
	bool is_meta;
	bool notify;

	/* HELLO granted QFT_FEAT_PROGRESS: the syncs send PROGRESS frames
	 * while they run (pulse.h).  NULL otherwise; freed by the loop. */
	struct srv_pulse *pulse;

	/* HELLO granted QFT_FEAT_LAZY: OPEN and CREATE accept QFT_O_LAZY. */
	bool lazy;

	/* HELLO granted QFT_FEAT_LOCKS: the locks held for the client on
	 * this connection's handles (lock.h), kept while the session is. */
	bool locks_on;
	struct srv_locks locks;

	/* HELLO granted QFT_FEAT_CRED: requests run as their callers
	 * (cred.h), and `creds` holds the identities the open handles were
	 * opened with. */
	bool cred_on;
	struct srv_creds creds;
	/* HELLO granted QFT_FEAT_NOATIME: OPEN's files read without
	 * changing their access time (the client is mounted noatime). */
	bool noatime;
	/* --allow-devices: MKNOD may make block and character devices
	 * (which OPEN still never opens). */
	bool allow_devices;

	/* Resuming (resume.h, replay.h).  `resume`: the session's state
	 * when it may outlive its connections (--session over TCP with
	 * --resume above 0), else NULL; `lane`: which one this is.  Once
	 * HELLO granted QFT_FEAT_RESUME, `replay` numbers the requests and
	 * keeps their replies (freed by the owner with the rest).
	 * `features`: what HELLO granted, told again in a RESUME reply.
	 * `link_dead`: a send failed or the connection was shut down on
	 * purpose; replies are kept, not sent, until the lane resumes.
	 * `bye`: the client ended the session (BYE). */
	struct srv_resume *resume;
	unsigned lane;
	struct srv_replay *replay;
	uint32_t features;
	bool link_dead;
	bool bye;

	/* File data of regular files goes through the engine (xfer.c). */
	enum srv_io_backend io_backend;  /* what --io / QFTFS_SERVER_IO chose */
	struct srv_uring *io;
	struct srv_uring_buf *rx;      /* the pool buffer `in` points into */
	size_t read_head;              /* READ reply bytes before its data */
	size_t write_pad;              /* bytes before a received frame in
					* its buffer: a WRITE's data then
					* starts on a page (direct I/O) */
	struct srv_xfer_stream streams[SRV_XFER_BUFS];

	/*
	 * Buffers reused across requests, so the steady state allocates
	 * nothing: the received frame (a view of s->rx, never freed as a
	 * qbuf), the encoded reply, and the storage that reply fields point
	 * into until the reply is sent.
	 */
	struct qbuf in;
	struct qbuf out;
	struct qbuf dirents;           /* READDIR entries */
	uint8_t *data;                 /* READ data, GETXATTR/LISTXATTR values */
	size_t data_cap;
	char link[QFT_MAX_PATH + 1];   /* READLINK target */
	char errmsg[QFT_MAX_ERRMSG];   /* reply error text */
	char tcpcc[QFT_MAX_TCPCC + 1]; /* HELLO reply: congestion control */
};

#endif /* SRV_SRV_H */
