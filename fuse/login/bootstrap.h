/* SPDX-License-Identifier: MIT */
/*
 * A remote mount's start: from `[user@]host:[dir]` to an authenticated
 * data plane (docs/security.md, "How a remote mount is built").
 *
 *   1. log in with ssh (ssh.h) and run
 *        [QFTFS_RESUME=N QFTFS_ATTACH=1; export QFTFS_RESUME QFTFS_ATTACH;]
 *        exec <server> --session --root '<dir>'
 *      with every word single-quoted for the remote shell; without
 *      -o server=, a script that finds or installs the server first and
 *      then execs it the same way (install.h);
 *   2. write a fresh 256-bit secret S to the channel as 64 hex digits and
 *      a newline (never argv, never the environment), and read back one
 *      line, "QFTFS <version> <port>", with " <id>" from a server that
 *      may be attached to over ssh (attach.h);
 *   3. direct transport: connect to that port on the address the ssh
 *      connection goes to and run the handshake (auth.h) over it; if the
 *      connection cannot be made, say so in one line and run the same
 *      handshake through the ssh channel instead (the tunnel).
 *
 * The result is a descriptor and the record keys; the caller builds its
 * connection on them (qc_conn_set_keys) and wipes the keys.
 *
 * Error convention: 0 or a negative errno, with the reason already on
 * stderr ("qftfs: ...").
 */
#ifndef QC_BOOTSTRAP_H
#define QC_BOOTSTRAP_H

#include <stdbool.h>
#include <sys/socket.h>

#include "auth.h"
#include "login/install.h"
#include "protocol.h"
#include "seal.h"
#include "tcpcc.h"
#include "login/ssh.h"

enum qc_transport_mode {
	QC_TRANSPORT_AUTO,      /* direct, else the tunnel with a notice */
	QC_TRANSPORT_DIRECT,    /* direct or nothing */
	QC_TRANSPORT_SSH,       /* the tunnel only */
};

/* SOURCE split scp-style; every field malloc'd. */
struct qc_boot_source {
	char *user;             /* NULL when not given */
	char *host;             /* brackets of [v6] removed */
	char *dir;              /* "." when empty: the remote home */
};

struct qc_boot_opts {
	struct qc_ssh_opts ssh;
	const char *server;     /* -o server=; NULL: qftfs-server from PATH,
				 * else installed (install.h) */
	struct qc_install_opts install;
	const char *dir;
	bool follow;            /* -o follow_symlinks: --follow-symlinks */
	enum qft_cipher cipher;
	enum qc_transport_mode transport;
	/* The direct connection: unacknowledged data this long ends it
	 * (TCP_USER_TIMEOUT), and kernel keepalives probe an idle one after
	 * keepalive_s.  0: the kernel's defaults. */
	int timeout_s;
	int keepalive_s;
	/* -o resume=: exported to the server as QFTFS_RESUME (an older one
	 * ignores it) when above 0, and the resume key kept (qc_boot). */
	int resume_s;
	/* -o congestion=: applied to the direct connections (uploads), and
	 * exported to the server as QFTFS_CONGESTION (downloads). */
	struct qft_tcpcc tcpcc;
};

/* Logins of attached connections kept: two lanes, and the two before. */
#define QC_BOOT_ATTACHED_MAX 4

struct qc_boot {
	struct qc_ssh *ssh;
	int ctl_fd;             /* our end of the channel, or -1 */
	int data_fd;            /* the data plane; the caller takes it */
	bool tunnel;            /* data_fd is the channel itself */
	enum qft_cipher cipher;
	struct qft_session_keys keys;
	/* Direct only: for the meta connection (qc_boot_open_meta), the
	 * secret and the server's address; wiped after its one use. */
	bool meta_ok;
	uint8_t meta_secret[QFT_SECRET_SIZE];
	struct sockaddr_storage peer;
	socklen_t peer_len;
	/* With resume_s > 0, direct or with a session id: K_r =
	 * qft_auth_resume_key(S), derived before S is wiped, for the
	 * connections that resume the session (qc_boot_reattach): to
	 * `peer` when `direct`, else, or when that fails, through a new ssh
	 * login (attach.h); wiped by qc_boot_close. */
	bool resume_ok;
	bool direct;
	uint8_t resume_key[QFT_SECRET_SIZE];
	/* Attaching over ssh: the session id of the greeting (attach_ok),
	 * the server the install script ran (empty: o->server, or
	 * qftfs-server from PATH), and the logins of attached connections,
	 * oldest first, kept until their connection is surely gone. */
	bool attach_ok;
	char attach_id[QFT_ATTACH_ID_HEX + 1];
	char server_path[1024];
	struct qc_ssh *attached[QC_BOOT_ATTACHED_MAX];
	unsigned nattached;
	int64_t attached_ms;    /* when the last one was made */
};

