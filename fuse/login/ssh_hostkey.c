// SPDX-License-Identifier: MIT
/* The host key against known_hosts, as ssh checks it (see
 * ssh_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "log.h"
#include "login/ssh_internal.h"

/* Host key types qftfs can check, in the order it prefers them (ssh's). */
static const struct key_type {
	int hostkey;            /* LIBSSH2_HOSTKEY_TYPE_* */
	int knownhost;          /* LIBSSH2_KNOWNHOST_KEY_* */
	const char *label;      /* as ssh prints it */
	const char *alg;        /* the host key algorithm */
} key_types[] = {
	{ LIBSSH2_HOSTKEY_TYPE_ED25519, LIBSSH2_KNOWNHOST_KEY_ED25519,
	  "ED25519", "ssh-ed25519" },
	{ LIBSSH2_HOSTKEY_TYPE_ECDSA_256, LIBSSH2_KNOWNHOST_KEY_ECDSA_256,
	  "ECDSA", "ecdsa-sha2-nistp256" },
	{ LIBSSH2_HOSTKEY_TYPE_ECDSA_384, LIBSSH2_KNOWNHOST_KEY_ECDSA_384,
	  "ECDSA", "ecdsa-sha2-nistp384" },
	{ LIBSSH2_HOSTKEY_TYPE_ECDSA_521, LIBSSH2_KNOWNHOST_KEY_ECDSA_521,
	  "ECDSA", "ecdsa-sha2-nistp521" },
	{ LIBSSH2_HOSTKEY_TYPE_RSA, LIBSSH2_KNOWNHOST_KEY_SSHRSA,
	  "RSA", "ssh-rsa" },
};
#define N_KEY_TYPES (sizeof(key_types) / sizeof(key_types[0]))

/*
 * Reads a known_hosts file line by line: a line libssh2 does not
 * understand (a @cert-authority marker, a key type it lacks) is skipped,
 * where libssh2_knownhost_readfile() would stop at it.
 */
void qc_ssh_kh_load(LIBSSH2_KNOWNHOSTS *kh, const char *path)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0;
	FILE *f;

	f = fopen(path, "re");
	if (!f) {
		if (errno != ENOENT)
			qft_warn("cannot read %s: %s", path, strerror(errno));
		return;
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		lineno++;
		if (libssh2_knownhost_readline(kh, line, (size_t)n,
					       LIBSSH2_KNOWNHOST_FILE_OPENSSH))
			qft_debug("%s:%d: not understood by libssh2; skipped",
				  path, lineno);
	}
	free(line);
	fclose(f);
}

static const struct key_type *key_type_of(int hostkey_type)
{
	for (size_t i = 0; i < N_KEY_TYPES; i++)
		if (key_types[i].hostkey == hostkey_type)
			return &key_types[i];
	return NULL;
}

/* "[host]:port" unless the port is 22: the name ssh files a host under. */
int qc_ssh_kh_name(const struct qc_ssh *s, char *buf, size_t size)
{
	int n;

	if (s->port == 22)
		n = snprintf(buf, size, "%s", s->hostname);
	else
		n = snprintf(buf, size, "[%s]:%d", s->hostname, s->port);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/*
 * Lists the host key algorithms with the types known_hosts already has
 * for this host first, as ssh does: a host known by its ECDSA key must
 * not be asked for its ED25519 key, which would look unknown.  A type is
 * known when a check with a dummy key of that type says "mismatch".
 */
int qc_ssh_kh_prefs(struct qc_ssh *s, LIBSSH2_KNOWNHOSTS *kh, const char *name)
{
	const char dummy[1] = { 0 };
	char prefs[256] = "";
	bool known[N_KEY_TYPES];

	for (size_t i = 0; i < N_KEY_TYPES; i++)
		known[i] = libssh2_knownhost_checkp(
			kh, name, -1, dummy, sizeof(dummy),
			LIBSSH2_KNOWNHOST_TYPE_PLAIN |
			LIBSSH2_KNOWNHOST_KEYENC_RAW | key_types[i].knownhost,
			NULL) == LIBSSH2_KNOWNHOST_CHECK_MISMATCH;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < N_KEY_TYPES; i++) {
			if (known[i] != (pass == 0))
				continue;
			if (prefs[0])
				strcat(prefs, ",");
			strcat(prefs, key_types[i].alg);
		}
	}
	qft_debug("host key algorithms: %s", prefs);
	/* libssh2 drops what it does not support. */
	if (libssh2_session_method_pref(s->session, LIBSSH2_METHOD_HOSTKEY,
					prefs) != 0)
		qft_debug("cannot set host key preferences: %s",
			  qc_ssh_errmsg(s));
	return 0;
}

