// SPDX-License-Identifier: MIT
/* From host:dir to an authenticated data plane (see bootstrap.h). */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "login/bootstrap.h"
#include "login/lineio.h"
#include "chan.h"
#include "config.h"
#include "log.h"
#include "protocol.h"

#define SERVER_NAME         "qftfs-server"
/* The server's own limit for the secret is 30 s; starting it over a slow
 * link can take a while, so the greeting gets as long. */
#define GREETING_TIMEOUT_MS 30000
#define DIRECT_TIMEOUT_MS   5000
/* The server may be busy with other handshakes (5 s each) first. */
#define HANDSHAKE_TIMEOUT_MS 15000
#define EXIT_WAIT_MS        3000
#define GREETING_MAX        128
/* Resuming retries every second or so: an attempt that cannot reach the
 * host must end soon, so that the first byte moves soon after a heal. */
#define REATTACH_CONNECT_MS   1500
#define REATTACH_HANDSHAKE_MS 5000

/*
 * scp's rule: a ':' before the first '/' ends the host part; a host in
 * [brackets] (an IPv6 address) may contain ':'.  A leading ':' is a file
 * name.  Returns that ':' or NULL for a local path.
 */
static const char *host_colon(const char *s)
{
	bool bracket = s[0] == '[';

	if (s[0] == ':')
		return NULL;
	for (const char *p = s; *p; p++) {
		if (*p == '@' && p[1] == '[')
			bracket = true;
		if (*p == ']' && p[1] == ':' && bracket)
			return p + 1;
		if (*p == ':' && !bracket)
			return p;
		if (*p == '/')
			return NULL;
	}
	return NULL;
}

bool qc_boot_is_remote(const char *source)
{
	return host_colon(source) != NULL;
}

void qc_boot_source_free(struct qc_boot_source *r)
{
	free(r->user);
	free(r->host);
	free(r->dir);
	memset(r, 0, sizeof(*r));
}

static bool bad_name(const char *s)
{
	if (!*s || s[0] == '-')
		return true;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return true;
	return false;
}

int qc_boot_parse_source(const char *source, struct qc_boot_source *out)
{
	const char *colon = host_colon(source), *at = NULL, *host;
	size_t hlen;

	memset(out, 0, sizeof(*out));
	if (!colon)
		return -EINVAL;
	for (const char *p = source; p < colon; p++)
		if (*p == '@')
			at = p;
	host = at ? at + 1 : source;
	hlen = (size_t)(colon - host);
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
		host++;
		hlen -= 2;
	}
	out->host = strndup(host, hlen);
	if (at)
		out->user = strndup(source, (size_t)(at - source));
	out->dir = strdup(colon[1] ? colon + 1 : ".");
	if (!out->host || !out->dir || (at && !out->user)) {
		qc_boot_source_free(out);
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	/* Nothing the user typed may ever pass for an option, here or on
	 * the remote side. */
	if (bad_name(out->host) || (out->user && bad_name(out->user))) {
		fprintf(stderr, "qftfs: invalid %s in '%s'\n",
			out->user && bad_name(out->user) ? "user" : "host",
			source);
		qc_boot_source_free(out);
		return -EINVAL;
	}
	if (out->dir[0] == '-') {
		fprintf(stderr, "qftfs: invalid remote directory '%s': it "
			"starts with '-' (write ./%s)\n", out->dir, out->dir);
		qc_boot_source_free(out);
		return -EINVAL;
	}
	return 0;
}

int qc_boot_parse_cipher(const char *s, enum qft_cipher *out)
{
	if (strcmp(s, "chacha20") == 0) {
		*out = QFT_CIPHER_CHACHA20POLY1305;
		return 0;
	}
	return qft_cipher_parse(s, out);
}

int qc_boot_parse_transport(const char *s, enum qc_transport_mode *out)
{
	if (strcmp(s, "auto") == 0)
		*out = QC_TRANSPORT_AUTO;
	else if (strcmp(s, "direct") == 0)
		*out = QC_TRANSPORT_DIRECT;
	else if (strcmp(s, "ssh") == 0)
		*out = QC_TRANSPORT_SSH;
	else
		return -EINVAL;
	return 0;
}

/*
 * One word for a POSIX shell: in single quotes, where nothing but the
 * quote itself is special ('\'' writes one).  A leading ~ or ~/ stays
 * outside, so the remote shell still expands it to the home directory.
 */
