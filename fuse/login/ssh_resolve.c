// SPDX-License-Identifier: MIT
/* Who we are and what the ssh config says for the host (see
 * ssh_internal.h). */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"
#include "login/ssh_internal.h"

int qc_ssh_parse_strict(const char *s, enum qc_strict *out)
{
	if (strcasecmp(s, "yes") == 0 || strcasecmp(s, "ask") == 0)
		*out = QC_STRICT_YES;
	else if (strcasecmp(s, "accept-new") == 0 ||
		 strcasecmp(s, "no") == 0 || strcasecmp(s, "off") == 0)
		*out = QC_STRICT_ACCEPT_NEW;
	else
		return -EINVAL;
	return 0;
}

int qc_ssh_login_init(struct qc_ssh_login *l, const struct qc_ssh_opts *o)
{
	struct passwd pw, *res = NULL;
	const char *home = getenv("HOME");
	char buf[4096];

	memset(l, 0, sizeof(*l));
	qc_sshconf_init(&l->cfg);
	getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res);
	/*
	 * $HOME wins over the password database, so that a test (or a user
	 * with a moved home) can point qftfs at another ~/.ssh -- but only a
	 * HOME that is ours: mount(8) runs a user's fstab mount with root's
	 * HOME still set, and root's ~/.ssh is neither readable nor meant.
	 */
	if (home && home[0] == '/' && res) {
		struct stat hst;

		if (stat(home, &hst) < 0 || hst.st_uid != getuid())
			home = NULL;
	}
	if (!home || home[0] != '/')
		home = res ? res->pw_dir : NULL;
	if (!home) {
		qft_err("cannot find the home directory: set HOME");
		return -ENOENT;
	}
	l->home = strdup(home);
	if (res)
		l->local_user = strdup(res->pw_name);
	else if (getenv("USER"))
		l->local_user = strdup(getenv("USER"));
	else if (asprintf(&l->local_user, "%u", (unsigned)getuid()) < 0)
		l->local_user = NULL;
	if (!l->home || !l->local_user)
		return -ENOMEM;
	l->strict = o->strict;
	return 0;
}

void qc_ssh_login_free(struct qc_ssh_login *l)
{
	free(l->home);
	free(l->local_user);
	qc_sshconf_free(&l->cfg);
	for (size_t i = 0; i < l->n_known_hosts; i++)
		free(l->known_hosts[i]);
	for (size_t i = 0; i < l->n_identity; i++)
		free(l->identity[i]);
}

int qc_ssh_login_config(struct qc_ssh_login *l, const struct qc_ssh_opts *o)
{
	char *path;
	int r;

	if (o->config_file)
		return qc_sshconf_read(&l->cfg, o->config_file, o->alias,
				       l->home, true);
	if (asprintf(&path, "%s/.ssh/config", l->home) < 0)
		return -ENOMEM;
	r = qc_sshconf_read(&l->cfg, path, o->alias, l->home, false);
	free(path);
	if (r < 0 && r != -ENOENT)
		return r;
	/* As ssh: the system file after the user's, unless -F was given. */
	r = qc_sshconf_read(&l->cfg, "/etc/ssh/ssh_config", o->alias, l->home,
			    false);
	return r == -ENOENT ? 0 : r;
}

static void tokens(const struct qc_ssh_login *l, const struct qc_ssh *s,
		   struct qc_sshconf_tokens *t)
{
	t->home = l->home;
	t->local_user = l->local_user;
	t->host = s->hostname;
	t->alias = s->alias;
	t->user = s->user;
	t->port = s->port;
}

static char *expand(const struct qc_ssh_login *l, const struct qc_ssh *s,
		    const char *what, const char *v)
{
	struct qc_sshconf_tokens t;
	char *out;

	tokens(l, s, &t);
	out = qc_sshconf_expand(v, &t);
	if (!out)
		qft_err("cannot expand %s '%s': %s", what, v,
			errno == EINVAL ? "unknown %-token or ~user" :
			strerror(errno));
	return out;
}

static int add_identity(struct qc_ssh_login *l, char *path, bool explicit)
{
	for (size_t i = 0; i < l->n_identity; i++) {
		if (strcmp(l->identity[i], path) == 0) {
			l->identity_explicit[i] |= explicit;
			free(path);
			return 0;
		}
	}
	if (l->n_identity == MAX_IDENTITIES) {
		free(path);
		return 0;
	}
	l->identity_explicit[l->n_identity] = explicit;
	l->identity[l->n_identity++] = path;
	return 0;
}

/* Fixes host name, port, user, key files and known_hosts files. */
int qc_ssh_login_resolve(struct qc_ssh_login *l, struct qc_ssh *s,
			 const struct qc_ssh_opts *o)
{
	static const char *const defaults[] = {
		"~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa",
	};
	struct qc_sshconf_tokens t = { 0 };
	char *p;

	/* HostName may only use %h (the alias) and %%. */
	t.home = l->home;
	t.host = o->alias;
	t.alias = o->alias;
	s->hostname = l->cfg.hostname ? qc_sshconf_expand(l->cfg.hostname, &t)
				      : strdup(o->alias);
	if (!s->hostname) {
		qft_err("bad HostName '%s' in the ssh config", l->cfg.hostname);
		return -EINVAL;
	}
	if (s->hostname[0] == '-' || !s->hostname[0]) {
		qft_err("invalid host name '%s'", s->hostname);
		return -EINVAL;
	}
	s->port = o->port ? o->port : l->cfg.port ? l->cfg.port : 22;
	s->user = strdup(o->user ? o->user : l->cfg.user ? l->cfg.user
						  : l->local_user);
	if (!s->user)
		return -ENOMEM;
	if (asprintf(&s->name, "%s@%s", s->user, s->alias) < 0) {
		s->name = NULL;
		return -ENOMEM;
	}

	for (size_t i = 0; i < o->n_identity; i++) {
		if (!(p = expand(l, s, "IdentityFile", o->identity[i])))
			return -EINVAL;
		add_identity(l, p, true);
	}
	for (size_t i = 0; i < l->cfg.n_identity; i++) {
		if (!(p = expand(l, s, "IdentityFile", l->cfg.identity[i])))
			return -EINVAL;
		add_identity(l, p, true);
	}
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		if (!(p = expand(l, s, "IdentityFile", defaults[i])))
			return -ENOMEM;
		add_identity(l, p, false);
	}

	if (o->known_hosts) {
		if (!(p = expand(l, s, "UserKnownHostsFile", o->known_hosts)))
			return -EINVAL;
		l->known_hosts[l->n_known_hosts++] = p;
	} else if (l->cfg.known_hosts_set) {
		for (size_t i = 0; i < l->cfg.n_known_hosts; i++) {
			p = expand(l, s, "UserKnownHostsFile",
				   l->cfg.known_hosts[i]);
			if (!p)
				return -EINVAL;
			l->known_hosts[l->n_known_hosts++] = p;
		}
	} else {
		if (asprintf(&p, "%s/.ssh/known_hosts", l->home) < 0)
			return -ENOMEM;
		l->known_hosts[l->n_known_hosts++] = p;
	}

	if (l->strict == QC_STRICT_DEFAULT && l->cfg.strict &&
	    qc_ssh_parse_strict(l->cfg.strict, &l->strict) < 0) {
		qft_err("bad StrictHostKeyChecking '%s' in the ssh config",
			l->cfg.strict);
		return -EINVAL;
	}
	if (l->strict == QC_STRICT_DEFAULT)
		l->strict = QC_STRICT_YES;
	return 0;
}
