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

#include "login/attach.h"
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
/* The ssh login of an attach: the TCP connect as short as a direct one;
 * its line and handshake as long as a direct handshake. */
#define ATTACH_CONNECT_MS     REATTACH_CONNECT_MS
#define ATTACH_STEP_MS        10000
/* A connection attached through ssh this recently (the bulk lane of the
 * same attempt, after the direct port failed): the meta lane goes the
 * same way instead of paying the direct port's timeout again. */
#define ATTACH_STICKY_MS      1000

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

/* Each blank-separated word of `s` (a -o server= command), quoted, after
 * a space. */
static void put_words(FILE *m, const char *s)
{
	while (*s) {
		size_t w;

		s += strspn(s, " \t");
		w = strcspn(s, " \t");
		if (!w)
			break;
		fputc(' ', m);
		quote_word(m, s, w);
		s += w;
	}
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
			   int resume_s, const struct qft_tcpcc *tcpcc)
{
	const char *script = qc_install_script();
	size_t len = 0;
	char *cmd = NULL;
	FILE *m;

	m = open_memstream(&cmd, &len);
	if (!m)
		return NULL;
	/* Environment variables, not arguments: a server that predates
	 * resuming or attaching ignores them, where an unknown option would
	 * stop it.  QFTFS_ATTACH=1 lets it add the session id to its
	 * greeting (an older client would not parse that). */
	if (resume_s > 0)
		fprintf(m, "QFTFS_RESUME=%d QFTFS_ATTACH=1; export QFTFS_RESUME "
			"QFTFS_ATTACH; ", resume_s);
	/* auto is the server's own default; the others are plain words
	 * (qft_tcpcc_parse let nothing else through). */
	if (tcpcc->mode != QFT_TCPCC_AUTO)
		fprintf(m, "QFTFS_CONGESTION=%s; export QFTFS_CONGESTION; ",
			qft_tcpcc_str(tcpcc));
	if (!server) {
		fputs("exec sh -c ", m);
		quote_word(m, script, strlen(script));
		fprintf(m, " qftfs %u %s ", QFT_VERSION, QFT_VERSION_STRING);
	} else {
		fputs("exec", m);
		put_words(m, server);
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

/* "QFTFS <version> <port>", and " <id>" (QFT_ATTACH_ID_HEX lowercase hex
 * digits) when the server may be attached to; nothing else (bootstrap.h). */
int qc_boot_parse_greeting(const char *line, unsigned *version, unsigned *port,
			   char id[QFT_ATTACH_ID_HEX + 1])
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
	id[0] = '\0';
	if (*p == ' ') {
		size_t n = strspn(p + 1, "0123456789abcdef");

		if (n != QFT_ATTACH_ID_HEX)
			return -EPROTO;
		memcpy(id, p + 1, n);
		id[n] = '\0';
		p += 1 + n;
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
 * Readies a direct connection.  Requests and replies are small and
 * latency-bound: no Nagle delay.  A cut link must end the connection
 * rather than leave it retransmitting for a quarter of an hour: the
 * connection's own PINGs keep data in flight, which TCP_USER_TIMEOUT
 * bounds; keepalive probes cover the time it is idle.  And what this
 * host sends goes with the congestion control of -o congestion= (tcpcc.h).
 * Returns 0, or the refusal of an algorithm asked for by name, logged.
 */
static int direct_tune(int fd, const struct qc_boot_opts *o)
{
	char used[QFT_TCPCC_NAME_MAX], why[384];
	int one = 1, v, r;
	bool refused;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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
	r = qft_tcpcc_apply(fd, &o->tcpcc, used, &refused);
	if (r == -ENOPROTOOPT)
		return 0;
	if (r < 0) {
		qft_tcpcc_refusal(o->tcpcc.name, r, why, sizeof(why));
		qft_err("-o congestion=%s: %s", o->tcpcc.name, why);
		return r;
	}
	if (refused)
		qft_debug("congestion control %s (%s is not allowed for this "
			  "user)", used, QFT_TCPCC_PREFERRED);
	return 0;
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
	int fd, r;

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
	r = direct_tune(fd, o);
	if (r < 0) {
		/* Asked for by name: no tunnel either, whose ssh
		 * connection would send without it. */
		close(fd);
		return r;
	}
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
		cmd = build_command(NULL, o->dir, o->follow, o->resume_s,
				    &o->tcpcc);
	else
		cmd = build_command(o->server ? o->server : SERVER_NAME, o->dir,
				    o->follow, o->resume_s, &o->tcpcc);
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
		r = qc_install_run(b->ctl_fd, qc_ssh_host(b->ssh), &o->install,
				   b->server_path, sizeof(b->server_path));
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
	if (r < 0 ||
	    qc_boot_parse_greeting(line, &version, &port, b->attach_id) < 0)
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
	/* A direct data plane can be reached again without ssh; either can
	 * through a new ssh login when the server gave its id. */
	b->direct = !b->tunnel && b->meta_ok;
	b->attach_ok = b->attach_id[0] != '\0';
	if (o->resume_s > 0 && (b->direct || b->attach_ok) &&
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
	int s, r;

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
	r = direct_tune(s, o);
	if (r < 0) {
		close(s);
		goto out_wipe;
	}
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

static int reattach_direct(const struct qc_boot *b,
			   const struct qc_boot_opts *o, int *fd,
			   struct qft_session_keys *keys)
{
	int s, r;

	s = qc_ssh_tcp_connect((struct sockaddr *)&b->peer, b->peer_len,
			       REATTACH_CONNECT_MS);
	if (s < 0) {
		qft_debug("resume: cannot connect: %s", strerror(-s));
		return s;
	}
	r = direct_tune(s, o);
	if (r < 0) {
		close(s);
		return r;
	}
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

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* exec <server words> --attach <id>: the server the session runs. */
static char *attach_command(const struct qc_boot *b,
			    const struct qc_boot_opts *o)
{
	const char *server = b->server_path[0] ? NULL :
			     o->server ? o->server : SERVER_NAME;
	size_t len = 0;
	char *cmd = NULL;
	FILE *m;

	m = open_memstream(&cmd, &len);
	if (!m)
		return NULL;
	fputs("exec", m);
	if (!server) {
		fputc(' ', m);
		quote_word(m, b->server_path, strlen(b->server_path));
	}
	if (server)
		put_words(m, server);
	fprintf(m, " --attach %s", b->attach_id);
	if (fclose(m) != 0) {
		free(cmd);
		return NULL;
	}
	return cmd;
}

/* Frees the logins of attached connections that ended, and the oldest
 * when there is no room (gone by then: see QC_BOOT_ATTACHED_MAX). */
static void attached_reap(struct qc_boot *b)
{
	unsigned n = 0;

	for (unsigned i = 0; i < b->nattached; i++) {
		if (qc_ssh_wait(b->attached[i], 0, NULL) == 0)
			qc_ssh_free(b->attached[i]);
		else
			b->attached[n++] = b->attached[i];
	}
	b->nattached = n;
	if (n == QC_BOOT_ATTACHED_MAX) {
		qc_ssh_free(b->attached[0]);
		memmove(b->attached, b->attached + 1,
			(n - 1) * sizeof(b->attached[0]));
		b->nattached--;
	}
}

static int reattach_ssh(struct qc_boot *b, const struct qc_boot_opts *o,
			int *fd, struct qft_session_keys *keys)
{
	struct qc_ssh_opts so = o->ssh;
	struct qc_ssh *s;
	char *cmd;
	int r;

	attached_reap(b);
	cmd = attach_command(b, o);
	if (!cmd)
		return -ENOMEM;
	so.batch = true;
	so.connect_timeout_ms = ATTACH_CONNECT_MS;
	so.retrying = true;
	r = qc_attach_open(&s, &so, cmd, b->resume_key, o->cipher,
			   ATTACH_STEP_MS, fd, keys);
	free(cmd);
	if (r < 0)
		return r;
	b->attached[b->nattached++] = s;
	b->attached_ms = mono_ms();
	qft_info("resuming through ssh: attached to the session on %s",
		 qc_ssh_host(s));
	return 0;
}

int qc_boot_reattach(struct qc_boot *b, const struct qc_boot_opts *o,
		     int *fd, struct qft_session_keys *keys)
{
	int r = -ENOTSUP;

	if (!b->resume_ok)
		return -ENOTSUP;
	if (b->direct && (!b->attach_ok || b->nattached == 0 ||
			  mono_ms() - b->attached_ms > ATTACH_STICKY_MS)) {
		r = reattach_direct(b, o, fd, keys);
		/* A refused proof is final: that port is not our session's
		 * (any more), whatever ssh would say. */
		if (r == 0 || r == -EACCES || !b->attach_ok)
			return r;
		qft_debug("resume: the direct port failed (%s); trying ssh",
			  strerror(-r));
	}
	return reattach_ssh(b, o, fd, keys);
}

int qc_boot_join(const struct qc_boot *b, const struct qc_boot_opts *o,
		 int *fd, struct qft_session_keys *keys)
{
	if (!b->resume_ok || !b->direct)
		return -ENOTSUP;
	return reattach_direct(b, o, fd, keys);
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
	/* Their connections are closed by now: each --attach ends with the
	 * session's side, or with its channel. */
	for (unsigned i = 0; i < b->nattached; i++)
		qc_ssh_free(b->attached[i]);
	b->nattached = 0;
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
