/* SPDX-License-Identifier: MIT */
/*
 * The ssh side of a remote mount: log in with libssh2, run one command,
 * and carry its stdin/stdout through a socketpair so that the rest of the
 * client only ever sees a file descriptor.
 *
 * qc_ssh_connect() resolves the host through ssh_config(5) (sshconf.h),
 * connects over TCP, checks the host key against known_hosts and logs in:
 * ssh-agent identities, then IdentityFiles (-o IdentityFile=, then the
 * config's), then ~/.ssh/id_ed25519, id_ecdsa, id_rsa, then a password or
 * keyboard-interactive answers from the terminal, or from stdin with
 * password_stdin.  Every failure is explained on stderr ("qftfs: ...")
 * before it returns, so callers only map the error to an exit status.
 *
 * qc_ssh_exec() starts the remote command; qc_ssh_pump_start() hands back
 * our end of a socketpair and starts the pump thread, which from then on
 * makes every libssh2 call: bytes written to the descriptor go to the
 * command's stdin, its stdout comes back on the descriptor, and its stderr
 * is logged line by line as "qftfs-server@HOST: ...".  Shutting down the
 * descriptor's write side sends EOF to the command; when the command's
 * stdout ends the descriptor reads EOF; when the channel closes (or the
 * ssh connection breaks) the pump finishes and qc_ssh_wait() reports the
 * command's exit status.
 *
 * When OpenSSH: the login goes through the system's OpenSSH client
 * (sshproc.h) instead of libssh2 when -o ssh_command= is given, when the
 * ssh config or an -o option for this host has ProxyJump, ProxyCommand or
 * CertificateFile, and, after one line saying why, when libssh2's login
 * failed with a key it cannot sign with (an RSA key: libssh2 1.10 signs
 * with SHA-1 only, which OpenSSH 8.8 and later refuse; a FIDO or
 * certificate key in the agent).  The same API then drives an `ssh`
 * process; behind a ProxyJump or ProxyCommand the host is reachable
 * through ssh only, so qc_ssh_proxied() tells the bootstrap to tunnel.
 *
 * fuse_daemonize() forks, and threads do not survive a fork: pause the
 * pump before it and start it again after.  Its state lives in the struct,
 * so nothing in flight is lost.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_SSH_H
#define QC_SSH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct qc_ssh;

enum qc_strict {
	QC_STRICT_DEFAULT,     /* not given: the config's, else yes */
	QC_STRICT_YES,         /* unknown hosts are refused ("ask" too) */
	QC_STRICT_ACCEPT_NEW,  /* unknown hosts are added ("no" too) */
};

struct qc_ssh_opts {
	const char *alias;          /* the host as given on the command line */
	const char *user;           /* from user@host, or NULL */
	int port;                   /* -p; 0: the config's, else 22 */
	const char *config_file;    /* -F; NULL: ~/.ssh/config, /etc/ssh/ssh_config */
	const char *const *identity; /* -o IdentityFile=, in order */
	size_t n_identity;
	const char *known_hosts;    /* -o UserKnownHostsFile=, or NULL */
	enum qc_strict strict;
	bool password_stdin;        /* read the password from stdin */
	bool batch;                 /* never prompt or read stdin (reconnects) */
	bool identities_only;       /* -o IdentitiesOnly=yes: keys given only */
	int timeout_s;              /* unacknowledged data this long ends the
				     * connection (TCP_USER_TIMEOUT); 0: none */
	int keepalive_s;            /* ssh keepalives this often; 0: none */
	/* The TCP connect to sshd (OpenSSH: ConnectTimeout, in whole
	 * seconds); 0: 15 s, or ConnectTimeout=timeout_s for OpenSSH.  A
	 * session being resumed tries often and must give up soon. */
	int connect_timeout_ms;
	/* One attempt of many (resuming): a host that cannot be reached
	 * is logged at debug level only, not once per attempt. */
	bool retrying;
	/* The OpenSSH client (see "When OpenSSH" above): -o ssh_command=
	 * (split on blanks), or NULL for `ssh` when needed. */
	const char *ssh_command;
	/* -o Keyword=value options for it (ProxyJump=, ...), in order. */
	const char *const *ssh_extra;
	size_t n_ssh_extra;
};

/* How the remote command ended; `known` is false when the channel closed
 * without saying (or the connection broke). */
struct qc_ssh_exit {
	bool known;
	int status;                 /* exit status, when not signalled */
	char signal[32];            /* "TERM" when killed by a signal */
};

/* "yes", "ask", "accept-new", "no", "off" (as ssh): 0, or -EINVAL. */
int qc_ssh_parse_strict(const char *s, enum qc_strict *out);

/* Once, while the process has a single thread; and once at the end. */
int qc_ssh_global_init(void);
void qc_ssh_global_exit(void);

/*
 * A TCP connection to `sa` within `timeout_ms`: the connected socket
 * (close-on-exec, blocking) or a negative errno (-ETIMEDOUT).
 */
int qc_ssh_tcp_connect(const struct sockaddr *sa, socklen_t len,
		       int timeout_ms);

int qc_ssh_connect(struct qc_ssh **out, const struct qc_ssh_opts *o);

/* The host as named to the user, "user@alias", for messages. */
const char *qc_ssh_name(const struct qc_ssh *s);
/* The host alias alone, as given on the command line. */
const char *qc_ssh_host(const struct qc_ssh *s);

/* The address of the sshd we are connected to (where the server runs). */
int qc_ssh_peer(const struct qc_ssh *s, struct sockaddr_storage *ss,
		socklen_t *len);

/* True when the host is reached through a ProxyJump or ProxyCommand. */
bool qc_ssh_proxied(const struct qc_ssh *s);

/* Opens a session channel and runs `command` through the remote shell. */
int qc_ssh_exec(struct qc_ssh *s, const char *command);

/*
 * Starts the pump.  The first call creates the socketpair and stores our
 * end in *fd, which the caller then owns and closes; later calls (after a
 * pause) restart the thread and leave *fd alone, and do nothing once the
 * pump has finished.
 */
int qc_ssh_pump_start(struct qc_ssh *s, int *fd);
/* Stops the pump thread without changing anything else. */
void qc_ssh_pump_pause(struct qc_ssh *s);

/*
 * Waits up to `timeout_ms` for the pump to finish (the channel closed or
 * the connection broke).  0 with *exit filled, or -ETIMEDOUT.
 */
int qc_ssh_wait(struct qc_ssh *s, int timeout_ms, struct qc_ssh_exit *exit);

/* Copies the first bytes the command wrote to its stderr (NUL-terminated;
 * for recognising "command not found"). */
void qc_ssh_stderr_head(struct qc_ssh *s, char *buf, size_t size);

/* Stops the pump, closes the channel and the connection (each step with a
 * short deadline, so a dead link cannot hang an unmount) and frees. */
void qc_ssh_free(struct qc_ssh *s);

#endif /* QC_SSH_H */
