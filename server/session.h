/* SPDX-License-Identifier: MIT */
/*
 * `qftfs-server --session`: the server end of the ssh bootstrap
 * (docs/security.md, "How a remote mount is built").
 *
 *   1. read the 256-bit secret from stdin, the ssh channel: one line of 64
 *      hex digits (30 s, or exit);
 *   2. listen on an ephemeral port of the address sshd accepted the login
 *      on (SSH_CONNECTION), and report "QFTFS <version> <port>" on stdout;
 *      a resumable session whose client can attach over ssh (attach.h)
 *      listens on its attach socket too and adds " <id>" to that line;
 *   3. within 30 s, authenticate a client: a TCP connection to that port
 *      (several handshakes may run at once, each with its own 5 s
 *      deadline; a failure closes that connection and waiting goes on, up
 *      to a cap), or the same handshake through stdin/stdout (the ssh
 *      tunnel), which the client starts by writing to the channel;
 *   4. hand back the data plane with its record keys.  Over TCP, a
 *      thread watches stdin: its end means the ssh channel, and so the
 *      client, is gone, and it shuts the data sockets down so that the
 *      request loops end;
 *   5. over TCP, keep the listener and the secret for the client's meta
 *      connection (docs/protocol.md, "Connections"): one more connection
 *      with a fresh handshake under the same secret, accepted within
 *      30 s by srv_session_accept_meta; then close the listener and wipe
 *      the secret, so that nobody else may even try.
 *
 * The secret and the session keys live only here, are never logged and
 * are wiped once the record layer is keyed; the process is made
 * non-dumpable before the secret is read.
 *
 * Error convention: 0 or a negative errno, logged before returning;
 * -EINVAL means the secret line was malformed (exit status 2).
 */
#ifndef SRV_SESSION_H
#define SRV_SESSION_H

#include <pthread.h>
#include <stdbool.h>

#include "attach.h"
#include "auth.h"
#include "chan.h"
#include "protocol.h"
#include "seal.h"
#include "tcpcc.h"

struct srv_resume;

struct srv_session {
	int in_fd;              /* the ssh channel: stdin */
	int out_fd;             /* and stdout */
	int data_fd;            /* TCP data plane, or -1 for the tunnel */
	bool tunnel;
	enum qft_cipher cipher;
	struct qft_seal tx;     /* server -> client */
	struct qft_seal rx;     /* client -> server */

	pthread_t watcher;
	bool watching;          /* main thread only */
	pthread_mutex_t lock;
	bool channel_closed;    /* lock: stdin ended while serving over TCP */

	/* Step 5: the listener and secret until the meta connection is in
	 * (or given up); its socket once it is. */
	int lfd;                /* lock: -1 once closed */
	bool accept_stop;       /* lock: the session is ending */
	int meta_fd;            /* lock: -1 until accepted */
	uint8_t secret[QFT_SECRET_SIZE]; /* the accepting thread; wiped */
	bool have_secret;

	/* Resuming (resume.h): NULL unless --resume above 0 and over TCP.
	 * K_r, derived from the secret before it is wiped, goes to the
	 * session's resume state with the listener (accept_end). */
	struct srv_resume *resume;
	const struct srv_session_hooks *hooks; /* immutable: with resume */
	uint8_t resume_key[QFT_SECRET_SIZE]; /* the accepting thread */
	bool have_resume_key;

	/* Attaching over ssh (attach.h): the listener of a resumable
	 * session whose client can attach, until handed to the resume
	 * state with the TCP one; its id went out in the greeting.  A
	 * tunnelled session's data plane is then a socket (data_fd) that
	 * `relay` connects to stdin/stdout. */
	int afd;                /* the accepting thread; -1 once handed */
	char attach_id[QFT_ATTACH_ID_HEX + 1];
	struct srv_attach_relay *relay;

	/* --congestion: what the TCP connections of the session send with
	 * (tcpcc.h); set by srv_session_open, then immutable. */
	struct qft_tcpcc tcpcc;
};

/*
 * What the session asks of the resume state above it (resume.c defines
 * srv_resume_hooks; main.c hands them over with it): called through
 * pointers, so that session.c, below resume.c, never calls up into it.
 * listen takes over the listeners (TCP, attach; -1 when there is none)
 * and K_r once the first connections are in; active says whether a lane agreed on resuming, so that the end of
 * the ssh channel no longer ends the session.
 */
struct srv_session_hooks {
	void (*listen)(struct srv_resume *rs, int lfd, int afd,
		       const uint8_t key[QFT_SECRET_SIZE],
		       enum qft_cipher cipher);
	bool (*active)(struct srv_resume *rs);
};

/*
 * Runs steps 1-4 on `in_fd`/`out_fd` (the protocol's copies of stdin and
 * stdout).  On success the data plane is ss->data_fd (TCP, or the relay's
 * socket for a tunnel that may be resumed by attaching: ss->relay) or the
 * two descriptors themselves (tunnel), and ss->tx/rx are keyed.
 */
int srv_session_open(struct srv_session *ss, int in_fd, int out_fd,
		     struct srv_resume *rs,
		     const struct srv_session_hooks *hooks,
		     const struct qft_tcpcc *tcpcc);

/*
 * Readies an authenticated TCP connection of the session for requests:
 * no Nagle delay, keepalive and user timeout, and the congestion control
 * of --congestion (what the server sends: downloads).  Failures are
 * logged and cost only what the option was for.
 */
void srv_session_tune_tcp(const struct srv_session *ss, int fd,
			  const char *what);

/*
 * Seals `chan` (set up on the data plane's descriptors) and, over TCP,
 * starts the stdin watcher.  Call before serving.
 */
int srv_session_attach(struct srv_session *ss, struct qft_chan *chan);

/*
 * Step 5, from a thread of its own: waits (30 s at most) for the meta
 * connection and authenticates it.  0 with *fd and the seals set up (the
 * cipher must be the bulk connection's), -ECANCELED when stopped or not
 * over TCP, -ETIMEDOUT when no client came (a client that uses one
 * connection), or another -errno, logged.  Closes the listener and wipes
 * the secret in every case.
 */
int srv_session_accept_meta(struct srv_session *ss, int *fd,
			    struct qft_seal *tx, struct qft_seal *rx);

/* Makes srv_session_accept_meta return at once (the session ends). */
void srv_session_stop_accept(struct srv_session *ss);

/* ... and shuts the meta connection down if it is in (the bulk one
 * failed). */
void srv_session_cut_meta(struct srv_session *ss);

/* Before the meta connection's socket is closed: the watcher must no
 * longer touch it. */
void srv_session_forget_meta(struct srv_session *ss);

/* True when the request loop ended because the ssh channel closed. */
bool srv_session_channel_closed(struct srv_session *ss);

/* Stops the relay, frees the seals; does not close the descriptors (the
 * channel does). */
void srv_session_free(struct srv_session *ss);

/*
 * Step 1 alone: reads the secret line from `fd`, exactly its bytes, with
 * the 30 s deadline.  0, or -EINVAL for a malformed line (after the
 * message), or another negative errno; *secret is wiped on failure.
 * srv_session_open calls it; exported for tests/fuzz/fuzz_auth.c.
 */
int srv_session_read_secret(int fd, uint8_t secret[QFT_SECRET_SIZE]);

#endif /* SRV_SESSION_H */