static void quote_word(FILE *m, const char *w, size_t n)
{
	if (n && w[0] == '~' && (n == 1 || w[1] == '/')) {
		/* The slash too: a shell expands ~ only when the slash that
		 * ends it is unquoted (~'/x' stays "~/x"). */
		size_t k = n == 1 ? 1 : 2;

		fwrite(w, 1, k, m);
		w += k;
		n -= k;
		if (!n)
			return;
	}
	fputc('\'', m);
	for (size_t i = 0; i < n; i++) {
		if (w[i] == '\'')
			fputs("'\\''", m);
		else
			fputc(w[i], m);
	}
	fputc('\'', m);
}

/*
 * The remote command.  With a server: exec <server words> --session
 * --root <dir> (exec, so no shell stays behind the server).  Without
 * (NULL): exec sh -c '<install script>' qftfs <protocol> <version> <dir>,
 * the script that finds or installs the server and execs it the same way
 * (install.h).  `follow` adds --follow-symlinks to the server's words, or
 * the word "follow" after <dir> for the script.
 */
static char *build_command(const char *server, const char *dir, bool follow,
			   int resume_s)
{
	const char *script = qc_install_script();
	size_t len = 0;
	char *cmd = NULL;
	FILE *m;

	m = open_memstream(&cmd, &len);
	if (!m)
		return NULL;
	/* An environment variable, not an argument: a server that predates
	 * resuming ignores it, where an unknown option would stop it. */
	if (resume_s > 0)
		fprintf(m, "QFTFS_RESUME=%d; export QFTFS_RESUME; ", resume_s);
	if (!server) {
		fputs("exec sh -c ", m);
		quote_word(m, script, strlen(script));
		fprintf(m, " qftfs %u %s ", QFT_VERSION, QFT_VERSION_STRING);
	} else {
		fputs("exec", m);
		for (const char *p = server; *p;) {
			size_t w;

			p += strspn(p, " \t");
			w = strcspn(p, " \t");
			if (!w)
				break;
			fputc(' ', m);
			quote_word(m, p, w);
			p += w;
		}
		fputs(follow ? " --follow-symlinks --session --root " :
		      " --session --root ", m);
	}
	quote_word(m, dir, strlen(dir));
	if (!server && follow)
		fputs(" follow", m);
	if (fclose(m) != 0) {
		free(cmd);
		return NULL;
	}
	return cmd;
}

int qc_boot_parse_greeting(const char *line, unsigned *version, unsigned *port)
{
	const char *p = line;
	unsigned long v[2];

	if (strncmp(p, "QFTFS ", 6) != 0)
		return -EPROTO;
	p += 6;
	for (int i = 0; i < 2; i++) {
		char *end;

		if (*p < '0' || *p > '9')
			return -EPROTO;
		errno = 0;
		v[i] = strtoul(p, &end, 10);
		if (errno || end - p > 10)
			return -EPROTO;
		p = end;
		if (i == 0 && *p++ != ' ')
			return -EPROTO;
	}
	/* Ten digits may exceed an unsigned: refused, not wrapped. */
	if (*p || v[0] > UINT_MAX || v[1] > 65535)
		return -EPROTO;
	*version = (unsigned)v[0];
	*port = (unsigned)v[1];
	return 0;
}

/* Says why the server ended before its greeting, as precisely as the
 * exit status and its stderr allow. */
static void explain_exit(struct qc_boot *b, const struct qc_boot_opts *o)
{
	const char *server = o->server;
	const char *host = qc_ssh_host(b->ssh);
	struct qc_ssh_exit ex = { .known = false };
	char head[512];
	bool done;

	done = qc_ssh_wait(b->ssh, EXIT_WAIT_MS, &ex) == 0 && ex.known;
	qc_ssh_stderr_head(b->ssh, head, sizeof(head));
	if ((done && !ex.signal[0] && ex.status == 127) ||
	    (!done && (strstr(head, "command not found") ||
		       strstr(head, ": not found")))) {
		qft_err("%s is not installed on %s (or not in PATH); install "
			"it there or give its path with -o server=PATH%s",
			server ? server : SERVER_NAME, host,
			!server && !o->install.enabled ? ", or drop -o "
			"install=no to let qftfs install it" : "");
	} else if (done && !ex.signal[0] && ex.status == 126) {
		qft_err("%s on %s is not executable; check -o server=PATH",
			server ? server : SERVER_NAME, host);
	} else if (done && ex.signal[0]) {
		qft_err("qftfs-server on %s was killed by SIG%s before it was "
			"ready", host, ex.signal);
	} else if (done) {
		qft_err("qftfs-server on %s exited with status %d before it was "
			"ready%s", host, ex.status,
			ex.status == 2 ? (o->follow ? " (a usage error: is it "
			"older than this qftfs? -o follow_symlinks needs one "
			"that knows --follow-symlinks)" : " (a usage error: is "
			"it older than this qftfs?)") : "");
	} else {
		qft_err("the ssh channel to %s closed before qftfs-server was "
			"ready", host);
	}
}

