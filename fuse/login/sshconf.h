/* SPDX-License-Identifier: MIT */
/*
 * The part of ssh_config(5) that qftfs honours, so that a Host alias
 * means the same to `qftfs alias:dir /mnt` as to `ssh alias`.
 *
 * For one host alias, from the Host blocks whose patterns match it:
 * HostName, User, Port, IdentityFile, UserKnownHostsFile and
 * StrictHostKeyChecking, IdentitiesOnly; and ProxyJump, ProxyCommand and CertificateFile,
 * which make qftfs log in with the OpenSSH client (ssh.h).  As in ssh, the first value obtained for a keyword
 * wins, so specific blocks go before `Host *`; IdentityFile and
 * UserKnownHostsFile are lists that accumulate.  Host patterns use * and
 * ?, several per line, and !pattern negates.  `Match all`, `Match host`
 * and `Match originalhost` are understood; any other Match block is
 * skipped (said at debug level).  Include is followed, with globs,
 * relative to ~/.ssh.  Other keywords are ssh's business and ignored.
 *
 * Values are stored as written (tokens such as %h and ~ unexpanded): the
 * caller expands them with qc_sshconf_expand() once the remote user and
 * host are known.  The struct owns every string in it.
 *
 * Error convention: 0 or a negative errno; a malformed line is -EINVAL
 * after one message naming the file and line.
 */
#ifndef QC_SSHCONF_H
#define QC_SSHCONF_H

#include <stdbool.h>
#include <stddef.h>

#define QC_SSHCONF_MAX_FILES 32   /* IdentityFile / UserKnownHostsFile */

struct qc_sshconf {
	char *hostname;                 /* NULL when not set */
	char *user;
	int port;                       /* 0 when not set */
	char *identity[QC_SSHCONF_MAX_FILES];
	size_t n_identity;
	char *known_hosts[QC_SSHCONF_MAX_FILES];
	size_t n_known_hosts;
	bool known_hosts_set;           /* "UserKnownHostsFile none" too */
	char *strict;                   /* StrictHostKeyChecking, as written */
	/* What only the OpenSSH client can do (ssh.h, "When OpenSSH"):
	 * the first value of each, as written. */
	char *proxy_jump;
	char *proxy_command;            /* its words joined by blanks */
	char *certificate;              /* CertificateFile */
	char *identities_only;          /* IdentitiesOnly, as written */
};

/* What %-tokens and ~ expand to (ssh_config(5) TOKENS). */
struct qc_sshconf_tokens {
	const char *home;        /* ~ and %d */
	const char *local_user;  /* %u */
	const char *host;        /* %h: the remote host name (HostName) */
	const char *alias;       /* %n: the name given on the command line */
	const char *user;        /* %r: the remote user */
	int port;                /* %p */
};

void qc_sshconf_init(struct qc_sshconf *cfg);
void qc_sshconf_free(struct qc_sshconf *cfg);

/*
 * Reads `path` for `host` into `cfg`, keeping values already there (the
 * first obtained wins, so read the user's file before the system's).
 * A missing file is -ENOENT, with no message unless `must_exist`.
 * `home` resolves ~ in Include.
 */
int qc_sshconf_read(struct qc_sshconf *cfg, const char *path,
		    const char *host, const char *home, bool must_exist);

/* One pattern (* and ?) against `s`, ignoring ASCII case. */
bool qc_sshconf_pattern(const char *pattern, const char *s);
/*
 * A list of patterns separated by blanks or commas: true when `s`
 * matches at least one and no !negated one.
 */
bool qc_sshconf_patterns(const char *list, const char *s);

/*
 * Expands a leading ~ or ~/ and the tokens %d %u %h %n %r %p %% in `in`.
 * Returns a malloc'd string, or NULL with errno set (EINVAL for an
 * unknown token or ~user, ENOMEM).
 */
char *qc_sshconf_expand(const char *in, const struct qc_sshconf_tokens *t);

#endif /* QC_SSHCONF_H */
