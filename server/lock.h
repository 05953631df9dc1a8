/* SPDX-License-Identifier: MIT */
/*
 * Locks the server holds for its client (QFT_FEAT_LOCKS; docs/protocol.md,
 * "Locks"): LOCK and GETLK, and dropping them when handles close and when
 * the session ends.
 *
 * The server holds each client lock owner's locks on one file (owner,
 * dev, ino) on a descriptor of its own, a "record": a second open of the
 * file, so its own open file description.  POSIX record locks are taken
 * on it as OFD locks (F_OFD_SETLK), which give one owner's locks POSIX
 * semantics -- merged, split, upgraded in place, never conflicting with
 * each other -- without any process boundary; flock(2) locks with flock()
 * on it, a kind of its own that never meets the other.  Closing the
 * record's descriptor drops all of them at once, which is what a POSIX
 * owner's close (QFT_LOCK_CLOSE, sent on FLUSH) and the end of an open
 * file (its handle's CLOSE, the session's end) need.
 *
 * A record remembers the handles it was used through and goes when the
 * last of them closes: an OFD or flock owner is one open file, hence one
 * handle; a POSIX owner's locks went at its close already, and the
 * record of one that never closed goes with the file.
 *
 * Nothing here ever waits for a lock: a conflict is -EAGAIN at once, and a
 * client that must wait asks again, so a waiting lock holds no server
 * thread, blocks no other request on the connection, and an interrupted
 * wait leaves nothing behind on the server.
 *
 * One connection's thread uses its table (srv.h); nothing is locked.
 * Error convention: 0 or a negative errno.
 */
#ifndef SRV_LOCK_H
#define SRV_LOCK_H

#include <stdint.h>

#include "msg.h"

struct srv;
struct srv_lock_rec;

/*
 * Records at most per connection: each holds a descriptor, so a client
 * cannot make the server run out of them; past the cap LOCK fails with
 * ENOLCK.
 */
#define SRV_LOCK_MAX_RECS 1024u

struct srv_locks {
	struct srv_lock_rec *head;
	unsigned n;
};

/* LOCK: take, change or drop a lock, or close an owner's (QFT_LOCK_*). */
int srv_lock_set(struct srv *s, const struct qft_msg *req,
		 struct qft_msg *rep);
/* GETLK: the lock that conflicts with req->lk, or type UNLCK. */
int srv_lock_get(struct srv *s, const struct qft_msg *req,
		 struct qft_msg *rep);
/* Handle `h` is closing: records used through it alone are closed. */
void srv_lock_handle_closed(struct srv_locks *t, uint64_t h);
/* Closes every record (the connection's server goes). */
void srv_lock_destroy(struct srv_locks *t);

#endif /* SRV_LOCK_H */
