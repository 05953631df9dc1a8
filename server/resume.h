/* SPDX-License-Identifier: MIT */
/*
 * A session that outlives its connections (docs/protocol.md, "Resuming a
 * session"; --resume=SECS).  The state here is the session's: which lanes
 * (bulk, meta) agreed on QFT_FEAT_RESUME in their HELLO, the listener and
 * the resume key K_r, kept for the session's life once the first
 * connections are in, and the thread that accepts the connections that
 * resume a lane.
 *
 * The acceptor takes connections from the session's TCP listener and,
 * when the client can attach over ssh, from its attach socket (attach.h:
 * those only from the session's own user).  It authenticates each
 * connection with K_r (the handshake of docs/security.md, 5 s each, with
 * the limits of gate.h: failures end nothing, handshakes at once are
 * bounded overall and per address), reads its first
 * frame, which must be a RESUME naming a lane that agreed on resuming,
 * and hands it to that lane.  The lane's own thread (bulk: the main
 * thread, meta: the meta thread) takes it up in srv_resume_wait(): it has
 * finished every request of the connection it replaces, so the RESUME
 * reply's seq is exact, rebinds its channel to the new socket and seals
 * (compression state kept) and serves on.
 *
 * Threads: the lanes' threads, the acceptor and its handshake threads;
 * everything marked `lock` is guarded by srv_resume.lock.
 */
#ifndef SRV_RESUME_H
#define SRV_RESUME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "gate.h"
#include "msg.h"
#include "protocol.h"
#include "seal.h"

struct srv;
struct srv_session;

enum srv_lane {
	SRV_LANE_BULK = 0,
	SRV_LANE_META = 1,
	SRV_LANES
};

/* An authenticated connection whose first frame was a valid RESUME. */
struct srv_resume_conn {
	int fd;
	struct qft_seal tx, rx;
	uint64_t id;             /* the RESUME frame's, echoed in the reply */
	uint64_t seq;            /* the client's lowest id without a reply */
};

struct srv_resume_lane {
	bool granted;                    /* lock: HELLO agreed on RESUME */
	bool attached;                   /* lock: serving a connection */
	int fd;                          /* lock: its socket, else -1 */
	struct srv_resume_conn *pending; /* lock: handed over, not taken */
	struct srv_resume_conn *cur;     /* the lane's thread: the seals its
					  * channel uses, NULL for the first
					  * connection's */
	/* Bulk: the stripes its channel reads (chan.h), for cutting them
	 * with it. */
	int sfd[QFT_MAX_STRIPES];        /* lock */
	unsigned nsfd;                   /* lock */
};

struct srv_resume {
	unsigned grace_s;        /* 0: sessions end with their connection */
	struct srv_session *ss;
	enum qft_cipher cipher;  /* the session's: resumed ones must match */
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* lock: a hand-over, the end, a slot free */
	struct srv_resume_lane lane[SRV_LANES];
	bool refused;            /* lock: bulk's HELLO did not ask */
	bool ending;             /* lock: the session is ending */
	/* Striping (protocol.h, QFT_FEAT_STRIPES): bulk's HELLO granted it,
	 * and the connections that joined and are not taken yet. */
	bool stripes_ok;                 /* lock */
	int joined[QFT_MAX_STRIPES - 1]; /* lock */
	unsigned njoined;                /* lock */

	/* The acceptor, once srv_resume_listen started it. */
	uint8_t key[QFT_SECRET_SIZE];    /* K_r; wiped at the end */
	int lfd;                 /* lock: -1 once closed */
	int afd;                 /* lock: the attach socket (attach.h), or -1 */
	int wake[2];             /* stops the acceptor */
	bool running;            /* lock */
	pthread_t acceptor;
	struct srv_gate gate;    /* lock: the handshakes' slots */
	unsigned nhs;            /* lock: handshakes running */
};

/* Sets the grace (0 = off) and the session; the rest comes later. */
void srv_resume_init(struct srv_resume *rs, unsigned grace_s,
		     struct srv_session *ss);

/*
 * `asked`: the HELLO of `lane` (socket `fd`) asked for QFT_FEAT_RESUME.
 * True when it is granted.  A bulk HELLO that does not ask closes the
 * listener as a session without resuming does.
 */
bool srv_resume_grant(struct srv_resume *rs, enum srv_lane lane, int fd,
		      bool asked);

/*
 * The first connections are in (session.c): takes the TCP listener `lfd`
 * and the attach socket `afd` (either may be -1) and K_r and starts
 * accepting resumed connections, or closes the listeners when resuming
 * is off or refused.  A connection on the attach socket must come from
 * the session's own user (attach.h) before its handshake even starts.
 */
void srv_resume_listen(struct srv_resume *rs, int lfd, int afd,
		       const uint8_t key[QFT_SECRET_SIZE],
		       enum qft_cipher cipher);

/* True once a lane agreed on resuming: the end of the ssh channel no
 * longer ends the session. */
bool srv_resume_active(struct srv_resume *rs);

/* The two above, for the session below (session.h). */
extern const struct srv_session_hooks srv_resume_hooks;

/*
 * The connection of s's lane ended without BYE (the caller finished its
 * requests).  Detaches the lane and waits, up to the grace, for a RESUME;
 * 0 once the lane serves a new connection, -ETIMEDOUT when the grace
 * passed (the session is then ending) or -ECANCELED when it ends anyway.
 */
int srv_resume_wait(struct srv *s);

/*
 * Striping.  stripes_grant: bulk's HELLO asked for QFT_FEAT_STRIPES;
 * true when granted (the session takes connections: resumable).
 * srv_resume_stripe answers a STRIPE on bulk (s's lane): takes the
 * connections that joined, switches the channel to them and replies; 0,
 * -EPIPE when the reply could not be sent (the lane is down), or
 * another -errno when the connection must close (logged).
 */
bool srv_resume_stripes_grant(struct srv_resume *rs);
int srv_resume_stripe(struct srv *s, const struct qft_msg *req);

/* The session ends: lanes waiting give up, attached ones are cut, no more
 * connections are accepted.  Idempotent. */
void srv_resume_end(struct srv_resume *rs);

/* After the lanes' channels are gone: frees their seals, wipes K_r. */
void srv_resume_free(struct srv_resume *rs);

#endif /* SRV_RESUME_H */