static const char *auth_reason(int r)
{
	switch (r) {
	case -EACCES:    return "the server's proof is wrong";
	case -EPROTO:    return "not a qftfs server";
	case -ETIMEDOUT: return "no answer in time";
	case -EPIPE:
	case -EIO:       return "the server closed the connection";
	default:         return strerror(-r);
	}
}

/*
 * A cut link must end the data connection rather than leave it
 * retransmitting for a quarter of an hour: the connection's own PINGs
 * keep data in flight, which TCP_USER_TIMEOUT bounds; keepalive probes
 * cover the time the connection is idle.
 */
static void direct_keepalive(int fd, const struct qc_boot_opts *o)
{
	int one = 1, v;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	if (o->keepalive_s > 0) {
		v = o->keepalive_s;
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v, sizeof(v));
		v = 3;
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &v, sizeof(v));
	}
	if (o->timeout_s > 0) {
		unsigned ut = (unsigned)o->timeout_s * 1000u;

		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
	}
}

/*
 * The direct transport.  Returns 0 with b->data_fd set, 1 when the caller
 * may fall back to the tunnel, or a negative errno.
 */
static int boot_direct(struct qc_boot *b, const struct qc_boot_opts *o,
		       unsigned port, const uint8_t *secret)
{
	struct sockaddr_storage ss;
	char addr[NI_MAXHOST + 2], host[NI_MAXHOST];
	const char *why;
	socklen_t len;
	int fd, r, one = 1;

	r = qc_ssh_peer(b->ssh, &ss, &len);
	if (r < 0) {
		qft_err("cannot find the address of the ssh connection: %s",
			strerror(-r));
		return r;
	}
	if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	if (getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), NULL,
			0, NI_NUMERICHOST) != 0)
		snprintf(host, sizeof(host), "%s", qc_ssh_host(b->ssh));
	snprintf(addr, sizeof(addr), ss.ss_family == AF_INET6 ? "[%s]" : "%s",
		 host);

	fd = qc_ssh_tcp_connect((struct sockaddr *)&ss, len, DIRECT_TIMEOUT_MS);
	if (fd < 0) {
		why = strerror(-fd);
		goto out_fallback;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	direct_keepalive(fd, o);
	r = qft_auth_client(fd, secret, o->cipher, HANDSHAKE_TIMEOUT_MS,
			    &b->keys);
	if (r == 0) {
		qft_debug("data plane: direct to %s:%u (%s)", addr, port,
			  qft_cipher_name(o->cipher));
		b->data_fd = fd;
		memcpy(b->meta_secret, secret, QFT_SECRET_SIZE);
		memcpy(&b->peer, &ss, len);
		b->peer_len = len;
		b->meta_ok = true;
		return 0;
	}
	close(fd);
	if (r == -EACCES || r == -EPROTO) {
		/* Not our server: something else answers on that port. */
		qft_err("the data connection to %s:%u failed authentication "
			"(%s); refusing to go on", addr, port, auth_reason(r));
		return -EACCES;
	}
	why = auth_reason(r);
out_fallback:
	if (o->transport == QC_TRANSPORT_DIRECT) {
		qft_err("direct connection to %s:%u failed (%s); not tunnelling "
			"through ssh (-o transport=direct)", addr, port, why);
		return -ECONNREFUSED;
	}
	qft_warn("direct connection to %s:%u failed (%s); tunnelling through "
		 "ssh", addr, port, why);
	return 1;
}

static int boot_tunnel(struct qc_boot *b, const struct qc_boot_opts *o,
		       const uint8_t *secret)
{
	int r;

	r = qft_auth_client_fds(b->ctl_fd, b->ctl_fd, secret, o->cipher,
				HANDSHAKE_TIMEOUT_MS, &b->keys);
	if (r < 0) {
		qft_err("the handshake with qftfs-server on %s through ssh "
			"failed: %s", qc_ssh_host(b->ssh), auth_reason(r));
		return r == -EACCES || r == -EPROTO ? -EACCES : -EIO;
	}
	qft_debug("data plane: through the ssh channel (%s)",
		  qft_cipher_name(o->cipher));
	b->data_fd = b->ctl_fd;
	b->ctl_fd = -1;
	b->tunnel = true;
	return 0;
}

