/* SPDX-License-Identifier: MIT */
/*
 * Acting as the caller (QFT_FEAT_CRED; docs/protocol.md, "Acting as the
 * caller"; docs/security.md, "A mount shared by many users").
 *
 * A server running as root for a mount that other local users share runs
 * each request with the calling user's fsuid, fsgid and supplementary
 * groups, so that its kernel checks every access and creates every object
 * with its owner -- nothing is checked here against a copy of the rules,
 * and nothing is chowned after the fact.  Credentials are switched per
 * thread with the raw setfsuid, setfsgid and setgroups system calls:
 * glibc's wrappers apply a change to every thread of the process, and the
 * bulk and meta connections' threads act for different callers at once.
 * setfsuid drops only the file system capabilities, so while a thread
 * acts for anyone but uid 0 its effective capability set is cut down too
 * (capset of that thread) to CAP_SETUID and CAP_SETGID, which no file
 * system check looks at and the next switch needs: a caller must keep
 * neither CAP_SYS_ADMIN (trusted.* attributes), nor CAP_SETFCAP
 * (security.capability), nor CAP_SYS_RESOURCE (quotas).  A caller mapped
 * to uid 0 is root and keeps them all.
 *
 * Which identity a request of a connection that agreed on the feature
 * runs with (srv_cred_enter):
 *   - PING, SYNCFS, UNWATCH, BYE: the server's own (they touch nothing a
 *     caller could be refused; SYNCFS is the mount owner's, asked through
 *     an attribute only the owner may read);
 *   - a request marked QFT_F_CRED: the caller it names;
 *   - one on an open handle without the mark: the caller that opened it,
 *     as an open descriptor keeps its opener's credentials (so do writes
 *     that the kernel sends without a caller, and the CLOSE of a release);
 *   - any other (it names a path and no caller): refused with EACCES.
 * A connection that did not agree on it runs everything as the server's
 * user, as before.  The thread keeps what it applied last, step by step,
 * so requests of one caller in a row switch nothing, and a switch makes
 * only the calls whose value changes (one user to another: setgroups,
 * setfsgid, setfsuid, about 12 us on the 2-core VM of docs/benchmarks.md;
 * to or from root one capset more).
 *
 * Each connection (struct srv, one thread) keeps the identities its open
 * handles were opened with, counted and shared (srv_cred_hold).
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef SRV_CRED_H
#define SRV_CRED_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

struct srv;

/* Environment knob (tests): "off" makes the server unable to act as the
 * caller, as one whose kernel or container forbids it would be. */
#define SRV_CRED_ENV "QFTFS_SERVER_CRED"

/* The uid and gid a request that could name no one runs as. */
#define SRV_CRED_NOBODY 65534u

/* An identity handles of one connection share (opaque). */
struct srv_cred;

/* A connection's identities (struct srv.creds); no lock: one thread. */
struct srv_creds {
	struct srv_cred *head;
	unsigned n;
};

/*
 * At start, before any thread: whether this process can act as its
 * callers (root, CAP_SETUID and CAP_SETGID, the raw calls work: tried
 * once and undone), and what its own identity is.  `off`: pretend not
 * (SRV_CRED_ENV).  Says why not at debug level.
 */
void srv_cred_setup(bool off);
bool srv_cred_available(void);

/*
 * Makes this thread act as `req` must (above), on connection s; `opener`
 * is the identity of the handle it names (srv_handle.cred), if any.  0,
 * or -EACCES for a request that must name a caller and does not, -EPERM
 * when the switch failed (logged).  Nothing when s did not agree on
 * QFT_FEAT_CRED.
 */
int srv_cred_enter(struct srv *s, const struct qft_msg *req,
		   const struct srv_cred *opener);

/*
 * A counted reference to the identity the current request runs with, for
 * the handle it opens (srv_cred_put when the handle closes): NULL on a
 * connection without the feature, or when out of memory (-ENOMEM then in
 * *err, else 0).
 */
struct srv_cred *srv_cred_hold(struct srv *s, int *err);
void srv_cred_put(struct srv_cred *c);

/*
 * Whether the thread acts as someone other than the server itself with
 * uid 0's powers: the caller of a CRED request who is not root.
 */
bool srv_cred_unprivileged(void);

/*
 * One step the caller's own rights do not cover but the kernel would do
 * for them (clearing the set-id bits of a file the caller writes to): the
 * thread acts as the server until srv_cred_end_server, which acts as the
 * caller again.  0 or -EPERM; after a failed end the request must do
 * nothing more (the next one switches again).
 */
int srv_cred_begin_server(void);
int srv_cred_end_server(void);

#endif /* SRV_CRED_H */
