// SPDX-License-Identifier: MIT
/*
 * Login with libssh2 and the channel pump (see ssh.h).
 *
 * Until the pump starts, the session is in libssh2's blocking mode with a
 * deadline on every call; the pump switches it to non-blocking and from
 * then on is the only thread that touches it, until qc_ssh_free().
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <libssh2.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "log.h"
#include "thread.h"
#include "login/serverlog.h"
#include "login/ssh.h"
#include "login/sshconf.h"
#include "login/sshproc.h"

#define SSH_CONNECT_TIMEOUT_MS 15000
/* Each blocking libssh2 call during login (not the user's typing). */
#define SSH_SETUP_TIMEOUT_MS   30000
#define SSH_CLOSE_TIMEOUT_MS   2000
/* TCP keepalive on the ssh connection: a peer gone for good is noticed
 * after idle + interval * count seconds. */
#define SSH_KEEPIDLE_S         15
#define SSH_KEEPINTVL_S        5
#define SSH_KEEPCNT            4
/* The channel window: what the server may send before we read it. */
#define SSH_WINDOW             (4u * 1024u * 1024u)
#define PUMP_BUF               (64u * 1024u)
#define PUMP_LINE              1024u
#define ERR_HEAD               2048u
#define MAX_IDENTITIES         48
#define PASSWORD_TRIES         3
#define SECRET_MAX             1024
#define TRIED_MAX              2048

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

/* Everything login needs that does not outlive it. */
struct login {
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

int qc_ssh_global_init(void)
{
	return libssh2_init(0) == 0 ? 0 : -EIO;
}

void qc_ssh_global_exit(void)
{
	libssh2_exit();
}

static const char *ssh_errmsg(struct qc_ssh *s)
{
	char *msg = NULL;

	if (!s->session)
		return "no session";
	libssh2_session_last_error(s->session, &msg, NULL, 0);
	return msg && *msg ? msg : "unknown error";
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int qc_ssh_tcp_connect(const struct sockaddr *sa, socklen_t len,
		       int timeout_ms)
{
	struct pollfd p;
	socklen_t elen = sizeof(int);
	int fd, err = 0, r, flags;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS) {
			r = -errno;
			goto out_close;
		}
		p.fd = fd;
		p.events = POLLOUT;
		do {
			r = poll(&p, 1, timeout_ms);
		} while (r < 0 && errno == EINTR);
		if (r == 0) {
			r = -ETIMEDOUT;
			goto out_close;
		}
		if (r < 0) {
			r = -errno;
			goto out_close;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
			r = -errno;
			goto out_close;
		}
		if (err) {
			r = -err;
			goto out_close;
		}
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		r = -errno;
		goto out_close;
	}
	return fd;
out_close:
	close(fd);
	return r;
}

/* Tries every address of host:port in turn, as ssh does. */
static int ssh_tcp(struct qc_ssh *s, int timeout_s)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
	};
	struct addrinfo *res, *ai;
	char port[16], addr[NI_MAXHOST];
	int r, fd = -ECONNREFUSED, one = 1;

	snprintf(port, sizeof(port), "%d", s->port);
	r = getaddrinfo(s->hostname, port, &hints, &res);
	if (r != 0) {
		qft_err("cannot resolve %s: %s", s->hostname,
			r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = qc_ssh_tcp_connect(ai->ai_addr, ai->ai_addrlen,
					SSH_CONNECT_TIMEOUT_MS);
		if (fd >= 0)
			break;
		if (getnameinfo(ai->ai_addr, ai->ai_addrlen, addr,
				sizeof(addr), NULL, 0, NI_NUMERICHOST) != 0)
			snprintf(addr, sizeof(addr), "?");
		qft_debug("connecting to %s port %d: %s", addr, s->port,
			  strerror(-fd));
	}
	freeaddrinfo(res);
	if (fd < 0) {
		qft_err("cannot connect to %s port %d: %s", s->hostname,
			s->port, strerror(-fd));
		return fd;
	}
	/* The tunnel carries request/reply traffic: no Nagle delays. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/*
	 * The kernel's keepalive notices a peer that is gone while the
	 * connection is idle; the user timeout, one that stops acknowledging
	 * what we send (the pump's libssh2 keepalives included), so that a
	 * cut link ends the session instead of retransmitting for minutes.
	 */
	if (timeout_s > 0) {
		unsigned ut = (unsigned)timeout_s * 1000u;

		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
	}
	r = SSH_KEEPIDLE_S;
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &r, sizeof(r));
	r = SSH_KEEPINTVL_S;
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &r, sizeof(r));
	r = SSH_KEEPCNT;
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &r, sizeof(r));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	s->sock = fd;
	return 0;
}

