/* SPDX-License-Identifier: MIT */
/*
 * What the files of the ssh module (qc_ssh_, ssh.h) share, and nothing
 * else includes:
 *
 *   ssh.c          connect, exec and free: the order of a login
 *   ssh_session.c  a session's names and address, libssh2's last error
 *   ssh_resolve.c  who we are and what ssh_config says for the host
 *   ssh_hostkey.c  the host key against known_hosts
 *   ssh_auth.c     agent, key files, password and keyboard-interactive
 *   ssh_openssh.c  when and how the OpenSSH client takes over (sshproc.h)
 *   ssh_pump.c     the channel pump thread
 *
 * Until the pump starts, the session is in libssh2's blocking mode with a
 * deadline on every call; the pump switches it to non-blocking and from
 * then on is the only thread that touches it, until qc_ssh_free().
 */
#ifndef QC_SSH_INTERNAL_H
#define QC_SSH_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libssh2.h>

#include "login/ssh.h"
#include "login/sshconf.h"
#include "login/sshproc.h"

#define PUMP_BUF               (64u * 1024u)
#define PUMP_LINE              1024u
#define ERR_HEAD               2048u
#define MAX_IDENTITIES         48

/* The pump's libssh2 calls that may send a packet (see pump_step). */
enum pump_op {
	OP_NONE,
	OP_WRITE,               /* channel data */
	OP_EOF,
	OP_READ,                /* a window adjustment, sent by a read */
	OP_READ_ERR,
	OP_CLOSE,
};

struct qc_ssh {
	/* The OpenSSH client instead of libssh2 (ssh.h, "When OpenSSH"):
	 * its command line until qc_ssh_exec runs it, then the process. */
	bool openssh;
	bool proxied;           /* behind ProxyJump or ProxyCommand */
	struct qc_sshproc_args pargs;
	struct qc_sshproc *proc;
	int login_timeout_s;

	LIBSSH2_SESSION *session;
	LIBSSH2_CHANNEL *channel;
	int sock;
	char *alias;            /* the host as given */
	char *name;             /* user@alias, for messages */
	char *user;
	char *hostname;         /* what we connected to */
	int port;
	char *password;         /* login only: from stdin with password_stdin */
	bool use_tty;           /* login only: prompts go to /dev/tty */

	int keepalive_s;        /* immutable: libssh2 keepalive interval */
	int64_t ka_due;         /* pump: CLOCK_MONOTONIC ms of the next try */
	int fd;                 /* the pump's end of the socketpair, or -1 */
	int wake[2];            /* a byte here asks the pump to look at `pause` */
	pthread_t thread;
	bool running;           /* owner thread only */

	/* The pump thread's while it runs, the owner's while it is paused. */
	uint8_t up[PUMP_BUF];   /* from our descriptor, for the channel */
	size_t up_len;
	uint8_t down[PUMP_BUF]; /* from the channel, for our descriptor */
	size_t down_len;
	char line[PUMP_LINE];   /* a partial stderr line */
	size_t line_len;
	bool fd_eof;            /* our descriptor's peer shut its write side */
	bool eof_sent;          /* EOF sent on the channel */
	bool out_eof;           /* the command's stdout ended */
	bool err_eof;           /* the command's stderr ended */
	bool fd_shut;           /* our descriptor's write side is shut */
	bool client_gone;       /* our descriptor's peer stopped reading */
	enum pump_op pending;   /* the call whose packet is half sent */

	pthread_mutex_t lock;
	pthread_cond_t cond;    /* lock: broadcast when `finished` is set */
	bool pause;             /* lock */
	bool finished;          /* lock: channel closed or connection broken */
	struct qc_ssh_exit exit; /* lock: valid once finished */
	char err_head[ERR_HEAD]; /* lock: the first stderr bytes */
	size_t err_head_len;    /* lock */
};

/* Everything login needs that does not outlive it. */
struct qc_ssh_login {
	char *home;
	char *local_user;
	struct qc_sshconf cfg;
	enum qc_strict strict;
	char *known_hosts[QC_SSHCONF_MAX_FILES + 1];
	size_t n_known_hosts;
	char *identity[MAX_IDENTITIES];
	bool identity_explicit[MAX_IDENTITIES];
	size_t n_identity;
};

/* ssh_session.c */
const char *qc_ssh_errmsg(struct qc_ssh *s);
int64_t qc_ssh_now_ms(void);

/* ssh_resolve.c */
int qc_ssh_login_init(struct qc_ssh_login *l, const struct qc_ssh_opts *o);
void qc_ssh_login_free(struct qc_ssh_login *l);
int qc_ssh_login_config(struct qc_ssh_login *l, const struct qc_ssh_opts *o);
int qc_ssh_login_resolve(struct qc_ssh_login *l, struct qc_ssh *s,
			 const struct qc_ssh_opts *o);

/* ssh_hostkey.c */
void qc_ssh_kh_load(LIBSSH2_KNOWNHOSTS *kh, const char *path);
int qc_ssh_kh_name(const struct qc_ssh *s, char *buf, size_t size);
int qc_ssh_kh_prefs(struct qc_ssh *s, LIBSSH2_KNOWNHOSTS *kh, const char *name);
int qc_ssh_hostkey_check(struct qc_ssh *s, struct qc_ssh_login *l,
			 LIBSSH2_KNOWNHOSTS *kh, const char *name);

/* ssh_auth.c */
void qc_ssh_secret_free(char *p);
int qc_ssh_authenticate(struct qc_ssh *s, struct qc_ssh_login *l,
			const struct qc_ssh_opts *o);

/* ssh_openssh.c */
bool qc_ssh_openssh_available(void);
const char *qc_ssh_openssh_needed(const struct qc_ssh_login *l,
				  const struct qc_ssh_opts *o);
int qc_ssh_openssh_prepare(struct qc_ssh *s, const struct qc_ssh_login *l,
			   const struct qc_ssh_opts *o);

#endif /* QC_SSH_INTERNAL_H */
