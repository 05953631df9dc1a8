// SPDX-License-Identifier: MIT
/* Logging in over libssh2: ssh-agent, key files, then a password or
 * keyboard-interactive (see ssh.h, ssh_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "log.h"
#include "login/ssh_internal.h"

#define PASSWORD_TRIES         3
#define SECRET_MAX             1024
#define TRIED_MAX              2048

/* What was tried during login, for the message when everything failed. */
struct tried {
	char text[TRIED_MAX];
	size_t len;
	bool rsa_refused;
	bool other_refused;     /* an agent key libssh2 1.10 cannot sign
				 * with well: FIDO (sk-) or a certificate */
	bool disconnected;      /* the server gave up on us */
	int defaults_missing;   /* of ~/.ssh/id_ed25519, id_ecdsa, id_rsa */
};

static void tried_add(struct tried *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void tried_add(struct tried *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len >= sizeof(t->text) - 1)
		return;
	if (t->len) {
		n = snprintf(t->text + t->len, sizeof(t->text) - t->len, "; ");
		t->len += n > 0 ? (size_t)n : 0;
		if (t->len >= sizeof(t->text))
			t->len = sizeof(t->text) - 1;
	}
	va_start(ap, fmt);
	n = vsnprintf(t->text + t->len, sizeof(t->text) - t->len, fmt, ap);
	va_end(ap);
	t->len += n > 0 ? (size_t)n : 0;
	if (t->len >= sizeof(t->text))
		t->len = sizeof(t->text) - 1;
}

static bool has_method(const char *list, const char *m)
{
	size_t n = strlen(m);

	for (const char *p = list; p && *p;) {
		size_t w = strcspn(p, ",");

		if (w == n && strncmp(p, m, n) == 0)
			return true;
		p += w;
		p += *p == ',';
	}
	return false;
}

/* The server gave up on us (MaxAuthTries): nothing more can be tried. */
static bool auth_fatal(int r)
{
	return r == LIBSSH2_ERROR_SOCKET_DISCONNECT ||
	       r == LIBSSH2_ERROR_SOCKET_SEND || r == LIBSSH2_ERROR_SOCKET_RECV ||
	       r == LIBSSH2_ERROR_TIMEOUT || r == LIBSSH2_ERROR_SOCKET_TIMEOUT;
}

/* Notes a refused agent key of a kind the OpenSSH client signs better:
 * RSA (rsa-sha2-256/512), FIDO (sk-*), certificates (*-cert-v01). */
static void agent_key_kind(const struct libssh2_agent_publickey *id,
			   struct tried *t)
{
	char type[64];
	uint32_t n;

	if (!id->blob || id->blob_len < 4)
		return;
	n = (uint32_t)id->blob[0] << 24 | (uint32_t)id->blob[1] << 16 |
	    (uint32_t)id->blob[2] << 8 | id->blob[3];
	if (n >= sizeof(type) || n > id->blob_len - 4)
		return;
	memcpy(type, id->blob + 4, n);
	type[n] = '\0';
	if (strcmp(type, "ssh-rsa") == 0)
		t->rsa_refused = true;
	else if (strncmp(type, "sk-", 3) == 0 || strstr(type, "-cert-v01"))
		t->other_refused = true;
}

static int auth_agent(struct qc_ssh *s, struct tried *t)
{
	struct libssh2_agent_publickey *id = NULL, *prev = NULL;
	const char *sock = getenv("SSH_AUTH_SOCK");
	LIBSSH2_AGENT *agent;
	int n = 0, r = 1;

	if (!sock || !*sock) {
		tried_add(t, "no ssh-agent (SSH_AUTH_SOCK is not set)");
		return 1;
	}
	agent = libssh2_agent_init(s->session);
	if (!agent)
		return -ENOMEM;
	if (libssh2_agent_connect(agent) != 0) {
		tried_add(t, "ssh-agent (cannot connect to %s)", sock);
		goto out_free;
	}
	if (libssh2_agent_list_identities(agent) != 0) {
		tried_add(t, "ssh-agent (cannot list its keys)");
		goto out_disconnect;
	}
	while (libssh2_agent_get_identity(agent, &id, prev) == 0) {
		int a = libssh2_agent_userauth(agent, s->user, id);

		n++;
		if (a == 0) {
			qft_debug("logged in with the agent key '%s'",
				  id->comment ? id->comment : "");
			r = 0;
			goto out_disconnect;
		}
		if (auth_fatal(a)) {
			t->disconnected = true;
			break;
		}
		agent_key_kind(id, t);
		prev = id;
	}
	tried_add(t, "ssh-agent (%d key%s, none accepted)", n,
		  n == 1 ? "" : "s");
out_disconnect:
	libssh2_agent_disconnect(agent);
out_free:
	libssh2_agent_free(agent);
	return r;
}