/* -------------------------------------------------------------------------
 * Who we are and what the config says
 */

static int login_init(struct login *l, const struct qc_ssh_opts *o)
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

static void login_free(struct login *l)
{
	free(l->home);
	free(l->local_user);
	qc_sshconf_free(&l->cfg);
	for (size_t i = 0; i < l->n_known_hosts; i++)
		free(l->known_hosts[i]);
	for (size_t i = 0; i < l->n_identity; i++)
		free(l->identity[i]);
}

static int login_config(struct login *l, const struct qc_ssh_opts *o)
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

static void tokens(const struct login *l, const struct qc_ssh *s,
		   struct qc_sshconf_tokens *t)
{
	t->home = l->home;
	t->local_user = l->local_user;
	t->host = s->hostname;
	t->alias = s->alias;
	t->user = s->user;
	t->port = s->port;
}

static char *expand(const struct login *l, const struct qc_ssh *s,
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

static int add_identity(struct login *l, char *path, bool explicit)
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
static int login_resolve(struct login *l, struct qc_ssh *s,
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

/* -------------------------------------------------------------------------
 * Host keys
 */

/*
 * Reads a known_hosts file line by line: a line libssh2 does not
 * understand (a @cert-authority marker, a key type it lacks) is skipped,
 * where libssh2_knownhost_readfile() would stop at it.
 */
static void kh_load(LIBSSH2_KNOWNHOSTS *kh, const char *path)
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
static int kh_name(const struct qc_ssh *s, char *buf, size_t size)
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
static int kh_prefs(struct qc_ssh *s, LIBSSH2_KNOWNHOSTS *kh, const char *name)
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
		qft_debug("cannot set host key preferences: %s", ssh_errmsg(s));
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

static int ssh_hostkey(struct qc_ssh *s, struct login *l,
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
		qft_err("%s sent no host key: %s", s->hostname, ssh_errmsg(s));
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
			ssh_errmsg(s));
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
			ssh_errmsg(s));
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

/* -------------------------------------------------------------------------
 * Login
 */

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

static void secret_free(char *p)
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
			secret_free(pass);
			pass = NULL;
			if (a != LIBSSH2_ERROR_FILE &&
			    a != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED)
				break;
		}
		secret_free(pass);
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
		tried_add(t, "%s (cannot load it: %s)", path, ssh_errmsg(s));
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
				secret_free(pass);
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

/* -------------------------------------------------------------------------
 * The OpenSSH client (ssh.h, "When OpenSSH"; sshproc.h)
 */

