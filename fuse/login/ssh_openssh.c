// SPDX-License-Identifier: MIT
/* When the OpenSSH client logs in instead of libssh2, and its command
 * line (ssh.h, "When OpenSSH"; sshproc.h). */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"
#include "login/ssh_internal.h"

/* `ssh` in PATH, for the automatic hand-over. */
bool qc_ssh_openssh_available(void)
{
	const char *path = getenv("PATH");
	char *copy, *save = NULL, buf[PATH_MAX];
	bool found = false;

	copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	if (!copy)
		return false;
	for (char *d = strtok_r(copy, ":", &save); d && !found;
	     d = strtok_r(NULL, ":", &save)) {
		snprintf(buf, sizeof(buf), "%s/ssh", *d ? d : ".");
		found = access(buf, X_OK) == 0;
	}
	free(copy);
	return found;
}

/* The keyword of an "-o Keyword=value" option, compared ignoring case. */
static bool extra_is(const struct qc_ssh_opts *o, const char *kw)
{
	size_t n = strlen(kw);

	for (size_t i = 0; i < o->n_ssh_extra; i++)
		if (strncasecmp(o->ssh_extra[i], kw, n) == 0 &&
		    o->ssh_extra[i][n] == '=')
			return true;
	return false;
}

/* Why this login needs the OpenSSH client from the start, or NULL. */
const char *qc_ssh_openssh_needed(const struct qc_ssh_login *l,
				  const struct qc_ssh_opts *o)
{
	if (o->ssh_command)
		return "-o ssh_command";
	if (extra_is(o, "ProxyJump") || (l->cfg.proxy_jump &&
					 l->cfg.proxy_jump[0]))
		return "ProxyJump";
	if (extra_is(o, "ProxyCommand") || (l->cfg.proxy_command &&
					    l->cfg.proxy_command[0]))
		return "ProxyCommand";
	if (extra_is(o, "CertificateFile") || l->cfg.certificate)
		return "CertificateFile";
	return NULL;
}

/* The program and its own words: -o ssh_command= split on blanks. */
static int openssh_program(struct qc_sshproc_args *a, const char *cmd)
{
	char *copy, *save = NULL;
	int r = 0;

	if (!cmd)
		return qc_sshproc_arg(a, "ssh");
	copy = strdup(cmd);
	if (!copy)
		return -ENOMEM;
	for (char *w = strtok_r(copy, " \t", &save); w && r == 0;
	     w = strtok_r(NULL, " \t", &save))
		r = qc_sshproc_arg(a, "%s", w);
	free(copy);
	if (r == 0 && a->argc == 0) {
		qft_err("empty ssh_command");
		r = -EINVAL;
	}
	return r;
}

/*
 * The ssh command line for this login, run by qc_ssh_exec.  What qftfs
 * decided from its own options goes on it; what ~/.ssh/config says, ssh
 * reads itself -- from the home directory qftfs uses, which ssh would
 * otherwise take from the password database.
 */
int qc_ssh_openssh_prepare(struct qc_ssh *s, const struct qc_ssh_login *l,
			   const struct qc_ssh_opts *o)
{
	struct qc_sshproc_args *a = &s->pargs;
	struct passwd pw, *res = NULL;
	char buf[4096], *path;
	bool other_home;
	int r;

	if (o->password_stdin) {
		qft_err("-o password_stdin works with qftfs's own ssh login "
			"only, not with the OpenSSH client that %s needs; use a "
			"key or ssh-agent", s->alias);
		return -EINVAL;
	}
	getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res);
	other_home = !res || strcmp(res->pw_dir, l->home) != 0;
	s->openssh = true;
	s->proxied = extra_is(o, "ProxyJump") || extra_is(o, "ProxyCommand") ||
		     (l->cfg.proxy_jump && l->cfg.proxy_jump[0]) ||
		     (l->cfg.proxy_command && l->cfg.proxy_command[0]);
	s->login_timeout_s = o->timeout_s > 0 ? o->timeout_s + 30 : 0;
	if ((r = openssh_program(a, o->ssh_command)) < 0)
		return r;
	/* No terminal, no forwarding of anything: a pipe for one command. */
	r = qc_sshproc_arg(a, "-T");
	if (!r) r = qc_sshproc_arg(a, "-x");
	if (!r) r = qc_sshproc_arg(a, "-a");
	if (!r) r = qc_sshproc_arg(a, "-oClearAllForwardings=yes");
	if (!r && o->batch)
		r = qc_sshproc_arg(a, "-oBatchMode=yes");
	if (!r && o->identities_only)
		r = qc_sshproc_arg(a, "-oIdentitiesOnly=yes");
	if (!r && o->connect_timeout_ms > 0)
		r = qc_sshproc_arg(a, "-oConnectTimeout=%d",
				   (o->connect_timeout_ms + 999) / 1000);
	else if (!r && o->timeout_s > 0)
		r = qc_sshproc_arg(a, "-oConnectTimeout=%d", o->timeout_s);
	if (!r && o->keepalive_s > 0)
		r = qc_sshproc_arg(a, "-oServerAliveInterval=%d",
				   o->keepalive_s);
	if (!r && o->port)
		r = qc_sshproc_arg(a, "-p%d", o->port);
	if (!r && o->user)
		r = qc_sshproc_arg(a, "-l%s", o->user);
	if (!r && o->config_file) {
		r = qc_sshproc_arg(a, "-F%s", o->config_file);
	} else if (!r && other_home) {
		if (asprintf(&path, "%s/.ssh/config", l->home) < 0)
			return -ENOMEM;
		if (access(path, R_OK) == 0)
			r = qc_sshproc_arg(a, "-F%s", path);
		free(path);
	}
	/* Keys qftfs would have tried: explicit ones always, the default
	 * ones when ssh would look for them elsewhere. */
	for (size_t i = 0; !r && i < l->n_identity; i++)
		if ((l->identity_explicit[i] || other_home) &&
		    access(l->identity[i], R_OK) == 0)
			r = qc_sshproc_arg(a, "-i%s", l->identity[i]);
	if (!r && (o->known_hosts || (other_home && !l->cfg.known_hosts_set)))
		r = qc_sshproc_arg(a, "-oUserKnownHostsFile=%s",
				   l->known_hosts[0]);
	/* qftfs refuses unknown hosts unless told otherwise; ssh would ask. */
	if (!r && (o->strict != QC_STRICT_DEFAULT || !l->cfg.strict))
		r = qc_sshproc_arg(a, "-oStrictHostKeyChecking=%s",
				   l->strict == QC_STRICT_ACCEPT_NEW ?
				   "accept-new" : "yes");
	for (size_t i = 0; !r && i < o->n_ssh_extra; i++)
		r = qc_sshproc_arg(a, "-o%s", o->ssh_extra[i]);
	return r;
}
