/* SPDX-License-Identifier: MIT */
/*
 * The client's connection to its server: pipelined requests over a link
 * that can die and be replaced.
 *
 * Any number of threads call qc_call() at once; each request goes out as
 * soon as it is encoded and the caller sleeps until the link's reader
 * thread hands it the reply carrying its request id.  That is what keeps
 * many requests in flight on one stream.  The server executes requests in
 * the order they arrive, which the handle allocator relies on (see
 * qc_handle_free) and which makes a request that stays unanswered past its
 * deadline mean a stuck link or server.
 *
 * Links.  A connection owns one current link at a time: a stream (from a
 * qc_endpoint the transport made), its record keys, its reader thread and
 * a generation number.  A link dies when the stream fails, when the server
 * sends garbage, or when the watchdog finds a request older than the
 * deadline (-o timeout=) or nothing received for that long while anything
 * was outstanding; the stream is then shut down, every waiter fails, and
 * one line names the reason.  With reconnect on, the watchdog thread then
 * builds a new link through the transport's open() with backoff (1, 2, 4
 * ... 30 s); requests made meanwhile wait for it until their deadline.
 * With reconnect off, every later call fails with -EIO at once.
 *
 * Resuming (-o resume=SECS above 0, docs/protocol.md "Resuming a
 * session").  Where the transport's endpoint can be reached again
 * without a new login (a direct TCP data plane: qc_endpoint.resumable)
 * and both ends agreed on QFT_FEAT_RESUME, each lane numbers its
 * requests 1, 2, 3 ... and keeps a copy of each until its reply came
 * (net/resume.c).  A link that dies then keeps its waiters and its
 * generation: the watchdog connects again to the same server (reattach),
 * proves the session with the resume key, sends RESUME and the kept
 * requests again, and the same handles go on.  Calls made meanwhile wait
 * for it, past their deadline, up to the grace.  When the grace passes,
 * every waiter fails with -EIO and new calls fail at once until a new
 * link is up; when the server refuses the resume (gone, ESTALE), the
 * session is given up at once and a new one made as above.
 *
 * Carrying a session over (docs/protocol.md, "Carrying a session over to
 * a new server").  When a resumable session's server is gone (its port
 * refuses the resume), the host may still be up with what the server
 * acknowledged in its page cache.  The watchdog then starts a new server
 * (the transport's open()) and, when its HELLO names the same boot of
 * the host, keeps the session's generation: the layer above binds every
 * open handle again on the new server under its old number (the
 * rebind hook, below), and the requests the old server did not answer
 * are sent again where running them twice changes nothing (WRITE at an
 * offset, FLUSH, FSYNC, reads, attribute changes to given values); the
 * others (namespace changes, creates, appends) fail with -EIO, since
 * nobody can know whether the old server ran them.  Callers wait
 * meanwhile as for a resume, within the same grace.  A host that booted
 * since, or a new server that cannot take the session, gives the
 * session up as above.
 *
 * Handles are per link: a handle number means something only on the link
 * (generation) it was opened on.  Calls that name a handle therefore name
 * the generation too (qc_call_gen, qc_call_async, qc_send_noreply) and are
 * not sent at all, failing with -ENOTCONN, when that link is no longer the
 * live one.  -ENOTCONN never comes from the server (the status set has no
 * such code), so callers can tell "this handle's link is gone" from any
 * answer; it must be turned into EIO before it reaches a user.
 *
 * Two streams.  A link has a bulk stream and, when the transport and the
 * server provide one, a meta stream, so that a directory listing never
 * waits behind megabytes of file data queued in a socket buffer.  Requests
 * that name a file handle (OPEN, CREATE, READ, WRITE, FLUSH, FSYNC, FSTAT,
 * FALLOCATE, SETATTR, CLOSE of it) go on bulk; requests that name no handle
 * (qc_call: LSTAT, namespace changes, STATFS, xattrs), OPENDIR and
 * everything on a directory handle go on meta.  The server keeps a handle
 * table per stream, so a handle must stay on the stream that bound it:
 * net/handle.c remembers which handles OPENDIR bound (until
 * qc_handle_free).  Requests on one stream keep their order; requests on
 * different streams are ordered only by waiting for replies.  The link
 * dies, with all its waiters, when either stream fails.  A meta stream
 * whose HELLO meets end of stream (the server does not serve it) is dropped
 * and the link runs on bulk alone, as one stream always did.
 *
 * Keepalive.  When nothing has been sent or received for -o keepalive=
 * seconds and nothing is outstanding, a PING goes out from a thread of its
 * own (so that a send blocked on a full socket never stalls the watchdog).
 * Its answer is due within the deadline like any other.  It goes on
 * every stream of the link, as each can fail on its own.
 *
 * Lifecycle: qc_conn_new (with the first endpoint), qc_conn_hello (before
 * mounting, still single threaded), qc_conn_start (after fuse_daemonize,
 * which forks: threads must be created in the process that keeps
 * running), then calls, then qc_conn_shutdown and qc_conn_free.
 *
 * Calls and replies are declared in net/call.h, handle numbers in
 * net/handle.h; this header includes both.  net/conn_internal.h lists the
 * files of the implementation and the job of each.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_CONN_H
#define QC_CONN_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "buf.h"
#include "lz4chunk.h"
#include "msg.h"
#include "pool.h"

#include "net/call.h"
#include "net/handle.h"

struct qc_conn;

/*
 * What one link runs over, as the transport made it: the bulk stream and,
 * when the transport has one, the meta stream (see "Two streams" above).
 */