/* `ssh` in PATH, for the automatic hand-over. */
static bool openssh_available(void)
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
static const char *openssh_needed(const struct login *l,
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
static int openssh_prepare(struct qc_ssh *s, const struct login *l,
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
	if (!r && o->timeout_s > 0)
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

/* Leaves libssh2 for the OpenSSH client after its login failed. */
static void libssh2_drop(struct qc_ssh *s)
{
	if (s->session) {
		libssh2_session_disconnect(s->session, "trying OpenSSH");
		libssh2_session_free(s->session);
		s->session = NULL;
	}
	if (s->sock >= 0) {
		close(s->sock);
		s->sock = -1;
	}
}

bool qc_ssh_proxied(const struct qc_ssh *s)
{
	return s->proxied;
}

static bool identities_only(const struct login *l,
			    const struct qc_ssh_opts *o)
{
	return o->identities_only || (l->cfg.identities_only &&
				      strcasecmp(l->cfg.identities_only,
						 "yes") == 0);
}

static int ssh_login(struct qc_ssh *s, struct login *l,
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
		qft_err("cannot log in to %s: %s", s->name, ssh_errmsg(s));
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
	if ((t.rsa_refused || t.other_refused) && openssh_available()) {
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

int qc_ssh_connect(struct qc_ssh **out, const struct qc_ssh_opts *o)
{
	LIBSSH2_KNOWNHOSTS *kh = NULL;
	const char *why;
	struct qc_ssh *s;
	struct login l;
	char khname[1100];
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->sock = -1;
	s->fd = -1;
	s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->alias = strdup(o->alias);
	if (!s->alias) {
		qc_ssh_free(s);
		return -ENOMEM;
	}

	r = login_init(&l, o);
	if (r == 0)
		r = login_config(&l, o);
	if (r == 0)
		r = login_resolve(&l, s, o);
	if (r < 0)
		goto out_free_login;
	why = openssh_needed(&l, o);
	if (why) {
		qft_debug("logging in with the OpenSSH client (%s)", why);
		r = openssh_prepare(s, &l, o);
		if (r < 0)
			goto out_free_login;
		login_free(&l);
		*out = s;
		return 0;
	}
	qft_debug("connecting to %s@%s port %d", s->user, s->hostname,
		  s->port);
	if ((r = ssh_tcp(s, o->timeout_s)) < 0)
		goto out_free_login;

	s->session = libssh2_session_init_ex(NULL, NULL, NULL, s);
	if (!s->session) {
		r = -ENOMEM;
		goto out_free_login;
	}
	libssh2_session_set_blocking(s->session, 1);
	libssh2_session_set_timeout(s->session, SSH_SETUP_TIMEOUT_MS);

	kh = libssh2_knownhost_init(s->session);
	if (!kh) {
		r = -ENOMEM;
		goto out_free_login;
	}
	for (size_t i = 0; i < l.n_known_hosts; i++)
		kh_load(kh, l.known_hosts[i]);
	kh_load(kh, "/etc/ssh/ssh_known_hosts");
	if ((r = kh_name(s, khname, sizeof(khname))) < 0)
		goto out_free_kh;
	kh_prefs(s, kh, khname);

	if (libssh2_session_handshake(s->session, s->sock) != 0) {
		qft_err("ssh handshake with %s port %d failed: %s",
			s->hostname, s->port, ssh_errmsg(s));
		r = -EPROTO;
		goto out_free_kh;
	}
	if ((r = ssh_hostkey(s, &l, kh, khname)) < 0)
		goto out_free_kh;
	r = ssh_login(s, &l, o);
	if (r == -EKEYREJECTED || r == -EKEYEXPIRED) {
		qft_info("logging in to %s with the OpenSSH client: %s",
			 s->name, r == -EKEYREJECTED ?
			 "libssh2 signs RSA keys with SHA-1 only, which the "
			 "server refuses (rsa-sha2-256/512 needed)" :
			 "libssh2 cannot use the FIDO or certificate key "
			 "offered");
		libssh2_knownhost_free(kh);
		libssh2_drop(s);
		r = openssh_prepare(s, &l, o);
		if (r < 0)
			goto out_free_login;
		login_free(&l);
		*out = s;
		return 0;
	}
	if (r < 0)
		goto out_free_kh;
	/* The server answers each (want_reply), which keeps traffic -- and
	 * so TCP_USER_TIMEOUT -- going on an idle session; sent by the pump. */
	s->keepalive_s = o->keepalive_s;
	if (s->keepalive_s > 0)
		libssh2_keepalive_config(s->session, 1,
					 (unsigned)s->keepalive_s);
	secret_free(s->password);
	s->password = NULL;
	libssh2_knownhost_free(kh);
	login_free(&l);
	*out = s;
	return 0;

out_free_kh:
	libssh2_knownhost_free(kh);
out_free_login:
	login_free(&l);
	qc_ssh_free(s);
	return r;
}

const char *qc_ssh_name(const struct qc_ssh *s)
{
	return s->name ? s->name : s->alias;
}

const char *qc_ssh_host(const struct qc_ssh *s)
{
	return s->alias;
}

int qc_ssh_peer(const struct qc_ssh *s, struct sockaddr_storage *ss,
		socklen_t *len)
{
	if (s->openssh) {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
		char port[16];
		int r;

		/* ssh connected to the host the config names, as we read it
		 * (HostName); behind a proxy there is no direct address. */
		if (s->proxied)
			return -EHOSTUNREACH;
		snprintf(port, sizeof(port), "%d", s->port);
		r = getaddrinfo(s->hostname, port, &hints, &ai);
		if (r != 0)
			return -EHOSTUNREACH;
		memcpy(ss, ai->ai_addr, ai->ai_addrlen);
		*len = ai->ai_addrlen;
		freeaddrinfo(ai);
		return 0;
	}
	*len = sizeof(*ss);
	return getpeername(s->sock, (struct sockaddr *)ss, len) < 0 ? -errno
								     : 0;
}

int qc_ssh_exec(struct qc_ssh *s, const char *command)
{
	if (s->openssh) {
		qft_debug("running on %s: %s", s->alias, command);
		return qc_sshproc_start(&s->proc, &s->pargs, s->alias, command,
					s->alias, s->login_timeout_s);
	}
	s->channel = libssh2_channel_open_ex(s->session, "session",
					     sizeof("session") - 1, SSH_WINDOW,
					     LIBSSH2_CHANNEL_PACKET_DEFAULT,
					     NULL, 0);
	if (!s->channel) {
		qft_err("cannot open an ssh channel to %s: %s", s->name,
			ssh_errmsg(s));
		return -EIO;
	}
	qft_debug("running on %s: %s", s->alias, command);
	if (libssh2_channel_exec(s->channel, command) != 0) {
		qft_err("%s refused to run a command: %s", s->name,
			ssh_errmsg(s));
		return -EACCES;
	}
	return 0;
}

/* -------------------------------------------------------------------------
 * The pump
 */

static void pump_emit(struct qc_ssh *s)
{
	qc_ssh_log_stderr_line(s->alias, s->line, s->line_len);
	s->line_len = 0;
}

static void pump_stderr(struct qc_ssh *s, const char *buf, size_t n)
{
	pthread_mutex_lock(&s->lock);
	if (s->err_head_len < ERR_HEAD - 1) {
		size_t k = ERR_HEAD - 1 - s->err_head_len;

		k = k < n ? k : n;
		memcpy(s->err_head + s->err_head_len, buf, k);
		s->err_head_len += k;
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			pump_emit(s);
			continue;
		}
		s->line[s->line_len++] = buf[i];
		if (s->line_len == PUMP_LINE - 1)
			pump_emit(s);
	}
}

/* True when the last libssh2 send left part of a packet unsent. */
static bool half_sent(struct qc_ssh *s)
{
	return libssh2_session_block_directions(s->session) &
	       LIBSSH2_SESSION_BLOCK_OUTBOUND;
}

/*
 * Bookkeeping after a libssh2 call `op` that may send: returns its result
 * unchanged, and remembers the call while it has half a packet out.
 */
static ssize_t pump_done(struct qc_ssh *s, enum pump_op op, ssize_t r)
{
	if (r == LIBSSH2_ERROR_EAGAIN && half_sent(s))
		s->pending = op;
	else if (s->pending == op)
		s->pending = OP_NONE;
	return r;
}

/*
 * True when libssh2 holds channel data we have not read yet, and could.
 * Every libssh2 call drains the socket into libssh2's own queue, so data
 * can arrive there during any call (the last read of a round included),
 * after which the socket no longer says so: poll would sleep on it.
 */
static bool pump_queued(struct qc_ssh *s)
{
	unsigned long avail = 0;

	if (s->pending != OP_NONE)
		return false;
	libssh2_channel_window_read_ex(s->channel, &avail, NULL);
	return avail > 0 && (s->down_len < sizeof(s->down) || !s->err_eof);
}

/*
 * Moves whatever can move without waiting.  Returns 1 once the channel is
 * closed, 0 when nothing more can move now, or a libssh2 error.
 *
 * libssh2 sends one packet at a time: once a call has sent part of one
 * and returned EAGAIN, only that same call may continue it, and any other
 * call that sends (a read that adjusts the window, EOF, close) fails with
 * LIBSSH2_ERROR_BAD_USE.  So while a call is pending, it is the only one
 * made (MAY), and poll waits for the socket to take more.
 */
static int pump_step(struct qc_ssh *s)
{
#define MAY(op) (s->pending == OP_NONE || s->pending == (op))
	bool progress = true;
	char ebuf[4096];
	int spins = 0;
	ssize_t n;
	int r;

	while (progress) {
		progress = false;

		/* Our descriptor -> the command's stdin. */
		if (!s->fd_eof && s->up_len < sizeof(s->up)) {
			n = recv(s->fd, s->up + s->up_len,
				 sizeof(s->up) - s->up_len, MSG_DONTWAIT);
			if (n > 0) {
				s->up_len += (size_t)n;
				progress = true;
			} else if (n == 0 || (errno != EAGAIN &&
					      errno != EINTR)) {
				s->fd_eof = true;
				progress = true;
			}
		}
		if (s->up_len && !s->eof_sent && MAY(OP_WRITE)) {
			n = pump_done(s, OP_WRITE,
				      libssh2_channel_write(s->channel,
							    (const char *)s->up,
							    s->up_len));
			if (n > 0) {
				memmove(s->up, s->up + n, s->up_len - (size_t)n);
				s->up_len -= (size_t)n;
				/* The session secret passes through here once. */
				OPENSSL_cleanse(s->up + s->up_len, (size_t)n);
				progress = true;
			} else if (n < 0 && n != LIBSSH2_ERROR_EAGAIN) {
				return (int)n;
			}
		}
		if (s->fd_eof && !s->up_len && !s->eof_sent && MAY(OP_EOF)) {
			r = (int)pump_done(s, OP_EOF,
					   libssh2_channel_send_eof(s->channel));
			if (r == 0) {
				s->eof_sent = true;
				progress = true;
			} else if (r != LIBSSH2_ERROR_EAGAIN) {
				return r;
			}
		}

		/* The command's stdout -> our descriptor. */
		if (!s->out_eof && s->down_len < sizeof(s->down) &&
		    MAY(OP_READ)) {
			n = pump_done(s, OP_READ,
				      libssh2_channel_read(s->channel,
							   (char *)s->down +
							   s->down_len,
							   sizeof(s->down) -
							   s->down_len));
			if (n > 0) {
				s->down_len += (size_t)n;
				progress = true;
			} else if (n == 0 && libssh2_channel_eof(s->channel)) {
				s->out_eof = true;
				progress = true;
			} else if (n < 0 && n != LIBSSH2_ERROR_EAGAIN) {
				return (int)n;
			}
		}
		if (s->down_len) {
			n = send(s->fd, s->down, s->down_len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0) {
				memmove(s->down, s->down + n,
					s->down_len - (size_t)n);
				s->down_len -= (size_t)n;
				progress = true;
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* Nobody reads any more: drop it. */
				s->client_gone = true;
				s->down_len = 0;
				progress = true;
			}
		}
		if (s->out_eof && !s->down_len && !s->fd_shut) {
			shutdown(s->fd, SHUT_WR);
			s->fd_shut = true;
		}

		/* The command's stderr -> our log. */
		if (!s->err_eof && MAY(OP_READ_ERR)) {
			n = pump_done(s, OP_READ_ERR,
				      libssh2_channel_read_stderr(s->channel,
								  ebuf,
								  sizeof(ebuf)));
			if (n > 0) {
				pump_stderr(s, ebuf, (size_t)n);
				progress = true;
			} else if (n == 0 && libssh2_channel_eof(s->channel)) {
				s->err_eof = true;
				progress = true;
			} else if (n < 0 && n != LIBSSH2_ERROR_EAGAIN) {
				return (int)n;
			}
		}

		/* Bounded, in case libssh2 holds data of a stream we do not
		 * read: pump_main then polls with a short timeout. */
		if (!progress && spins++ < 16 && pump_queued(s))
			progress = true;
	}

	/* The command is done (its output ended): close the channel, which
	 * waits for the server's close and so for the exit status. */
	if (s->out_eof && s->err_eof && !s->down_len && MAY(OP_CLOSE)) {
		r = (int)pump_done(s, OP_CLOSE,
				   libssh2_channel_close(s->channel));
		if (r == 0)
			return 1;
		if (r != LIBSSH2_ERROR_EAGAIN)
			return r;
	}
	return 0;
#undef MAY
}

static void pump_finish(struct qc_ssh *s, int err)
{
	struct qc_ssh_exit ex = { .known = false };
	char *sig = NULL;
	size_t siglen = 0;

	if (s->line_len)
		pump_emit(s);
	if (err == 0) {
		if (libssh2_channel_get_exit_signal(s->channel, &sig, &siglen,
						    NULL, NULL, NULL,
						    NULL) == 0 && sig) {
			snprintf(ex.signal, sizeof(ex.signal), "%.*s",
				 (int)siglen, sig);
			libssh2_free(s->session, sig);
		} else {
			ex.status = libssh2_channel_get_exit_status(s->channel);
		}
		ex.known = true;
	} else {
		qft_err("ssh connection to %s failed: %s", s->alias,
			ssh_errmsg(s));
	}
	/* Whoever holds the other end wakes: reads see EOF, writes EPIPE. */
	shutdown(s->fd, SHUT_RDWR);
	pthread_mutex_lock(&s->lock);
	s->exit = ex;
	s->finished = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/*
 * Sends a libssh2 keepalive when one is due; returns the milliseconds
 * until the next.  Only with nothing half sent and room in the socket: a
 * keepalive that left half a packet in libssh2 would make the next call
 * that sends anything else fail (see pump_step), since libssh2 never
 * finishes a keepalive packet it could not send at once.
 */
static int pump_keepalive(struct qc_ssh *s)
{
	struct pollfd p = { .fd = s->sock, .events = POLLOUT };
	int64_t now = now_ms();
	int next = 0;

	if (s->keepalive_s <= 0)
		return -1;
	if (now < s->ka_due)
		return (int)(s->ka_due - now);
	s->ka_due = now + 1000;
	if (s->pending != OP_NONE || half_sent(s) || poll(&p, 1, 0) != 1 ||
	    !(p.revents & POLLOUT))
		return 1000;
	/* An error here shows again in the next call that reads or sends. */
	if (libssh2_keepalive_send(s->session, &next) != 0 || next <= 0)
		return 1000;
	s->ka_due = now + (int64_t)next * 1000;
	return next * 1000;
}

static void *pump_main(void *arg)
{
	struct qc_ssh *s = arg;
	int r;

	for (;;) {
		struct pollfd p[3];
		bool pause;
		char junk[16];

		r = pump_step(s);
		if (r != 0)
			break;
		pthread_mutex_lock(&s->lock);
		pause = s->pause;
		pthread_mutex_unlock(&s->lock);
		if (pause)
			return NULL;

		p[0].fd = s->wake[0];
		p[0].events = POLLIN;
		p[1].fd = s->fd;
		p[1].events = 0;
		if (!s->fd_eof && s->up_len < sizeof(s->up))
			p[1].events |= POLLIN;
		if (s->down_len)
			p[1].events |= POLLOUT;
		/* A hung-up peer would wake poll forever if still watched. */
		if (!p[1].events)
			p[1].fd = -1;
		/* With half a packet out, only the socket taking more can
		 * move anything on the ssh side (and reading would spin). */
		p[2].fd = s->sock;
		p[2].events = 0;
		if (s->pending != OP_NONE || half_sent(s))
			p[2].events = POLLOUT;
		else if ((!s->out_eof && s->down_len < sizeof(s->down)) ||
			 !s->err_eof || s->up_len ||
			 (s->fd_eof && !s->eof_sent) ||
			 (s->out_eof && !s->down_len))
			/* Some call above would read what arrives. */
			p[2].events = POLLIN;
		if (!p[2].events)
			p[2].fd = -1;
		if (poll(p, 3, pump_queued(s) ? 10 : pump_keepalive(s)) < 0 &&
		    errno != EINTR) {
			r = -errno;
			qft_err("ssh pump: poll failed: %s", strerror(errno));
			break;
		}
		if (p[0].revents & POLLIN)
			while (read(s->wake[0], junk, sizeof(junk)) > 0)
				;
	}
	pump_finish(s, r == 1 ? 0 : r);
	return NULL;
}

int qc_ssh_pump_start(struct qc_ssh *s, int *fd)
{
	int sv[2], r;

	if (s->openssh)
		return s->proc ? qc_sshproc_pump_start(s->proc, fd) : -EINVAL;
	if (s->running)
		return 0;
	if (s->fd < 0) {
		if (!s->channel)
			return -EINVAL;
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
			return -errno;
		if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
			r = -errno;
			close(sv[0]);
			close(sv[1]);
			return r;
		}
		s->fd = sv[1];
		*fd = sv[0];
		libssh2_session_set_blocking(s->session, 0);
	}
	pthread_mutex_lock(&s->lock);
	if (s->finished) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	s->pause = false;
	pthread_mutex_unlock(&s->lock);
	/* Signals are for libfuse's handlers, not for this thread. */
	r = -qft_thread_start(&s->thread, pump_main, s);
	if (r)
		return -r;
	s->running = true;
	return 0;
}

void qc_ssh_pump_pause(struct qc_ssh *s)
{
	if (s->proc)
		qc_sshproc_pump_pause(s->proc);
	if (!s->running)
		return;
	pthread_mutex_lock(&s->lock);
	s->pause = true;
	pthread_mutex_unlock(&s->lock);
	(void)!write(s->wake[1], "p", 1);
	pthread_join(s->thread, NULL);
	s->running = false;
}

int qc_ssh_wait(struct qc_ssh *s, int timeout_ms, struct qc_ssh_exit *exit)
{
	struct timespec deadline;
	int r = 0;

	if (s->openssh) {
		struct qc_ssh_exit ex;

		if (!s->proc)
			return -EINVAL;
		r = qc_sshproc_wait(s->proc, timeout_ms, &ex);
		if (r == 0 && exit)
			*exit = ex;
		return r;
	}
	qft_deadline_in(&deadline, timeout_ms);
	pthread_mutex_lock(&s->lock);
	while (!s->finished && r == 0)
		r = pthread_cond_timedwait(&s->cond, &s->lock, &deadline);
	if (s->finished) {
		if (exit)
			*exit = s->exit;
		r = 0;
	} else {
		r = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void qc_ssh_stderr_head(struct qc_ssh *s, char *buf, size_t size)
{
	size_t n;

	if (!size)
		return;
	if (s->proc) {
		qc_sshproc_stderr_head(s->proc, buf, size);
		return;
	}
	pthread_mutex_lock(&s->lock);
	n = s->err_head_len < size - 1 ? s->err_head_len : size - 1;
	memcpy(buf, s->err_head, n);
	pthread_mutex_unlock(&s->lock);
	buf[n] = '\0';
}

/* Waits for the socket as libssh2 wants it; false past the deadline. */
static bool ssh_wait_socket(struct qc_ssh *s, int64_t deadline)
{
	struct pollfd p = { .fd = s->sock, .events = 0 };
	int dirs = libssh2_session_block_directions(s->session);
	int64_t left = deadline - now_ms();

	if (left <= 0)
		return false;
	if (dirs & LIBSSH2_SESSION_BLOCK_INBOUND)
		p.events |= POLLIN;
	if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND)
		p.events |= POLLOUT;
	if (!p.events)
		p.events = POLLIN;
	return poll(&p, 1, (int)left) >= 0 || errno == EINTR;
}

void qc_ssh_free(struct qc_ssh *s)
{
	int64_t deadline = now_ms() + SSH_CLOSE_TIMEOUT_MS;
	int r;

	if (!s)
		return;
	qc_ssh_pump_pause(s);
	qc_sshproc_free(s->proc);
	qc_sshproc_args_free(&s->pargs);
	if (s->session) {
		libssh2_session_set_blocking(s->session, 0);
		if (s->channel) {
			while ((r = libssh2_channel_free(s->channel)) ==
			       LIBSSH2_ERROR_EAGAIN &&
			       ssh_wait_socket(s, deadline))
				;
			if (r == 0)
				s->channel = NULL;
		}
		deadline = now_ms() + SSH_CLOSE_TIMEOUT_MS / 2;
		while (libssh2_session_disconnect(s->session, "qftfs done") ==
		       LIBSSH2_ERROR_EAGAIN && ssh_wait_socket(s, deadline))
			;
		/* With the socket shut, whatever is left fails at once
		 * instead of waiting for a peer that is gone. */
		if (s->sock >= 0)
			shutdown(s->sock, SHUT_RDWR);
		for (int i = 0; i < 100; i++)
			if (libssh2_session_free(s->session) !=
			    LIBSSH2_ERROR_EAGAIN)
				break;
	}
	if (s->sock >= 0)
		close(s->sock);
	if (s->fd >= 0)
		close(s->fd);
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	secret_free(s->password);
	free(s->alias);
	free(s->name);
	free(s->user);
	free(s->hostname);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