int qc_boot_open(struct qc_boot *b, const struct qc_boot_opts *o)
{
	static const char hexdigits[] = "0123456789abcdef";
	uint8_t secret[QFT_SECRET_SIZE];
	char hex[2 * QFT_SECRET_SIZE + 1], line[GREETING_MAX], *cmd;
	unsigned version, port;
	int r;

	memset(b, 0, sizeof(*b));
	b->ctl_fd = b->data_fd = -1;
	b->cipher = o->cipher;
	line[0] = '\0';
	r = qc_ssh_connect(&b->ssh, &o->ssh);
	if (r < 0)
		return r;
	if (!o->server && o->install.enabled)
		cmd = build_command(NULL, o->dir, o->follow, o->resume_s);
	else
		cmd = build_command(o->server ? o->server : SERVER_NAME, o->dir,
				    o->follow, o->resume_s);
	if (!cmd) {
		r = -ENOMEM;
		goto out_free_ssh;
	}
	r = qc_ssh_exec(b->ssh, cmd);
	free(cmd);
	if (r < 0)
		goto out_free_ssh;
	r = qc_ssh_pump_start(b->ssh, &b->ctl_fd);
	if (r < 0) {
		qft_err("cannot start the ssh channel thread: %s", strerror(-r));
		goto out_free_ssh;
	}
	if (!o->server && o->install.enabled) {
		r = qc_install_run(b->ctl_fd, qc_ssh_host(b->ssh), &o->install);
		if (r == -EPIPE) {
			explain_exit(b, o);
			goto out_free_ssh;
		}
		if (r < 0)
			goto out_free_ssh;
	}

	/* The secret: fresh for every mount, only ever on the channel. */
	if (RAND_bytes(secret, sizeof(secret)) != 1) {
		qft_err("cannot generate the session secret");
		r = -EIO;
		goto out_free_ssh;
	}
	for (size_t i = 0; i < QFT_SECRET_SIZE; i++) {
		hex[2 * i] = hexdigits[secret[i] >> 4];
		hex[2 * i + 1] = hexdigits[secret[i] & 15];
	}
	hex[2 * QFT_SECRET_SIZE] = '\n';
	r = qft_write_all(b->ctl_fd, hex, sizeof(hex));
	OPENSSL_cleanse(hex, sizeof(hex));
	if (r == 0)
		r = qc_line_read(b->ctl_fd, line, sizeof(line),
			      GREETING_TIMEOUT_MS);
	if (r == -EPIPE || r == -ECONNRESET) {
		if (line[0] && r == -EPIPE)
			goto out_bad_line;
		explain_exit(b, o);
		goto out_wipe;
	}
	if (r == -ETIMEDOUT) {
		qft_err("qftfs-server on %s did not answer within %d s",
			qc_ssh_host(b->ssh), GREETING_TIMEOUT_MS / 1000);
		goto out_wipe;
	}
	if (r < 0 && r != -EMSGSIZE) {
		qft_err("cannot talk to qftfs-server on %s: %s",
			qc_ssh_host(b->ssh), strerror(-r));
		goto out_wipe;
	}
	if (r < 0 || qc_boot_parse_greeting(line, &version, &port) < 0)
		goto out_bad_line;
	if (version != QFT_VERSION) {
		qft_err("qftfs-server on %s speaks protocol version %u, this "
			"qftfs speaks version %u; install matching versions%s",
			qc_ssh_host(b->ssh), version, QFT_VERSION,
			o->server ? " (or drop -o server= to let qftfs install "
			"its own)" : "");
		r = -EPROTO;
		goto out_wipe;
	}

	r = 1;
	/* Behind a ProxyJump or ProxyCommand only ssh reaches the host. */
	if (o->transport != QC_TRANSPORT_SSH && !qc_ssh_proxied(b->ssh)) {
		if (port != 0) {
			r = boot_direct(b, o, port, secret);
		} else if (o->transport == QC_TRANSPORT_DIRECT) {
			qft_err("qftfs-server on %s could not listen on a port; "
				"use -o transport=ssh", qc_ssh_host(b->ssh));
			r = -ECONNREFUSED;
		} else {
			qft_warn("qftfs-server on %s could not listen on a "
				 "port; tunnelling through ssh",
				 qc_ssh_host(b->ssh));
		}
	}
	if (r == 1)
		r = boot_tunnel(b, o, secret);
	if (r < 0)
		goto out_wipe;
	/* Only a direct data plane can be reached again without ssh. */
	if (o->resume_s > 0 && !b->tunnel && b->meta_ok &&
	    qft_auth_resume_key(secret, b->resume_key) == 0)
		b->resume_ok = true;
	OPENSSL_cleanse(secret, sizeof(secret));
	return 0;

out_bad_line:
	/* Login scripts that print to stdout break every ssh protocol. */
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < ' ' || (unsigned char)*p >= 0x7f)
			*p = '?';
	qft_err("unexpected output from %s instead of qftfs-server's greeting: "
		"'%s' (does a login script print to stdout?)",
		qc_ssh_host(b->ssh), line);
	r = -EPROTO;