struct qc_endpoint {
	int fd;                 /* connected stream; the link takes it */
	bool sealed;            /* keys are valid: seal the records */
	enum qft_cipher cipher;
	struct qft_session_keys keys; /* wiped once the link has its seals */
	void *priv;             /* the transport's state, handed to close */
	/* The meta stream, when `meta`: same cipher, its own keys. */
	bool meta;
	int meta_fd;
	struct qft_session_keys meta_keys;
	/* The transport can reattach to this endpoint's server (ops
	 * reattach): a link over it offers QFT_FEAT_RESUME. */
	bool resumable;
};

/* How to make and unmake endpoints; called from the watchdog thread after
 * qc_conn_start, so both must log rather than print, and both must return
 * within bounded time whatever the network does. */
struct qc_transport_ops {
	/*
	 * A fresh endpoint for a new link (start the server, log in,
	 * handshake): 0, or -errno with the reason already logged.  On
	 * success ep->fd is open and ep->priv set for close.
	 */
	int (*open)(void *ctx, struct qc_endpoint *ep);
	/*
	 * After the link's stream has been closed: ends what open started
	 * (the server process, the ssh session), waiting at most
	 * `timeout_ms` for the server to go.  `clean` is true when the
	 * server closed its side by itself, after answering everything.
	 */
	void (*close)(void *ctx, struct qc_endpoint *ep, int timeout_ms,
		      bool clean);
	/*
	 * Optional: the meta stream of an endpoint open() made without one
	 * (a second TCP connection and its own handshake), called after the
	 * bulk stream's HELLO.  0 with ep->meta set, or -errno (logged at
	 * most as a notice): the link then runs on one stream.
	 */
	int (*open_meta)(void *ctx, struct qc_endpoint *ep);
	/*
	 * Optional, for endpoints marked resumable: one more stream to the
	 * server of ep (ep->priv as open() left it), authenticated with the
	 * resume key, for resuming a lane.  0 with *fd and *keys set;
	 * -ECONNREFUSED or -EACCES when the session cannot be resumed (the
	 * server is gone, the proof was refused), another -errno when a
	 * later attempt may work.  Bounded in time (a few seconds).
	 */
	int (*reattach)(void *ctx, struct qc_endpoint *ep, int *fd,
			struct qft_session_keys *keys);
	/*
	 * Optional: as reattach, but only ever a direct connection to the
	 * server of ep (for a stripe: net/stripe.c), -ENOTSUP where the
	 * session is not reached directly.  May be called from several
	 * threads at once.
	 */
	int (*join)(void *ctx, const struct qc_endpoint *ep, int *fd,
		    struct qft_session_keys *keys);
};

/*
 * Change notification (docs/protocol.md, "Change notification"): the
 * server says that directory `dir_ino` changed (QFT_NOTIFY_CHANGED; `name`
 * the entry, or empty for anything in it), that its watch ended
 * (QFT_NOTIFY_GONE), or that every watch ended (QFT_NOTIFY_ALL, dir_ino
 * 0), which the connection (net/link.c) also delivers itself when a link
 * on which the feature was granted dies: no lease survives a reconnect.
 * `name` is NUL-terminated, namelen bytes (0 to QFT_MAX_NAME), a valid
 * name when not empty, and lives only during the call.
 *
 * Called on a link's reader thread under the same rules as qc_done_fn:
 * short, never waiting, no qc_call, no lock anyone holds while sending;
 * and, for the ALL of a dying link, on whichever thread failed it.
 * Notifications of one link arrive in the order the server sent them,
 * and in order with the replies of the stream they travel on (meta when
 * there is one): a client can thus tell a listing that a notification
 * overtook (protocol.md says how it must).
 */
typedef void qc_notify_fn(void *ctx, uint64_t dir_ino, uint32_t kind,
			  const char *name, size_t namelen);

