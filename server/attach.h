/* SPDX-License-Identifier: MIT */
/*
 * Attaching to a running session over a new ssh login (docs/protocol.md,
 * "Attaching over ssh"; docs/security.md, "The attach socket").
 *
 * A resumable session whose client can attach (QFTFS_ATTACH=1 in the
 * remote command's environment, with a grace above 0) listens on a Unix
 * stream socket in the abstract namespace, "@qftfs-attach-<id>", where
 * <id> is QFT_ATTACH_ID_HEX hex digits of fresh random bits, reported in
 * the greeting.  Abstract: nothing on disk to clean up after a kill -9,
 * no directory a logout can remove under it.  Anyone in the host's
 * network namespace may connect, so the session's acceptor (resume.c)
 * takes connections only from processes of its own user (SO_PEERCRED),
 * and then only after the same K_r handshake and RESUME as on its TCP
 * port: knowing <id> gives nothing.
 *
 * `qftfs-server --attach ID` is what the client runs over a new ssh
 * login.  It connects to that socket, checks that the listener runs as
 * its own user (a name squatted by someone else is not the session),
 * says one line on stdout and relays bytes between its stdin/stdout (the
 * ssh channel) and the socket until the session's side ends:
 *
 *     QFTFS <version> attached      the relayed stream follows
 *     QFTFS <version> gone          exit status QFT_ATTACH_EXIT_GONE: no
 *                                   such session (any more)
 *
 * It stays alive for as long as the connection is used, since sshd stops
 * feeding a command's stdin once the command has exited.
 *
 * The same relay (a thread) carries the first connection of a tunnelled
 * resumable session between stdin/stdout and a socketpair, so that every
 * connection of a session is a socket it can shut down when a RESUME
 * replaces it or the session ends.
 *
 * Error convention: 0 or a negative errno, logged.
 */
#ifndef SRV_ATTACH_H
#define SRV_ATTACH_H

#include <stdbool.h>

#include "protocol.h"

/* Set to 1 by the client in the remote command: it can attach, so the
 * greeting may carry the session id (an older client would not parse
 * it). */
#define SRV_ATTACH_ENV "QFTFS_ATTACH"

/* Whether the client asked for attaching (SRV_ATTACH_ENV=1). */
bool srv_attach_wanted(void);

/*
 * Binds and listens on a fresh abstract name.  0 with *fd (close-on-exec,
 * non-blocking) and `id` (NUL-terminated) set, or -errno (logged: the
 * session then cannot be attached to, only resumed over TCP).
 */
int srv_attach_listen(int *fd, char id[QFT_ATTACH_ID_HEX + 1]);

/* True when the peer of an accepted connection runs as our user; logs a
 * refusal otherwise. */
bool srv_attach_peer_ok(int fd);

/* `qftfs-server --attach ID`: the whole program; returns its exit
 * status. */
int srv_attach_main(const char *id);

struct srv_attach_relay;

/*
 * Starts a thread relaying between in_fd/out_fd (stdin and stdout: the
 * ssh channel; made non-blocking) and one end of a new socketpair, whose
 * other end is *sock for the caller (close-on-exec).  The thread ends
 * when the socket's peer ends; in_fd and out_fd stay open.
 */
int srv_attach_relay_start(struct srv_attach_relay **out, int in_fd,
			   int out_fd, int *sock);

/* Stops the thread (if still running) and frees; NULL is fine. */
void srv_attach_relay_stop(struct srv_attach_relay *r);

#endif /* SRV_ATTACH_H */
