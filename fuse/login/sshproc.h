/* SPDX-License-Identifier: MIT */
/*
 * The OpenSSH client as the ssh side of a remote mount, for what libssh2
 * cannot do: ProxyJump and ProxyCommand, certificates, RSA keys signed
 * with rsa-sha2-256/512 (libssh2 1.10 signs with SHA-1 only), FIDO keys,
 * and anything else ~/.ssh/config says, read by ssh itself.
 * ssh_openssh.c decides when (ssh.h) and writes its command line; the
 * qc_ssh_ calls hide the difference from bootstrap.c.
 *
 * `ssh -T ... HOST 'echo MARKER; COMMAND'` runs with a socketpair
 * as its stdin and stdout and a pipe as its stderr.  The marker tells a
 * successful login from a failed one: ssh's own complaint ("Permission
 * denied (publickey)") is then said with what to change.  After it, the
 * descriptor carries the command's stdin and stdout, and a reader thread
 * logs its stderr line by line; like the libssh2 pump, the thread is
 * paused around fuse_daemonize().
 *
 * Error convention: 0 or a negative errno, with the reason said.
 */
#ifndef QC_SSHPROC_H
#define QC_SSHPROC_H

#include <stdbool.h>
#include <stddef.h>

#include "login/ssh.h"

struct qc_sshproc;

/* Words of the ssh command line before the destination; the struct owns
 * them. */
struct qc_sshproc_args {
	char **argv;
	size_t argc, cap;
};

int qc_sshproc_arg(struct qc_sshproc_args *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void qc_sshproc_args_free(struct qc_sshproc_args *a);

/*
 * Runs `args` + "--" + `dest` + the marker and `command`; waits for the
 * login (at most `timeout_s` seconds, 0: 60).  `label` names the host in
 * messages.  Takes the args on success and failure.
 */
int qc_sshproc_start(struct qc_sshproc **out, struct qc_sshproc_args *args,
		     const char *dest, const char *command, const char *label,
		     int timeout_s);

int qc_sshproc_pump_start(struct qc_sshproc *p, int *fd);
void qc_sshproc_pump_pause(struct qc_sshproc *p);
int qc_sshproc_wait(struct qc_sshproc *p, int timeout_ms,
		    struct qc_ssh_exit *exit);
void qc_sshproc_stderr_head(struct qc_sshproc *p, char *buf, size_t size);
void qc_sshproc_free(struct qc_sshproc *p);

#endif /* QC_SSHPROC_H */