/*
 * Carrying a session over to a new server (see "Carrying a session
 * over" above).  The hook is called on the watchdog thread with no lock
 * held, once the new server is up and before anything else reaches it:
 * for each handle of generation `gen` the caller still uses, it builds
 * the OPEN (file: path, open flags without O_CREAT, O_EXCL and O_TRUNC)
 * or OPENDIR that binds it again, under the same handle number, and
 * hands it to qc_carry_open, then decides from the reply's attributes
 * whether the file is still the one it had open.  It must not wait for
 * anything but those calls, nor make any other call on the connection.
 */
struct qc_carry;
typedef void qc_rebind_fn(void *ctx, uint64_t gen, struct qc_carry *cy);

/*
 * Sends `m` (OPEN or OPENDIR of m->handle) to the new server and waits
 * for its reply.  0 with *rep filled (free it with qc_reply_free);
 * -EALREADY when the handle needs no rebinding (a request the old
 * server never answered binds or closes it); -ENOTCONN when the new
 * link failed (the hook should return: the carry is tried again);
 * another -errno from the server (the handle then stays unbound, and
 * what was to be sent again on it fails with -EIO).
 */
int qc_carry_open(struct qc_carry *cy, struct qft_msg *m,
		  struct qc_reply *rep);
/*
 * The file of `handle` is not the one that was open (or may not be
 * carried over): the handle is closed again on the new server if it was
 * bound, and what was to be sent again on it fails with -EIO.
 */
void qc_carry_drop(struct qc_carry *cy, uint64_t handle);

struct qc_conn_opts {
	int timeout_s;          /* per-request deadline, > 0 */
	int keepalive_s;        /* quiet seconds before a PING; 0 = none */
	bool reconnect;         /* make a new link after a loss */
	/* -o resume=: seconds a lost link's session is resumed for, 0 to
	 * QFT_RESUME_MAX_S; 0: never (a loss fails the waiters). */
	int resume_s;
	/* -o streams=: the bulk stream's connections, 0 (auto: striped on a
	 * far link where a side lacks bbr) or 1 to QFT_MAX_STRIPES. */
	unsigned streams;
	enum qft_lz4_mode compress; /* -o compress=: asked for in each HELLO */
	const char *host;       /* for messages ("reconnected to HOST") */
	const struct qc_transport_ops *ops;
	void *ops_ctx;
	/* Change notification: asked for in each HELLO when want_notify;
	 * NOTIFY frames are accepted only on streams where it was granted,
	 * and handed to notify (may be NULL) with notify_ctx. */
	bool want_notify;
	/* -o follow_symlinks: asked for in each HELLO, and a server that
	 * does not grant it fails the handshake. */
	bool want_follow;
	/* -o allow_other: QFT_FEAT_CRED asked for in each HELLO, and a
	 * server running as root that does not grant it fails the
	 * handshake (a server of another user acts as that user anyway).
	 * Requests then carry their caller (call.h, qc_call_act_as). */
	bool want_cred;
	/* -o noatime: QFT_FEAT_NOATIME asked for in each HELLO (an old
	 * server reads as before). */
	bool want_noatime;
	/* -o locks=server (the default): QFT_FEAT_LOCKS asked for in each
	 * HELLO (qc_conn_locks says whether the live link has it). */
	bool want_locks;
	qc_notify_fn *notify;
	void *notify_ctx;
	/* Carrying a session over to a new server: NULL when the layer
	 * above cannot bind its handles again (a session whose server
	 * dies is then given up). */
	qc_rebind_fn *rebind;
	void *rebind_ctx;
};

#define QC_TIMEOUT_DEFAULT   30
#define QC_KEEPALIVE_DEFAULT 10
#define QC_RESUME_DEFAULT    120

/* How long the first HELLO may take (a server that has just started, on
 * a slow board), and how long a server's exit is waited for once its
 * connection ends, before it is killed: the same for every endpoint and
 * for the unmount. */
#define QC_HELLO_TIMEOUT_S   30
#define QC_REAP_WAIT_MS      5000

/*
 * A connection whose first link runs over `ep` (taken over: its fd and
 * keys, which are wiped, whatever the outcome).  `o` is copied; host and
 * ops_ctx must outlive the connection.
 */
int qc_conn_new(struct qc_conn **out, const struct qc_conn_opts *o,
		struct qc_endpoint *ep);
/* Frees everything; after qc_conn_shutdown (or instead of it before
 * qc_conn_start).  Closes the last link's transport if still open. */
void qc_conn_free(struct qc_conn *c);

/*
 * Version handshake on the first link, before qc_conn_start.  Returns 0,
 * -EPROTO with a message for the user in `msg` (the server's own, on a
 * mismatch), -EPIPE when the server closed the stream without answering
 * (it did not start), -ETIMEDOUT, or another error.
 */
int qc_conn_hello(struct qc_conn *c, int timeout_s, char *msg, size_t size);

