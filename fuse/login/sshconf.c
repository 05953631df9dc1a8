// SPDX-License-Identifier: MIT
/* Reading ssh_config(5) for one host (see sshconf.h). */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"
#include "login/sshconf.h"

#define CONF_MAX_ARGS   64
/* ssh's own limit on nested Include. */
#define CONF_MAX_DEPTH  16

struct conf_ctx {
	struct qc_sshconf *cfg;
	const char *host;        /* the alias as given */
	const char *home;
	const char *include_dir; /* where a relative Include is looked up */
	int depth;
};

void qc_sshconf_init(struct qc_sshconf *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
}

void qc_sshconf_free(struct qc_sshconf *cfg)
{
	free(cfg->hostname);
	free(cfg->user);
	free(cfg->strict);
	free(cfg->proxy_jump);
	free(cfg->proxy_command);
	free(cfg->certificate);
	free(cfg->identities_only);
	for (size_t i = 0; i < cfg->n_identity; i++)
		free(cfg->identity[i]);
	for (size_t i = 0; i < cfg->n_known_hosts; i++)
		free(cfg->known_hosts[i]);
	qc_sshconf_init(cfg);
}

bool qc_sshconf_pattern(const char *p, const char *s)
{
	const char *star_p = NULL, *star_s = NULL;

	/* Greedy with one backtrack point: the last '*' seen. */
	while (*s) {
		if (*p == '*') {
			star_p = ++p;
			star_s = s;
		} else if (*p && (*p == '?' ||
				  tolower((unsigned char)*p) ==
				  tolower((unsigned char)*s))) {
			p++;
			s++;
		} else if (star_p) {
			p = star_p;
			s = ++star_s;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

bool qc_sshconf_patterns(const char *list, const char *s)
{
	char buf[1024];
	bool hit = false;
	size_t n;

	for (const char *p = list; *p;) {
		bool neg;

		p += strspn(p, " \t,");
		n = strcspn(p, " \t,");
		if (n == 0)
			break;
		if (n >= sizeof(buf)) {
			p += n;
			continue;
		}
		memcpy(buf, p, n);
		buf[n] = '\0';
		p += n;
		neg = buf[0] == '!';
		if (qc_sshconf_pattern(buf + neg, s)) {
			if (neg)
				return false;
			hit = true;
		}
	}
	return hit;
}

/*
 * Splits `line` in place into words: blanks separate, "double" and
 * 'single' quotes group, a backslash takes the next character literally,
 * and an unquoted word starting with '#' ends the line.  -EINVAL for an
 * unterminated quote or too many words.
 */
static int conf_split(char *line, char **argv, int *argc)
{
	char *r = line, *w = line;
	int n = 0;

	for (;;) {
		char quote = 0;

		while (*r == ' ' || *r == '\t' || *r == '\r' || *r == '\n')
			r++;
		if (*r == '\0' || *r == '#')
			break;
		if (n == CONF_MAX_ARGS)
			return -EINVAL;
		argv[n++] = w;
		while (*r) {
			if (quote) {
				if (*r == quote) {
					quote = 0;
					r++;
					continue;
				}
				if (*r == '\\' && quote == '"' &&
				    (r[1] == '"' || r[1] == '\\'))
					r++;
			} else if (*r == '"' || *r == '\'') {
				quote = *r++;
				continue;
			} else if (*r == ' ' || *r == '\t' || *r == '\r' ||
				   *r == '\n') {
				break;
			} else if (*r == '\\' && r[1]) {
				r++;
			}
			*w++ = *r++;
		}
		if (quote)
			return -EINVAL;
		if (*r)
			r++;
		*w++ = '\0';
	}
	*argc = n;
	return 0;
}

/*
 * The keyword ends at a blank or '='; "Key=Value", "Key = Value" and
 * "Key Value" are all the same line.
 */
static char *conf_keyword(char *line, char **rest)
{
	char *kw, *p;

	p = line + strspn(line, " \t");
	kw = p;
	p += strcspn(p, " \t=\r\n");
	if (p == kw)
		return NULL;
	if (*p) {
		bool eq = *p == '=';

		*p++ = '\0';
		p += strspn(p, " \t");
		if (!eq && *p == '=') {
			p++;
			p += strspn(p, " \t");
		}
	}
	*rest = p;
	return kw;
}

static int conf_add(char **list, size_t *n, const char *v, const char *what,
		    const char *file, int lineno)
{
	if (*n == QC_SSHCONF_MAX_FILES) {
		qft_warn("%s:%d: more than %d %s entries; ignoring '%s'",
			 file, lineno, QC_SSHCONF_MAX_FILES, what, v);
		return 0;
	}
	list[*n] = strdup(v);
	if (!list[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int conf_set(char **field, const char *v)
{
	if (*field)
		return 0;
	*field = strdup(v);
	return *field ? 0 : -ENOMEM;
}

/* Host p1 p2 !p3: applies when one pattern matches and no negated one. */
static bool conf_host_matches(char **argv, int argc, const char *host)
{
	bool hit = false;

	for (int i = 0; i < argc; i++) {
		bool neg = argv[i][0] == '!';

		if (qc_sshconf_pattern(argv[i] + neg, host)) {
			if (neg)
				return false;
			hit = true;
		}
	}
	return hit;
}

/*
 * Match with the criteria qftfs can judge before connecting: all, host
 * (the name after HostName) and originalhost (the alias), each possibly
 * negated with '!'.  Anything else makes the block not apply.
 */
static bool conf_match(struct conf_ctx *c, char **argv, int argc,
		       const char *file, int lineno)
{
	const char *target = c->cfg->hostname ? c->cfg->hostname : c->host;

	if (argc == 1 && strcasecmp(argv[0], "all") == 0)
		return true;
	for (int i = 0; i < argc; i += 2) {
		const char *attr = argv[i];
		bool neg = attr[0] == '!', hit;

		attr += neg;
		if (i + 1 >= argc) {
			qft_debug("%s:%d: Match %s without an argument; "
				  "skipping the block", file, lineno, attr);
			return false;
		}
		if (strcasecmp(attr, "host") == 0)
			hit = qc_sshconf_patterns(argv[i + 1], target);
		else if (strcasecmp(attr, "originalhost") == 0)
			hit = qc_sshconf_patterns(argv[i + 1], c->host);
		else {
			qft_debug("%s:%d: Match %s is not supported by qftfs; "
				  "skipping the block", file, lineno, attr);
			return false;
		}
		if (hit == neg)
			return false;
	}
	return true;
}

static int conf_read_file(struct conf_ctx *c, const char *path,
			  bool must_exist, bool never_match);

static int conf_include(struct conf_ctx *c, char **argv, int argc,
			const char *file, int lineno)
{
	for (int i = 0; i < argc; i++) {
		char *pat = NULL;
		glob_t g;
		int r;

		if (argv[i][0] == '~' && argv[i][1] == '/')
			r = asprintf(&pat, "%s%s", c->home, argv[i] + 1);
		else if (argv[i][0] == '/')
			r = asprintf(&pat, "%s", argv[i]);
		else
			r = asprintf(&pat, "%s/%s", c->include_dir, argv[i]);
		if (r < 0)
			return -ENOMEM;
		r = glob(pat, 0, NULL, &g);
		free(pat);
		if (r == GLOB_NOMATCH)
			continue;
		if (r != 0)
			return r == GLOB_NOSPACE ? -ENOMEM : -EIO;
		for (size_t k = 0; k < g.gl_pathc && r == 0; k++)
			r = conf_read_file(c, g.gl_pathv[k], false, false);
		globfree(&g);
		if (r < 0 && r != -ENOENT) {
			if (r == -ELOOP)
				qft_err("%s:%d: Include nested too deeply", file,
					lineno);
			return r;
		}
	}
	return 0;
}

static int conf_port(const char *v, int *port)
{
	char *end;
	long p;

	errno = 0;
	p = strtol(v, &end, 10);
	if (end == v || *end || errno || p < 1 || p > 65535)
		return -EINVAL;
	*port = (int)p;
	return 0;
}

/* ProxyJump, ProxyCommand, CertificateFile: noted, for ssh_openssh.c to
 * hand the login to the OpenSSH client, which reads them itself. */
static int conf_openssh(struct qc_sshconf *cfg, const char *kw, char **argv,
			int argc, const char *file, int lineno)
{
	char **slot = strcasecmp(kw, "proxyjump") == 0 ? &cfg->proxy_jump :
		      strcasecmp(kw, "proxycommand") == 0 ?
		      &cfg->proxy_command : &cfg->certificate;
	size_t len = 0;
	char *v;

	if (argc < 1) {
		qft_err("%s:%d: %s needs an argument", file, lineno, kw);
		return -EINVAL;
	}
	if (*slot)
		return 0;               /* the first value wins */
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	v = malloc(len);
	if (!v)
		return -ENOMEM;
	v[0] = '\0';
	for (int i = 0; i < argc; i++) {
		if (i)
			strcat(v, " ");
		strcat(v, argv[i]);
	}
	/* "none" switches the proxy off, as in ssh. */
	if (strcasecmp(v, "none") == 0)
		v[0] = '\0';
	*slot = v;
	return 0;
}

/* One line with its keyword; `active` says whether the block applies. */
static int conf_line(struct conf_ctx *c, char *line, bool *active,
		     bool never_match, const char *file, int lineno)
{
	struct qc_sshconf *cfg = c->cfg;
	char *argv[CONF_MAX_ARGS], *kw, *rest;
	int argc, r;

	kw = conf_keyword(line, &rest);
	if (!kw || kw[0] == '#')
		return 0;
	if (conf_split(rest, argv, &argc) < 0) {
		qft_err("%s:%d: unbalanced quotes or too many arguments", file,
			lineno);
		return -EINVAL;
	}
	if (strcasecmp(kw, "host") == 0) {
		*active = !never_match && conf_host_matches(argv, argc, c->host);
		return 0;
	}
	if (strcasecmp(kw, "match") == 0) {
		*active = !never_match && conf_match(c, argv, argc, file,
						     lineno);
		return 0;
	}
	if (!*active)
		return 0;
	if (strcasecmp(kw, "include") == 0)
		return conf_include(c, argv, argc, file, lineno);

	if (strcasecmp(kw, "proxyjump") == 0 ||
	    strcasecmp(kw, "proxycommand") == 0 ||
	    strcasecmp(kw, "certificatefile") == 0)
		return conf_openssh(cfg, kw, argv, argc, file, lineno);
	if (strcasecmp(kw, "hostname") == 0 || strcasecmp(kw, "user") == 0 ||
	    strcasecmp(kw, "port") == 0 ||
	    strcasecmp(kw, "stricthostkeychecking") == 0 ||
	    strcasecmp(kw, "identitiesonly") == 0 ||
	    strcasecmp(kw, "identityfile") == 0) {
		if (argc != 1) {
			qft_err("%s:%d: %s takes one argument", file, lineno,
				kw);
			return -EINVAL;
		}
	} else if (strcasecmp(kw, "userknownhostsfile") != 0) {
		return 0;               /* ssh's business, not ours */
	}

	if (strcasecmp(kw, "hostname") == 0)
		return conf_set(&cfg->hostname, argv[0]);
	if (strcasecmp(kw, "user") == 0)
		return conf_set(&cfg->user, argv[0]);
	if (strcasecmp(kw, "stricthostkeychecking") == 0)
		return conf_set(&cfg->strict, argv[0]);
	if (strcasecmp(kw, "identitiesonly") == 0)
		return conf_set(&cfg->identities_only, argv[0]);
	if (strcasecmp(kw, "port") == 0) {
		int port;

		if (conf_port(argv[0], &port) < 0) {
			qft_err("%s:%d: bad port '%s'", file, lineno, argv[0]);
			return -EINVAL;
		}
		if (!cfg->port)
			cfg->port = port;
		return 0;
	}
	if (strcasecmp(kw, "identityfile") == 0) {
		if (strcasecmp(argv[0], "none") == 0)
			return 0;
		return conf_add(cfg->identity, &cfg->n_identity, argv[0],
				"IdentityFile", file, lineno);
	}
	/* UserKnownHostsFile: a list, and only the first line counts. */
	if (cfg->known_hosts_set)
		return 0;
	cfg->known_hosts_set = true;
	for (int i = 0; i < argc; i++) {
		if (strcasecmp(argv[i], "none") == 0)
			continue;
		r = conf_add(cfg->known_hosts, &cfg->n_known_hosts, argv[i],
			     "UserKnownHostsFile", file, lineno);
		if (r < 0)
			return r;
	}
	return 0;
}

static int conf_read_file(struct conf_ctx *c, const char *path,
			  bool must_exist, bool never_match)
{
	/* The top of a file applies to every host, like `Host *`. */
	bool active = !never_match;
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, r = 0;
	FILE *f;

	if (c->depth >= CONF_MAX_DEPTH)
		return -ELOOP;
	f = fopen(path, "re");
	if (!f) {
		r = -errno;
		if (must_exist || r != -ENOENT)
			qft_err("cannot read ssh config %s: %s", path,
				strerror(-r));
		return r;
	}
	c->depth++;
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		r = conf_line(c, line, &active, never_match, path, lineno);
		if (r < 0)
			break;
	}
	if (r == 0 && ferror(f))
		r = -EIO;
	c->depth--;
	free(line);
	fclose(f);
	return r;
}

int qc_sshconf_read(struct qc_sshconf *cfg, const char *path,
		    const char *host, const char *home, bool must_exist)
{
	struct conf_ctx c = {
		.cfg = cfg,
		.host = host,
		.home = home,
	};
	char *dir = NULL;
	int r;

	/* ssh resolves a relative Include of the user's file in ~/.ssh, of
	 * the system's in /etc/ssh. */
	if (strncmp(path, "/etc/ssh/", 9) == 0)
		c.include_dir = "/etc/ssh";
	else if (asprintf(&dir, "%s/.ssh", home) < 0)
		return -ENOMEM;
	else
		c.include_dir = dir;
	r = conf_read_file(&c, path, must_exist, false);
	free(dir);
	return r;
}

/* Appends `s` to the string being built in *buf (len, cap). */
static int put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t ncap = (*len + n + 1) * 2;
		char *nb = realloc(*buf, ncap);

		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

static int put_str(char **buf, size_t *len, size_t *cap, const char *s)
{
	return put(buf, len, cap, s ? s : "", s ? strlen(s) : 0);
}

char *qc_sshconf_expand(const char *in, const struct qc_sshconf_tokens *t)
{
	size_t len = 0, cap = 0;
	char *out = NULL, port[16];
	const char *p = in;
	int r = 0;

	snprintf(port, sizeof(port), "%d", t->port);
	if (p[0] == '~') {
		size_t n = strcspn(p + 1, "/");

		if (n == 0) {
			r = put_str(&out, &len, &cap, t->home);
		} else {
			/* ~user: that user's home directory. */
			char name[256], pwbuf[4096];
			struct passwd pw, *res = NULL;

			if (n >= sizeof(name)) {
				errno = EINVAL;
				return NULL;
			}
			memcpy(name, p + 1, n);
			name[n] = '\0';
			if (getpwnam_r(name, &pw, pwbuf, sizeof(pwbuf),
				       &res) != 0 || !res) {
				errno = EINVAL;
				return NULL;
			}
			r = put_str(&out, &len, &cap, res->pw_dir);
		}
		p += 1 + n;
	}
	while (r == 0 && *p) {
		size_t n = strcspn(p, "%");
		const char *v;

		r = put(&out, &len, &cap, p, n);
		p += n;
		if (r < 0 || !*p)
			break;
		switch (p[1]) {
		case '%': v = "%"; break;
		case 'd': v = t->home; break;
		case 'u': v = t->local_user; break;
		case 'h': v = t->host; break;
		case 'n': v = t->alias; break;
		case 'r': v = t->user; break;
		case 'p': v = port; break;
		default:
			free(out);
			errno = EINVAL;
			return NULL;
		}
		r = put_str(&out, &len, &cap, v);
		p += 2;
	}
	if (r == 0 && !out)
		r = put(&out, &len, &cap, "", 0);
	if (r < 0) {
		free(out);
		errno = -r;
		return NULL;
	}
	return out;
}