/* True for a private key file that needs a passphrase. */
static bool key_encrypted(const char *path)
{
	static const char openssh[] = "-----BEGIN OPENSSH PRIVATE KEY-----";
	char buf[4096], b64[129];
	unsigned char raw[96];
	size_t n, k = 0;
	const char *p;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (strstr(buf, "ENCRYPTED"))
		return true;            /* PEM: Proc-Type 4,ENCRYPTED, PKCS#8 */
	p = strstr(buf, openssh);
	if (!p)
		return false;
	/* openssh-key-v1\0, then the cipher name as a string: "none"? */
	for (p += sizeof(openssh) - 1; *p && k < sizeof(b64) - 1; p++)
		if (*p != '\n' && *p != '\r')
			b64[k++] = *p;
	b64[k - k % 4] = '\0';
	if (EVP_DecodeBlock(raw, (unsigned char *)b64, (int)strlen(b64)) < 23)
		return false;
	return memcmp(raw, "openssh-key-v1", 15) != 0 ||
	       memcmp(raw + 15, "\0\0\0\4none", 8) != 0;
}

/* Reads a line from the terminal, without echo unless `echo`. */
static char *tty_read(const char *prompt, bool echo)
{
	char buf[SECRET_MAX], *out = NULL;
	struct termios old, quiet;
	bool restore = false;
	size_t n = 0;
	int fd;

	fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	(void)!write(fd, prompt, strlen(prompt));
	if (!echo && tcgetattr(fd, &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		quiet.c_lflag |= ECHONL;
		restore = tcsetattr(fd, TCSAFLUSH, &quiet) == 0;
	}
	for (;;) {
		char c;
		ssize_t r = read(fd, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (c == '\n' || c == '\r') {
			out = strndup(buf, n);
			break;
		}
		if (n < sizeof(buf) - 1)
			buf[n++] = c;
	}
	if (restore)
		tcsetattr(fd, TCSAFLUSH, &old);
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return out;
}

void qc_ssh_secret_free(char *p)
{
	if (p) {
		OPENSSL_cleanse(p, strlen(p));
		free(p);
	}
}

static bool rsa_key(const char *path, const char *pub)
{
	char head[8] = "";
	FILE *f;
	size_t n = strlen(path);

	if (n >= 6 && strcmp(path + n - 6, "id_rsa") == 0)
		return true;
	if (!pub || !(f = fopen(pub, "re")))
		return false;
	n = fread(head, 1, 7, f);
	fclose(f);
	head[n] = '\0';
	return strcmp(head, "ssh-rsa") == 0;
}

static int auth_keyfile(struct qc_ssh *s, const char *path, bool explicit,
			struct tried *t)
{
	char *pub = NULL, *pass = NULL, prompt[PATH_MAX + 64];
	int r = 1, a;

	if (access(path, R_OK) != 0) {
		if (explicit)
			tried_add(t, "%s (%s)", path, strerror(errno));
		else
			t->defaults_missing++;
		return 1;
	}
	if (asprintf(&pub, "%s.pub", path) < 0)
		return -ENOMEM;
	if (access(pub, R_OK) != 0) {
		/* libssh2 derives the public key from the private one. */
		free(pub);
		pub = NULL;
	}
	a = libssh2_userauth_publickey_fromfile_ex(s->session, s->user,
						   (unsigned)strlen(s->user),
						   pub, path, "");
	/*
	 * With a .pub file libssh2 first asks whether the key would do, and
	 * loads the private key only to sign: an encrypted key fails there,
	 * as "unverified"; without one, loading it fails at once ("file").
	 * Either way the passphrase is asked for only for a key worth it.
	 */
	if ((a == LIBSSH2_ERROR_FILE || a == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED)
	    && key_encrypted(path)) {
		if (!s->use_tty) {
			tried_add(t, "%s (encrypted, and no terminal to ask "
				  "for its passphrase)", path);
			goto out_free;
		}
		snprintf(prompt, sizeof(prompt),
			 "Enter passphrase for key '%s': ", path);
		for (int i = 0; i < PASSWORD_TRIES; i++) {
			pass = tty_read(prompt, false);
			if (!pass || !*pass) {
				a = LIBSSH2_ERROR_FILE;
				break;
			}
			a = libssh2_userauth_publickey_fromfile_ex(
				s->session, s->user, (unsigned)strlen(s->user),
				pub, path, pass);
			qc_ssh_secret_free(pass);
			pass = NULL;
			if (a != LIBSSH2_ERROR_FILE &&
			    a != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED)
				break;
		}
		qc_ssh_secret_free(pass);
		if (a == LIBSSH2_ERROR_FILE ||
		    a == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED) {
			tried_add(t, "%s (wrong passphrase)", path);
			goto out_free;
		}
	}
	if (a == 0) {
		qft_debug("logged in with %s", path);
		r = 0;
	} else if (a == LIBSSH2_ERROR_FILE) {
		tried_add(t, "%s (cannot load it: %s)", path, qc_ssh_errmsg(s));
	} else {
		if (auth_fatal(a))
			t->disconnected = true;
		tried_add(t, "%s (refused)", path);
		if (rsa_key(path, pub))
			t->rsa_refused = true;
	}
out_free:
	free(pub);
	return r;
}

/* Answers every prompt with the password, or asks the terminal. */
static LIBSSH2_USERAUTH_KBDINT_RESPONSE_FUNC(kbd_answer)
{
	struct qc_ssh *s = *abstract;

	if (!s->password && (name_len > 0 || instruction_len > 0)) {
		int fd = open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC);

		if (fd >= 0) {
			if (name_len > 0) {
				(void)!write(fd, name, (size_t)name_len);
				(void)!write(fd, "\n", 1);
			}
			if (instruction_len > 0) {
				(void)!write(fd, instruction,
					     (size_t)instruction_len);
				(void)!write(fd, "\n", 1);
			}
			close(fd);
		}
	}
	for (int i = 0; i < num_prompts; i++) {
		char *answer;

		if (s->password) {
			answer = strdup(s->password);
		} else {
			char prompt[512];

			snprintf(prompt, sizeof(prompt), "%.*s",
				 (int)prompts[i].length, prompts[i].text);
			answer = tty_read(prompt, prompts[i].echo);
		}
		/* libssh2 frees the answers with the default free(). */
		responses[i].text = answer;
		responses[i].length = answer ? (unsigned)strlen(answer) : 0;
	}
}

static int auth_password(struct qc_ssh *s, const char *methods,
			 struct tried *t)
{
	bool kbd = has_method(methods, "keyboard-interactive");
	bool pw = has_method(methods, "password");
	int tries = s->password ? 1 : PASSWORD_TRIES;

	if (!kbd && !pw)
		return 1;
	if (!s->password && !s->use_tty) {
		tried_add(t, "no password: stdin is not a terminal (use -o "
			  "password_stdin to read it from stdin)");
		return 1;
	}
	for (int i = 0; i < tries; i++) {
		int a;

		if (kbd) {
			a = libssh2_userauth_keyboard_interactive_ex(
				s->session, s->user, (unsigned)strlen(s->user),
				kbd_answer);
		} else {
			char prompt[512], *pass = s->password;

			if (!pass) {
				snprintf(prompt, sizeof(prompt),
					 "%s's password: ", s->name);
				pass = tty_read(prompt, false);
				if (!pass)
					break;
			}
			a = libssh2_userauth_password_ex(
				s->session, s->user, (unsigned)strlen(s->user),
				pass, (unsigned)strlen(pass), NULL);
			if (pass != s->password)
				qc_ssh_secret_free(pass);
		}
		if (a == 0)
			return 0;
		if (auth_fatal(a)) {
			t->disconnected = true;
			break;
		}
	}
	tried_add(t, "%s (refused)", kbd ? "keyboard-interactive" : "password");
	return 1;
}

static int read_password_stdin(struct qc_ssh *s)
{
	char buf[SECRET_MAX];
	size_t n = 0;

	while (n < sizeof(buf) - 1) {
		char c;
		ssize_t r = read(STDIN_FILENO, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || c == '\n')
			break;
		buf[n++] = c;
	}
	if (n && buf[n - 1] == '\r')
		n--;
	s->password = strndup(buf, n);
	OPENSSL_cleanse(buf, sizeof(buf));
	return s->password ? 0 : -ENOMEM;
}

static bool identities_only(const struct qc_ssh_login *l,
			    const struct qc_ssh_opts *o)
{
	return o->identities_only || (l->cfg.identities_only &&
				      strcasecmp(l->cfg.identities_only,
						 "yes") == 0);
}

int qc_ssh_authenticate(struct qc_ssh *s, struct qc_ssh_login *l,
		     const struct qc_ssh_opts *o)
{
	struct tried t = { .len = 0 };
	const char *methods;
	int r;

	/* A reconnect runs in the background: nobody is there to answer. */
	if (o->password_stdin && !o->batch &&
	    (r = read_password_stdin(s)) < 0)
		return r;
	s->use_tty = !o->batch && isatty(STDIN_FILENO);
	methods = libssh2_userauth_list(s->session, s->user,
					(unsigned)strlen(s->user));
	if (!methods) {
		if (libssh2_userauth_authenticated(s->session))
			return 0;
		qft_err("cannot log in to %s: %s", s->name, qc_ssh_errmsg(s));
		return -EACCES;
	}
	methods = strdup(methods);
	if (!methods)
		return -ENOMEM;
	qft_debug("%s accepts: %s", s->hostname, methods);

	r = 1;
	if (has_method(methods, "publickey")) {
		/* IdentitiesOnly: the keys named, not whatever the agent
		 * holds (their files are tried directly instead), and the
		 * default files only when none is named. */
		bool only = identities_only(l, o), named = false;

		for (size_t i = 0; i < l->n_identity; i++)
			named |= l->identity_explicit[i];
		if (only)
			tried_add(&t, "ssh-agent (not used: IdentitiesOnly)");
		else
			r = auth_agent(s, &t);
		for (size_t i = 0; r > 0 && !t.disconnected &&
		     i < l->n_identity; i++)
			if (!only || !named || l->identity_explicit[i])
				r = auth_keyfile(s, l->identity[i],
						 l->identity_explicit[i], &t);
	}
	if (t.defaults_missing == 3)
		tried_add(&t, "no key in %s/.ssh (id_ed25519, id_ecdsa, id_rsa)",
			  l->home);
	if (r > 0 && !t.disconnected)
		r = auth_password(s, methods, &t);
	if (r == 0 && libssh2_userauth_authenticated(s->session)) {
		free((char *)methods);
		return 0;
	}
	if (r < 0) {
		free((char *)methods);
		return r;
	}
	if ((t.rsa_refused || t.other_refused) && qc_ssh_openssh_available()) {
		/* The OpenSSH client can: qc_ssh_connect hands over. */
		qft_debug("libssh2 login to %s failed (tried: %s)", s->name,
			  t.len ? t.text : "nothing");
		free((char *)methods);
		return t.rsa_refused ? -EKEYREJECTED : -EKEYEXPIRED;
	}
	qft_err("cannot log in to %s (the server accepts: %s). Tried: %s%s",
		s->name, methods, t.len ? t.text : "nothing usable",
		t.disconnected ? "; then the server closed the connection "
		"(too many attempts?)" : "");
	if (t.rsa_refused || t.other_refused)
		qft_err("note: this libssh2 (%s) signs RSA keys only with SHA-1 "
			"(ssh-rsa), which OpenSSH 8.8 and later refuse, and "
			"cannot use FIDO or certificate keys; install the "
			"OpenSSH client (openssh-client), which qftfs then "
			"uses, or use an ed25519 or ecdsa key",
			libssh2_version(0));
	free((char *)methods);
	return -EACCES;
}
