// SPDX-License-Identifier: MIT
/*
 * Login with libssh2: the TCP connection, the order of the steps of a
 * login (ssh_internal.h names the file of each), the command's channel,
 * and the end of the session (see ssh.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <libssh2.h>

#include "log.h"
#include "login/ssh_internal.h"

#define SSH_CONNECT_TIMEOUT_MS 15000
/* Each blocking libssh2 call during login (not the user's typing). */
#define SSH_SETUP_TIMEOUT_MS   30000
#define SSH_CLOSE_TIMEOUT_MS   2000
/* ... while the remote command has not ended: see qc_ssh_free. */
#define SSH_ABANDON_TIMEOUT_MS 250
/* TCP keepalive on the ssh connection: a peer gone for good is noticed
 * after idle + interval * count seconds. */
#define SSH_KEEPIDLE_S         15
#define SSH_KEEPINTVL_S        5
#define SSH_KEEPCNT            4
/* The channel window: what the server may send before we read it. */
#define SSH_WINDOW             (4u * 1024u * 1024u)

int qc_ssh_global_init(void)
{
	return libssh2_init(0) == 0 ? 0 : -EIO;
}

void qc_ssh_global_exit(void)
{
	libssh2_exit();
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
static int ssh_tcp(struct qc_ssh *s, int timeout_s, int connect_ms,
		   bool retrying)
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
					connect_ms > 0 ? connect_ms :
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
		qft_log(retrying ? QFT_LOG_DEBUG : QFT_LOG_ERR,
			"cannot connect to %s port %d: %s", s->hostname,
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

int qc_ssh_connect(struct qc_ssh **out, const struct qc_ssh_opts *o)
{
	LIBSSH2_KNOWNHOSTS *kh = NULL;
	const char *why;
	struct qc_ssh *s;
	struct qc_ssh_login l;
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

	r = qc_ssh_login_init(&l, o);
	if (r == 0)
		r = qc_ssh_login_config(&l, o);
	if (r == 0)
		r = qc_ssh_login_resolve(&l, s, o);
	if (r < 0)
		goto out_free_login;
	why = qc_ssh_openssh_needed(&l, o);
	if (why) {
		qft_debug("logging in with the OpenSSH client (%s)", why);
		r = qc_ssh_openssh_prepare(s, &l, o);
		if (r < 0)
			goto out_free_login;
		qc_ssh_login_free(&l);
		*out = s;
		return 0;
	}
	qft_debug("connecting to %s@%s port %d", s->user, s->hostname,
		  s->port);
	if ((r = ssh_tcp(s, o->timeout_s, o->connect_timeout_ms,
			 o->retrying)) < 0)
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
		qc_ssh_kh_load(kh, l.known_hosts[i]);
	qc_ssh_kh_load(kh, "/etc/ssh/ssh_known_hosts");
	if ((r = qc_ssh_kh_name(s, khname, sizeof(khname))) < 0)
		goto out_free_kh;
	qc_ssh_kh_prefs(s, kh, khname);

	if (libssh2_session_handshake(s->session, s->sock) != 0) {
		qft_err("ssh handshake with %s port %d failed: %s",
			s->hostname, s->port, qc_ssh_errmsg(s));
		r = -EPROTO;
		goto out_free_kh;
	}
	if ((r = qc_ssh_hostkey_check(s, &l, kh, khname)) < 0)
		goto out_free_kh;
	r = qc_ssh_authenticate(s, &l, o);
	if (r == -EKEYREJECTED || r == -EKEYEXPIRED) {
		qft_info("logging in to %s with the OpenSSH client: %s",
			 s->name, r == -EKEYREJECTED ?
			 "libssh2 signs RSA keys with SHA-1 only, which the "
			 "server refuses (rsa-sha2-256/512 needed)" :
			 "libssh2 cannot use the FIDO or certificate key "
			 "offered");
		libssh2_knownhost_free(kh);
		libssh2_drop(s);
		r = qc_ssh_openssh_prepare(s, &l, o);
		if (r < 0)
			goto out_free_login;
		qc_ssh_login_free(&l);
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
	qc_ssh_secret_free(s->password);
	s->password = NULL;
	libssh2_knownhost_free(kh);
	qc_ssh_login_free(&l);
	*out = s;
	return 0;

out_free_kh:
	libssh2_knownhost_free(kh);
out_free_login:
	qc_ssh_login_free(&l);
	qc_ssh_free(s);
	return r;
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
			qc_ssh_errmsg(s));
		return -EIO;
	}
	qft_debug("running on %s: %s", s->alias, command);
	if (libssh2_channel_exec(s->channel, command) != 0) {
		qft_err("%s refused to run a command: %s", s->name,
			qc_ssh_errmsg(s));
		return -EACCES;
	}
	return 0;
}

/* Waits for the socket as libssh2 wants it; false past the deadline. */
static bool ssh_wait_socket(struct qc_ssh *s, int64_t deadline)
{
	struct pollfd p = { .fd = s->sock, .events = 0 };
	int dirs = libssh2_session_block_directions(s->session);
	int64_t left = deadline - qc_ssh_now_ms();

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
	int64_t deadline, budget = SSH_CLOSE_TIMEOUT_MS;
	int r;

	if (!s)
		return;
	qc_ssh_pump_pause(s);
	/*
	 * The remote command has not ended (no exit status, no close of
	 * the channel seen): it is still running, and the disconnect ends
	 * it as a closed channel would; or the link is gone, and the
	 * peer's half of the closing handshake never comes.  Either way a
	 * long wait for it would only hold up the caller -- an unmount on
	 * a link cut a moment ago.
	 */
	pthread_mutex_lock(&s->lock);
	if (!s->finished)
		budget = SSH_ABANDON_TIMEOUT_MS;
	pthread_mutex_unlock(&s->lock);
	deadline = qc_ssh_now_ms() + budget;
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
		deadline = qc_ssh_now_ms() + budget / 2;
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
	qc_ssh_secret_free(s->password);
	free(s->alias);
	free(s->name);
	free(s->user);
	free(s->hostname);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