/*
 * The effective uid and gid of the server process, from the HELLO reply
 * of the live link (of the last one while none is live; a reconnect
 * refreshes them): who owns what the server creates, so the client can
 * predict a new file's owner without asking.  A setgid parent directory
 * gives its own group instead, as on any Linux filesystem.  Valid after
 * qc_conn_hello succeeded.
 */
void qc_conn_server_ids(struct qc_conn *c, uint32_t *uid, uint32_t *gid);

/* Starts the reader, watchdog and keepalive threads. */
int qc_conn_start(struct qc_conn *c);

/*
 * Ends the connection: stops reconnecting, sends nothing more, lets the
 * server see end of stream and waits for it to close its side (which it
 * does after answering everything) for at most `timeout_ms` -- and at most
 * 1 s past the last frame received, so a stopped server or a dead link
 * cannot hold an unmount.  Wakes all waiters and closes the transport
 * (waiting at most `reap_ms` for the server to go).  Returns 0 when the
 * server closed cleanly, -ETIMEDOUT when it had to be cut off, -EIO when
 * the link was already dead.
 */
int qc_conn_shutdown(struct qc_conn *c, int timeout_ms, int reap_ms);

/* True while the connection is down other than by qc_conn_shutdown (lost
 * and not, or not yet, replaced). */
bool qc_conn_lost(struct qc_conn *c);

/*
 * Waits, at most the request deadline, for a live link and stores its
 * generation in *gen.  -EIO when there is none by then (or reconnecting is
 * off, or the connection is shutting down).
 */
int qc_conn_wait(struct qc_conn *c, uint64_t *gen);

/* Whether the server of the live link (of the last one while none is)
 * holds locks for us (QFT_FEAT_LOCKS). */
bool qc_conn_locks(struct qc_conn *c);

/* The live link's generation, or 0 when there is none right now. */
uint64_t qc_conn_gen(struct qc_conn *c);

/*
 * The HELLO features (QFT_FEAT_*) link `gen` agreed on for file handles
 * (its bulk lane), or 0 when gen is no longer the live link: whether a
 * request that needs one may be sent there at all (a server that did not
 * grant it may not know the opcode, and closes on it).
 */
uint32_t qc_conn_features(struct qc_conn *c, uint64_t gen);

/* The connection's "that handle's link is gone" is EIO to a user. */
static inline int qc_conn_user_err(int r)
{
	return r == -ENOTCONN ? -EIO : r;
}

/*
 * Requests made so far, by how their sender waited: `waited` counts
 * qc_call/qc_call_gen (the caller slept for the reply: one round trip on
 * its critical path), `async` qc_call_async, `noreply` qc_send_noreply.
 * Read without a lock; each value is exact, the three are not a snapshot.
 */
struct qc_conn_counts {
	uint64_t waited;
	uint64_t async;
	uint64_t noreply;
	/* Links made so far (the first, then one per reconnect). */
	uint64_t links;
	/* Requests sent and not answered yet, the age of the oldest (ms),
	 * and how many of them are WRITEs: the write-behind backlog. */
	uint64_t pending, oldest_ms, writes_pending;
	/* The live link's file data lane: payload bytes and as they went
	 * over the wire (lz4), each way. */
	uint64_t tx_bytes, tx_wire, rx_bytes, rx_wire;
	/* The link's state (QC_LINK_*), while resuming the milliseconds of
	 * grace left, and links resumed so far. */
	unsigned state;
	uint64_t resume_left_ms;
	uint64_t resumes;
	/* Sessions carried over to a new server after theirs died. */
	uint64_t restarts;
	/* Request copies kept for a resume: how many, how many bytes. */
	uint64_t kept, kept_bytes;
	/* The live link's TCP congestion control of file data, each way
	 * (uploads: this host's; downloads: the server's); "" when not
	 * TCP, not told, or no link is live.  QFT_TCPCC_NAME_MAX bytes. */
	char cc_up[16], cc_down[16];
	/* ... and its connections (1: not striped), how many carry each
	 * way's data now: this side's choice up, which grows when the
	 * connections lose packets; down, those the server's chunks came
	 * in on so far. */
	unsigned streams, streams_up, streams_down;
};

enum {
	QC_LINK_UP,             /* a live link */
	QC_LINK_RESUMING,       /* lost, its session being resumed */
	QC_LINK_DOWN,           /* lost, a new one not made yet */
};

void qc_conn_counts(struct qc_conn *c, struct qc_conn_counts *out);

/* Parses -o timeout= (> 0) and -o keepalive= (>= 0) as whole seconds, at
 * most a day; prints the reason and returns -EINVAL on a bad value. */
int qc_conn_parse_seconds(const char *name, const char *s, bool zero_ok,
			  int *out);

#endif /* QC_CONN_H */