out_wipe:
	OPENSSL_cleanse(secret, sizeof(secret));
	qft_session_keys_wipe(&b->keys);
out_free_ssh:
	if (b->ctl_fd >= 0)
		close(b->ctl_fd);
	b->ctl_fd = -1;
	/* Closing the channel ends the server, if it ever started. */
	qc_ssh_free(b->ssh);
	b->ssh = NULL;
	return r < 0 ? r : -EIO;
}

static void meta_wipe(struct qc_boot *b)
{
	OPENSSL_cleanse(b->meta_secret, sizeof(b->meta_secret));
	b->meta_ok = false;
}

int qc_boot_open_meta(struct qc_boot *b, const struct qc_boot_opts *o,
		      int *fd, struct qft_session_keys *keys)
{
	int s, r, one = 1;

	if (!b->meta_ok)
		return -ENOTSUP;
	s = qc_ssh_tcp_connect((struct sockaddr *)&b->peer, b->peer_len,
			       DIRECT_TIMEOUT_MS);
	if (s < 0) {
		r = s;
		qft_info("no meta connection (%s): metadata shares the data "
			 "connection", strerror(-r));
		goto out_wipe;
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	direct_keepalive(s, o);
	r = qft_auth_client(s, b->meta_secret, o->cipher, HANDSHAKE_TIMEOUT_MS,
			    keys);
	if (r < 0) {
		qft_info("no meta connection (%s): metadata shares the data "
			 "connection", auth_reason(r));
		close(s);
		goto out_wipe;
	}
	*fd = s;
	qft_debug("meta connection: direct (%s)", qft_cipher_name(o->cipher));
out_wipe:
	meta_wipe(b);
	return r;
}

int qc_boot_reattach(struct qc_boot *b, const struct qc_boot_opts *o,
		     int *fd, struct qft_session_keys *keys)
{
	int s, r, one = 1;

	if (!b->resume_ok)
		return -ENOTSUP;
	s = qc_ssh_tcp_connect((struct sockaddr *)&b->peer, b->peer_len,
			       REATTACH_CONNECT_MS);
	if (s < 0) {
		qft_debug("resume: cannot connect: %s", strerror(-s));
		return s;
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	direct_keepalive(s, o);
	r = qft_auth_client(s, b->resume_key, o->cipher,
			    REATTACH_HANDSHAKE_MS, keys);
	if (r < 0) {
		qft_debug("resume: handshake: %s", auth_reason(r));
		close(s);
		/* A wrong proof is final; a handshake cut short is not. */
		return r == -EACCES || r == -EPROTO ? -EACCES : -ETIMEDOUT;
	}
	*fd = s;
	return 0;
}

void qc_boot_pause(struct qc_boot *b)
{
	if (b->ssh)
		qc_ssh_pump_pause(b->ssh);
}

int qc_boot_resume(struct qc_boot *b)
{
	int unused = -1;

	return b->ssh ? qc_ssh_pump_start(b->ssh, &unused) : 0;
}

int qc_boot_close(struct qc_boot *b, int timeout_ms)
{
	struct qc_ssh_exit ex = { .known = false };
	const char *host;
	int r;

	qft_session_keys_wipe(&b->keys);
	meta_wipe(b);
	OPENSSL_cleanse(b->resume_key, sizeof(b->resume_key));
	b->resume_ok = false;
	if (!b->ssh)
		return 0;
	host = qc_ssh_host(b->ssh);
	/* EOF on its stdin: the server's cue to exit, if it has not. */
	if (b->ctl_fd >= 0) {
		close(b->ctl_fd);
		b->ctl_fd = -1;
	}
	r = qc_ssh_wait(b->ssh, timeout_ms, &ex);
	if (r < 0) {
		qft_warn("qftfs-server on %s did not exit within %d s", host,
			 timeout_ms / 1000);
	} else if (ex.known && ex.signal[0]) {
		qft_warn("qftfs-server on %s was killed by SIG%s", host,
			 ex.signal);
		r = -EIO;
	} else if (ex.known && ex.status != 0) {
		qft_warn("qftfs-server on %s exited with status %d", host,
			 ex.status);
		r = -EIO;
	}
	qc_ssh_free(b->ssh);
	b->ssh = NULL;
	return r;
}