/*
 * True when SOURCE names a remote directory: a ':' before the first '/'
 * (scp's rule; "[v6addr]:dir" too).
 */
bool qc_boot_is_remote(const char *source);

/*
 * Splits a remote SOURCE.  -EINVAL, after a message, for an empty host,
 * or a user, host or directory starting with '-', which could pass for an
 * option somewhere down the line.
 */
int qc_boot_parse_source(const char *source, struct qc_boot_source *out);
void qc_boot_source_free(struct qc_boot_source *r);

/* "aes256-gcm" (default), "chacha20" or "chacha20-poly1305", "none". */
int qc_boot_parse_cipher(const char *s, enum qft_cipher *out);
/* "auto" (default), "direct", "ssh". */
int qc_boot_parse_transport(const char *s, enum qc_transport_mode *out);

/*
 * The server's greeting line, without its newline: "QFTFS <version>
 * <port>", and " <id>" (QFT_ATTACH_ID_HEX lowercase hex digits; "" in
 * `id` when absent) when the session can be attached to over ssh;
 * nothing more, nothing less.  0, or -EPROTO.  Exported for
 * tests/fuzz/fuzz_login.c.
 */
int qc_boot_parse_greeting(const char *line, unsigned *version,
			   unsigned *port, char id[QFT_ATTACH_ID_HEX + 1]);

/* Steps 1-3 (with the install of install.h before step 2 when no
 * -o server= is given).  On failure everything is released. */
int qc_boot_open(struct qc_boot *b, const struct qc_boot_opts *o);

/*
 * The meta connection of a direct data plane (docs/protocol.md,
 * "Connections"): another TCP connection to the same port and a fresh
 * handshake under the same secret, which is then wiped.  0 with *fd and
 * *keys set, -ENOTSUP for the tunnel (one connection), or -errno after a
 * notice; the mount then goes on with one connection.
 */
int qc_boot_open_meta(struct qc_boot *b, const struct qc_boot_opts *o,
		      int *fd, struct qft_session_keys *keys);

/*
 * One more connection of a resumable session (docs/protocol.md, "Resuming
 * a session"): TCP to the server's address and port, from whatever local
 * address the host has now, and the handshake under K_r; where that is
 * not possible (the tunnel) or fails (a firewall appeared), a new ssh
 * login attached to the session (attach.h).  0 with *fd and *keys set;
 * -ECONNREFUSED (the server is gone) or -EACCES (the proof was refused)
 * when the session cannot be resumed, -ENOTSUP without a resume key,
 * another -errno (unreachable, timed out) when a later attempt may work.
 * Logs mostly at debug level: the caller retries every second or so.
 */
int qc_boot_reattach(struct qc_boot *b, const struct qc_boot_opts *o,
		     int *fd, struct qft_session_keys *keys);
/*
 * One more direct connection to the session, authenticated with K_r as
 * qc_boot_reattach's, never through ssh: -ENOTSUP when the session is
 * not reached directly.  Reads only what the boot fixed, so several
 * threads may call it at once (the stripes of one link: net/stripe.c).
 */
int qc_boot_join(const struct qc_boot *b, const struct qc_boot_opts *o,
		 int *fd, struct qft_session_keys *keys);

/* Around fuse_daemonize(), which forks (see ssh.h). */
void qc_boot_pause(struct qc_boot *b);
int qc_boot_resume(struct qc_boot *b);

/*
 * After the data connection ended: closes our end of the channel, waits
 * up to `timeout_ms` for the server to exit (logging a bad exit status),
 * and releases everything.  Returns 0 when the server exited cleanly.
 */
int qc_boot_close(struct qc_boot *b, int timeout_ms);

#endif /* QC_BOOTSTRAP_H */
