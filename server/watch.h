/* SPDX-License-Identifier: MIT */
/*
 * Change notification (docs/protocol.md, "Change notification"): the
 * server watches the directories a client lists with QFT_READDIR_WATCH
 * and tells it, with QFT_OP_NOTIFY frames, when someone else changes
 * them, so that the client may answer lookups and listings of those
 * directories from its cache until told otherwise.
 *
 * One struct srv_watch per client session, shared by the connection
 * threads of that session (bulk and meta, server/main.c), with:
 *   - one inotify instance, created when a HELLO first asks for
 *     QFT_FEAT_NOTIFY; where inotify cannot be had (ENOSYS, EMFILE) the
 *     server says so once and grants the feature to nobody;
 *   - a reader thread that turns inotify events into notifications,
 *     dropping the client's own changes (below), and a sender thread that
 *     sends them on the session's notification connection (meta, else
 *     bulk).  Neither request thread ever waits for the client to read a
 *     notification: pending notifications are coalesced per directory
 *     (a few names, else the whole directory), so their memory is bounded
 *     by the watch cap; when that is not enough the server sends ALL.
 *   - at most `max_watches` watches; past it the least recently listed
 *     directory's watch is ended with GONE.
 *
 * The client's own changes.  Before a handler changes the tree for the
 * client it records what it expects to see (srv_watch_expect*: a
 * directory, a name and the kinds of event its syscall makes) and marks
 * the operation done after the syscall (srv_watch_done).  The reader
 * drops an event that matches a recorded expectation: a name event
 * (create, delete, moved from/to) consumes its expectation; attribute
 * and content events do not (one SETATTR may make several, and inotify
 * merges identical events that were not read yet), so those match until
 * the expectation expires.  An expectation expires once the reader has
 * read the inotify queue to its end after the operation was done: every
 * event the syscall made was queued by then.  Files this client holds
 * open for writing (srv_watch_writer_*) are registered by their
 * directory and name: content events on them are the client's own until
 * the last such handle closes (and the close's own event was read).
 * Residual window: a foreign change to the same name, of the same kind,
 * between the operation's start and the reader's next pass over the
 * queue (normally milliseconds), or a foreign write to a file while this
 * client holds it open for writing, is taken for the client's own.
 *
 * Every function is safe on a NULL srv_watch (no notification at all) and
 * from any connection thread.  Error convention: 0 or a negative errno.
 */
#ifndef SRV_WATCH_H
#define SRV_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "chan.h"

#define SRV_WATCH_MAX_DEFAULT 8192u
#define SRV_WATCH_MAX_LIMIT   (1u << 20)
/* Test knob: "off" makes the server behave as if inotify were missing. */
#define SRV_WATCH_ENV "QFTFS_SERVER_NOTIFY"

/* Kinds of event an operation expects (bit mask). */
#define SRV_WATCH_CREATE     0x01u
#define SRV_WATCH_DELETE     0x02u
#define SRV_WATCH_MOVED_FROM 0x04u
#define SRV_WATCH_MOVED_TO   0x08u
#define SRV_WATCH_ATTRIB     0x10u  /* attributes, xattrs, times */
#define SRV_WATCH_MODIFY     0x20u  /* data, size, close after writing */

struct srv_watch;

/* A watched directory, as srv_watch_add found it. */
struct srv_watch_key {
	uint64_t dev, ino;
};

/* One operation's expectations, between srv_watch_begin and _done. */
struct srv_watch_op {
	uint64_t id;    /* 0: nothing recorded */
};

/*
 * A session's state, without inotify yet; `disabled` makes every grant
 * fail as if inotify were missing (SRV_WATCH_ENV=off).
 */
int srv_watch_new(struct srv_watch **out, unsigned max_watches,
		  bool disabled);
/*
 * Stops both threads and frees everything.  A sender blocked on a full
 * socket is woken by shutting its connection down: call this only once
 * the request threads are done with their connections.
 */
void srv_watch_free(struct srv_watch *w);

