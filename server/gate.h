/* SPDX-License-Identifier: MIT */
/*
 * Who gets a handshake on a session's listener (docs/security.md,
 * "Connections before authentication").  Anyone who can reach the port
 * may connect: the listener is open while the session starts, again for
 * its meta connection, and, for a resumable session, for the session's
 * whole life (resume.h).  So unauthenticated connections must neither end
 * the session nor keep its client out:
 *
 *   - a failed handshake ends nothing; failures are counted per address
 *     for the log alone (the first few are logged, then every
 *     SRV_GATE_LOG_EVERY-th, with the count);
 *   - at most SRV_GATE_LIVE handshakes run at once, at most
 *     SRV_GATE_PER_PEER of them from one address;
 *   - a connection that arrives over either bound evicts a running
 *     handshake instead of waiting behind it: the oldest of its own
 *     address when that address has its share, else the oldest of the
 *     address that holds the most.  A genuine handshake takes one round
 *     trip; a silent or slow crowd that squats the slots is pushed out by
 *     the next arrival instead of holding them for their 5 s, and one
 *     address cannot push out the handshakes of another while it holds
 *     more than its share.
 *
 * An evicted handshake is shut down (its poll wakes at once) and keeps
 * its slot until its thread is done with it, so there are twice as many
 * slots as live handshakes; only when every slot is taken does the caller
 * stop accepting, for the moment it takes the evicted ones to end.
 *
 * Not locked: the caller serializes every call on one gate (session.c:
 * its main or accepting thread; resume.c: its lock).
 */
#ifndef SRV_GATE_H
#define SRV_GATE_H

#include <stdbool.h>
#include <stdint.h>
#include <netdb.h>
#include <sys/socket.h>

#define SRV_GATE_LIVE       8
#define SRV_GATE_PER_PEER   2
#define SRV_GATE_SLOTS      (2 * SRV_GATE_LIVE)
/* Addresses whose failures are remembered (the least recent goes). */
#define SRV_GATE_PEERS      32
#define SRV_GATE_LOG_FIRST  16
#define SRV_GATE_LOG_EVERY  100

struct srv_gate_slot {
	bool used;
	bool evicted;            /* shut down to make room */
	int fd;
	uint64_t seq;            /* admission order: lower is older */
	char addr[NI_MAXHOST];   /* numeric, without the port */
	char peer[NI_MAXHOST + NI_MAXSERV + 8];   /* "addr port N" */
};

struct srv_gate_peer {
	char addr[NI_MAXHOST];   /* "" when unused */
	uint64_t failed;
	uint64_t last;           /* seq of its last failure */
};

struct srv_gate {
	const char *what;        /* "data connection", for the log */
	uint64_t seq;
	struct srv_gate_slot slot[SRV_GATE_SLOTS];
	struct srv_gate_peer peer[SRV_GATE_PEERS];
	uint64_t failed;         /* every address together */
	uint64_t evicted;
};

void srv_gate_init(struct srv_gate *g, const char *what);

/* True while a slot is free: the caller may accept. */
bool srv_gate_room(const struct srv_gate *g);

/*
 * Admits the connection `fd`, just accepted from `sa`: the slot it gets
 * (the caller starts its handshake there), having evicted an older
 * handshake if the bounds say so; or -1 when no slot is free (the caller
 * closes `fd`).
 */
int srv_gate_admit(struct srv_gate *g, int fd, const struct sockaddr *sa,
		   socklen_t len);

/*
 * The handshake of slot `i` ended with `result` (0 or -errno; the caller
 * closes or keeps the descriptor).  A failure is logged as the gate's
 * limits say, with `reason` the caller's words for it (an evicted one's
 * reason is its eviction).  Frees the slot.
 */
void srv_gate_done(struct srv_gate *g, int i, int result, const char *reason);

/* Shuts every running handshake down (the session is ending). */
void srv_gate_shutdown_all(struct srv_gate *g);

#endif /* SRV_GATE_H */