/* SHA256:base64, without padding, as ssh-keygen -l prints it. */
static void fingerprint(struct qc_ssh *s, char *buf, size_t size)
{
	const unsigned char *h;
	unsigned char b64[64];
	int n;

	h = (const unsigned char *)libssh2_hostkey_hash(
		s->session, LIBSSH2_HOSTKEY_HASH_SHA256);
	if (!h) {
		snprintf(buf, size, "(no fingerprint)");
		return;
	}
	n = EVP_EncodeBlock(b64, h, 32);
	while (n > 0 && b64[n - 1] == '=')
		n--;
	snprintf(buf, size, "SHA256:%.*s", n, b64);
}

/* Appends one known_hosts line to `path` (never rewrites the file). */
static int kh_append(const char *path, const char *line, size_t len,
		     const char *home)
{
	char *dir, *slash, last = '\n';
	struct stat st;
	int fd, r = 0;

	dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		char *ssh_dir = NULL;

		*slash = '\0';
		/* Create ~/.ssh as ssh would, but nothing else. */
		if (asprintf(&ssh_dir, "%s/.ssh", home) >= 0 &&
		    strcmp(dir, ssh_dir) == 0 && stat(dir, &st) < 0 &&
		    errno == ENOENT)
			mkdir(dir, 0700);
		free(ssh_dir);
	}
	free(dir);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* A last line without its newline would swallow ours. */
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		int rfd = open(path, O_RDONLY | O_CLOEXEC);

		if (rfd >= 0) {
			if (pread(rfd, &last, 1, st.st_size - 1) != 1)
				last = '\n';
			close(rfd);
		}
	}
	if ((last != '\n' && write(fd, "\n", 1) != 1) ||
	    write(fd, line, len) != (ssize_t)len)
		r = errno ? -errno : -EIO;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

int qc_ssh_hostkey_check(struct qc_ssh *s, struct qc_ssh_login *l,
		       LIBSSH2_KNOWNHOSTS *kh, const char *name)
{
	const struct key_type *kt;
	struct libssh2_knownhost *entry = NULL;
	const char *key;
	char fp[80], line[8192];
	size_t klen, llen = 0;
	int type, r;

	key = libssh2_session_hostkey(s->session, &klen, &type);
	if (!key) {
		qft_err("%s sent no host key: %s", s->hostname,
			qc_ssh_errmsg(s));
		return -EPROTO;
	}
	kt = key_type_of(type);
	if (!kt) {
		qft_err("%s offered a host key of a type qftfs cannot check",
			s->hostname);
		return -EPROTO;
	}
	fingerprint(s, fp, sizeof(fp));
	r = libssh2_knownhost_checkp(kh, name, -1, key, klen,
				     LIBSSH2_KNOWNHOST_TYPE_PLAIN |
				     LIBSSH2_KNOWNHOST_KEYENC_RAW |
				     kt->knownhost, NULL);
	switch (r) {
	case LIBSSH2_KNOWNHOST_CHECK_MATCH:
		qft_debug("host key of %s (%s %s) found in known_hosts", name,
			  kt->label, fp);
		return 0;
	case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
		qft_err("WARNING: the host key of %s has CHANGED (it is now %s "
			"%s)", name, kt->label, fp);
		qft_err("WARNING: someone could be intercepting the connection "
			"(a possible man-in-the-middle attack), or the host's "
			"key was replaced; refusing to connect");
		qft_err("if the change is expected, remove the old key with "
			"ssh-keygen -R '%s'%s%s and mount again", name,
			l->n_known_hosts ? " -f " : "",
			l->n_known_hosts ? l->known_hosts[0] : "");
		return -EACCES;
	case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
		break;
	default:
		qft_err("cannot check the host key of %s: %s", name,
			qc_ssh_errmsg(s));
		return -EIO;
	}

	if (l->strict != QC_STRICT_ACCEPT_NEW || l->n_known_hosts == 0) {
		char ssh_cmd[64] = "";

		if (s->port != 22)
			snprintf(ssh_cmd, sizeof(ssh_cmd), "-p %d ", s->port);
		qft_err("the host key of %s is not known (%s %s). Check it, "
			"then mount once with -o StrictHostKeyChecking=accept-new, "
			"or run ssh %s%s", name, kt->label, fp, ssh_cmd,
			s->alias);
		return -EACCES;
	}
	if (libssh2_knownhost_addc(kh, name, NULL, key, klen, NULL, 0,
				   LIBSSH2_KNOWNHOST_TYPE_PLAIN |
				   LIBSSH2_KNOWNHOST_KEYENC_RAW | kt->knownhost,
				   &entry) != 0 ||
	    libssh2_knownhost_writeline(kh, entry, line, sizeof(line), &llen,
					LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0) {
		qft_err("cannot record the host key of %s: %s", name,
			qc_ssh_errmsg(s));
		return -EIO;
	}
	r = kh_append(l->known_hosts[0], line, llen, l->home);
	if (r < 0) {
		qft_err("cannot add the host key of %s to %s: %s", name,
			l->known_hosts[0], strerror(-r));
		return r;
	}
	qft_warn("permanently added the host key of %s (%s %s) to %s", name,
		 kt->label, fp, l->known_hosts[0]);
	return 0;
}