/*
 * HELLO asked for QFT_FEAT_NOTIFY on `chan` (`meta`: the meta
 * connection): true when granted (inotify works; the first grant starts
 * it).  Notifications go on the meta connection when it was granted,
 * else on bulk.  When they must move from one to the other (the one they
 * went on ended first), the client is sent ALL: what went on the lost
 * one may be lost.
 */
bool srv_watch_grant(struct srv_watch *w, struct qft_chan *chan, bool meta);
/* Whether a grant succeeded: own changes are worth recording. */
bool srv_watch_on(struct srv_watch *w);
/*
 * `chan` is about to be destroyed: nothing is sent on it any more (a
 * sender blocked on it is woken by shutting it down) and notifications
 * meant for it are dropped.
 */
void srv_watch_detach(struct srv_watch *w, struct qft_chan *chan);
/*
 * Resuming (resume.h).  lost_take: whether notifications were lost since
 * the last call (dropped with no connection to carry them, or in flight
 * on one that died), and forgets it.  reattach: `chan` (detached before,
 * now on a new socket) carries notifications again, as after grant; what
 * was lost since lost_take is told with an ALL.
 */
bool srv_watch_lost_take(struct srv_watch *w);
void srv_watch_reattach(struct srv_watch *w, struct qft_chan *chan,
			bool meta);

/*
 * READDIR with QFT_READDIR_WATCH: watches the directory open as `fd`
 * (confined, so reached through /proc/self/fd/N, never a client path) and
 * marks it most recently used; *key says which one.  0, or -errno when it
 * cannot be watched: -EREMOTE on a file system inotify cannot see all
 * changes of (NFS, SMB, FUSE, ...).
 */
int srv_watch_add(struct srv_watch *w, int fd, struct srv_watch_key *key);
/* Whether `key` is still watched (the READDIR reply's WATCHED flag). */
bool srv_watch_holds(struct srv_watch *w, const struct srv_watch_key *key);
/* UNWATCH: ends every watch on a directory with inode `ino`, without
 * GONE (the client asked); nothing to end is no error. */
void srv_watch_remove(struct srv_watch *w, uint64_t ino);

/* Starts an operation's expectations (op->id = 0 when nothing is
 * watched, which makes the calls below no-ops). */
void srv_watch_begin(struct srv_watch *w, struct srv_watch_op *op);
/* `kinds` of event for `name` in the directory open as `dfd`, when that
 * directory is watched. */
void srv_watch_expect(struct srv_watch *w, struct srv_watch_op *op, int dfd,
		      const char *name, unsigned kinds);
/* The same for the object `name` in dfd itself, when it is a watched
 * directory (its attributes change: SETATTR, xattrs). */
void srv_watch_expect_self(struct srv_watch *w, struct srv_watch_op *op,
			   int dfd, const char *name, unsigned kinds);
/* ... for the object open as `fd`, when it is a watched directory. */
void srv_watch_expect_fd(struct srv_watch *w, struct srv_watch_op *op,
			 int fd, unsigned kinds);
/* ... for the file of a writer registration (below). */
void srv_watch_expect_writer(struct srv_watch *w, struct srv_watch_op *op,
			     uint32_t writer, unsigned kinds);
/* The operation's syscalls have returned, whatever their result. */
void srv_watch_done(struct srv_watch *w, struct srv_watch_op *op);

/*
 * A handle opened `name` in the directory `dfd` for writing (before the
 * open: O_TRUNC is a content event too).  Returns a registration for
 * srv_watch_writer_close, 0 when none was made (no notification granted,
 * or out of memory: the client then merely hears of its own writes).
 */
uint32_t srv_watch_writer_open(struct srv_watch *w, int dfd,
			       const char *name);
/* The handle closed (after close(2)); 0 is ignored. */
void srv_watch_writer_close(struct srv_watch *w, uint32_t writer);
/*
 * The client renamed (dfd1, name1) to (dfd2, name2) (swapped them with
 * `exchange`): writer registrations follow their files.
 */
void srv_watch_renamed(struct srv_watch *w, int dfd1, const char *name1,
		       int dfd2, const char *name2, bool exchange);

#endif /* SRV_WATCH_H */
