// SPDX-License-Identifier: MIT
/* The server end of the ssh bootstrap (see session.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "attach.h"
#include "auth.h"
#include "chan.h"
#include "gate.h"
#include "log.h"
#include "thread.h"
#include "protocol.h"
#include "resume.h"
#include "session.h"

#define SECRET_TIMEOUT_MS  30000
#define CLIENT_TIMEOUT_MS  30000
#define LISTEN_BACKLOG     8
#define SECRET_LINE        (2 * QFT_SECRET_SIZE + 1)
/*
 * Liveness of the data connection.  A client whose host vanished (cable
 * cut, laptop closed) sends no FIN or RST, so without these the server
 * would wait for it forever: probes after 20 s of silence, every 10 s,
 * and the kernel drops the connection once data or probes have gone
 * unacknowledged for 60 s; the request loop then ends with ETIMEDOUT.
 * The client's own keepalive (PING) keeps an idle mount well inside this.
 */
#define KEEPALIVE_IDLE_S   20
#define KEEPALIVE_INTVL_S  10
#define KEEPALIVE_CNT      4
#define USER_TIMEOUT_MS    60000

struct waiter;

/* One TCP handshake running on its own thread, in the gate's slot of the
 * same index. */
struct hs_slot {
	bool used;                    /* the waiter's thread only */
	int fd;
	pthread_t thread;
	struct waiter *w;
	/* Written by the thread before `done`; read by the waiter's thread
	 * after joining it. */
	int result;
	enum qft_cipher cipher;
	struct qft_session_keys keys;
	bool done;                    /* w->lock */
};

/*
 * Handshakes on the listener, run in parallel on their own threads so
 * that a slow or silent connection holds up no other, admitted and
 * evicted by the gate (gate.h), and reaped by one thread: the one
 * waiting for the client (session_wait) or for its meta connection
 * (accept_one).
 */
struct waiter {
	const uint8_t *secret;
	int notify[2];                /* a byte per finished handshake */
	pthread_mutex_t lock;
	struct srv_gate gate;         /* the waiter's thread only */
	struct hs_slot slot[SRV_GATE_SLOTS];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Reads exactly the secret line and nothing after it: in the tunnel the
 * client's handshake follows on the same stream.
 */
int srv_session_read_secret(int fd, uint8_t secret[QFT_SECRET_SIZE])
{
	int64_t deadline = now_ms() + SECRET_TIMEOUT_MS;
	char line[SECRET_LINE];
	size_t got = 0;
	int r = 0;

	while (got < SECRET_LINE) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0) {
			qft_err("no session secret on stdin within %d s; "
				"--session is started by qftfs over ssh, not "
				"by hand", SECRET_TIMEOUT_MS / 1000);
			r = -ETIMEDOUT;
			goto out_wipe;
		}
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			qft_err("cannot read the session secret: %s",
				strerror(-r));
			goto out_wipe;
		}
		if (!p.revents)
			continue;
		n = read(fd, line + got, SECRET_LINE - got);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			r = -errno;
			qft_err("cannot read the session secret: %s",
				strerror(-r));
			goto out_wipe;
		}
		if (n == 0) {
			if (got == 0) {
				qft_err("stdin closed before the session secret "
					"arrived");
				r = -EPIPE;
				goto out_wipe;
			}
			break;
		}
		/* A short line is malformed: say so now, not in 30 s. */
		if (memchr(line + got, '\n', (size_t)n) &&
		    got + (size_t)n < SECRET_LINE)
			break;
		got += (size_t)n;
	}
	if (got < SECRET_LINE || line[SECRET_LINE - 1] != '\n') {
		r = -EINVAL;
	} else {
		for (size_t i = 0; i < QFT_SECRET_SIZE; i++) {
			int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);

			if (hi < 0 || lo < 0) {
				r = -EINVAL;
				break;
			}
			secret[i] = (uint8_t)(hi << 4 | lo);
		}
	}
	if (r == -EINVAL)
		qft_err("malformed session secret on stdin: expected 64 hex "
			"digits and a newline (--session is started by "
			"qftfs over ssh, not by hand)");
out_wipe:
	OPENSSL_cleanse(line, sizeof(line));
	if (r < 0)
		OPENSSL_cleanse(secret, QFT_SECRET_SIZE);
	return r;
}

/*
 * The address sshd accepted the login on is the one the client can
 * reach: SSH_CONNECTION is "client-ip client-port server-ip server-port".
 */
static int session_listen(int *lfd, unsigned *port)
{
	const struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICHOST | AI_PASSIVE,
	};
	const char *conn = getenv("SSH_CONNECTION");
	char ip[NI_MAXHOST] = "127.0.0.1";
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct addrinfo *res;
	int fd, r;

	*lfd = -1;
	*port = 0;
	if (!conn || sscanf(conn, "%*s %*s %1024s %*s", ip) != 1) {
		qft_warn("SSH_CONNECTION is not set: listening on 127.0.0.1");
		snprintf(ip, sizeof(ip), "127.0.0.1");
	}
	r = getaddrinfo(ip, "0", &hints, &res);
	if (r != 0) {
		qft_warn("cannot listen on %s: %s; only the ssh tunnel will "
			 "work", ip, gai_strerror(r));
		return 0;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
	    listen(fd, LISTEN_BACKLOG) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		qft_warn("cannot listen on %s: %s; only the ssh tunnel will "
			 "work", ip, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return 0;
	}
	freeaddrinfo(res);
	*port = ss.ss_family == AF_INET6 ?
		ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
		ntohs(((struct sockaddr_in *)&ss)->sin_port);
	*lfd = fd;
	qft_debug("listening on %s port %u", ip, *port);
	return 0;
}

/* Keepalive and user timeout on the data socket (see above).  Failing to
 * set them costs only the exit on a vanished client: warn, go on. */
static void set_liveness(int fd)
{
	static const struct {
		int level, name, value;
		const char *what;
	} opt[] = {
		{ SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE" },
		{ IPPROTO_TCP, TCP_KEEPIDLE, KEEPALIVE_IDLE_S, "TCP_KEEPIDLE" },
		{ IPPROTO_TCP, TCP_KEEPINTVL, KEEPALIVE_INTVL_S,
		  "TCP_KEEPINTVL" },
		{ IPPROTO_TCP, TCP_KEEPCNT, KEEPALIVE_CNT, "TCP_KEEPCNT" },
		{ IPPROTO_TCP, TCP_USER_TIMEOUT, USER_TIMEOUT_MS,
		  "TCP_USER_TIMEOUT" },
	};

	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
		if (setsockopt(fd, opt[i].level, opt[i].name, &opt[i].value,
			       sizeof(opt[i].value)) < 0)
			qft_warn("cannot set %s on the data connection: %s; "
				 "a vanished client may go unnoticed",
				 opt[i].what, strerror(errno));
}

void srv_session_tune_tcp(const struct srv_session *ss, int fd,
			  const char *what)
{
	char used[QFT_TCPCC_NAME_MAX], why[384];
	bool refused;
	int one = 1, r;

	/* Requests and replies are small and latency-bound. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	set_liveness(fd);
	r = qft_tcpcc_apply(fd, &ss->tcpcc, used, &refused);
	if (r == -ENOPROTOOPT)
		return;
	if (r < 0) {
		/* The client asked for it by name (-o congestion=): the
		 * connection still works, with the host's default, and the
		 * client's log and statistics show which. */
		qft_tcpcc_refusal(ss->tcpcc.name, r, why, sizeof(why));
		qft_warn("%s: %s; sending with the host's default", what,
			 why);
		return;
	}
	if (refused)
		qft_debug("%s: congestion control %s (%s is not allowed for "
			  "this user)", what, used, QFT_TCPCC_PREFERRED);
	else
		qft_debug("%s: congestion control %s (congestion=%s)", what,
			  used, qft_tcpcc_str(&ss->tcpcc));
}

static const char *auth_reason(int r)
{
	switch (r) {
	case -EACCES:    return "wrong proof (wrong secret, tampering or replay)";
	case -EPROTO:    return "not a qftfs handshake";
	case -ETIMEDOUT: return "handshake not finished within 5 s";
	case -EPIPE:     return "closed before the handshake";
	case -EIO:       return "closed during the handshake";
	case -ECONNABORTED: return "cut short to make room for another";
	default:         return strerror(-r);
	}
}

static void *hs_main(void *arg)
{
	struct hs_slot *sl = arg;
	int r;

	r = qft_auth_server(sl->fd, sl->w->secret, QFT_AUTH_TIMEOUT_MS,
			    &sl->cipher, &sl->keys);
	pthread_mutex_lock(&sl->w->lock);
	sl->result = r;
	sl->done = true;
	pthread_mutex_unlock(&sl->w->lock);
	(void)!write(sl->w->notify[1], "x", 1);
	return NULL;
}

static int waiter_init(struct waiter *w, const uint8_t *secret,
		       const char *what)
{
	memset(w, 0, sizeof(*w));
	w->secret = secret;
	if (pipe2(w->notify, O_CLOEXEC | O_NONBLOCK) < 0) {
		int r = -errno;

		qft_err("cannot create a pipe: %s", strerror(-r));
		return r;
	}
	pthread_mutex_init(&w->lock, NULL);
	srv_gate_init(&w->gate, what);
	for (size_t i = 0; i < SRV_GATE_SLOTS; i++)
		w->slot[i].fd = -1;
	return 0;
}

/* Accepts one connection and starts its handshake, if the gate has room
 * for it. */
static void hs_start(struct waiter *w, int lfd)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	struct hs_slot *sl;
	int fd, i, r;

	fd = accept4(lfd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);
	if (fd < 0)
		return;         /* gone already, or a spurious wakeup */
	i = srv_gate_admit(&w->gate, fd, (struct sockaddr *)&sa, len);
	if (i < 0) {            /* the caller polls only with a free slot */
		close(fd);
		return;
	}
	sl = &w->slot[i];
	memset(sl, 0, sizeof(*sl));
	sl->fd = fd;
	sl->w = w;
	r = pthread_create(&sl->thread, NULL, hs_main, sl);
	if (r) {
		qft_warn("cannot start a handshake: %s", strerror(r));
		srv_gate_done(&w->gate, i, 0, NULL);
		close(fd);
		return;
	}
	sl->used = true;
}

/*
 * Joins the handshakes that finished: the slot of one that succeeded
 * (with `want` as its cipher, unless `want` is QFT_CIPHER__COUNT), its
 * descriptor and keys the caller's now; or NULL.  The failed ones are
 * closed and logged by the gate.
 */
static struct hs_slot *hs_reap(struct waiter *w, enum qft_cipher want)
{
	char junk[16];

	while (read(w->notify[0], junk, sizeof(junk)) > 0)
		;
	for (size_t i = 0; i < SRV_GATE_SLOTS; i++) {
		struct hs_slot *sl = &w->slot[i];
		bool done;
		int r;

		pthread_mutex_lock(&w->lock);
		done = sl->used && sl->done;
		pthread_mutex_unlock(&w->lock);
		if (!done)
			continue;
		pthread_join(sl->thread, NULL);
		sl->used = false;
		r = sl->result;
		/* Evicted after it finished: its socket is shut down. */
		if (r == 0 && w->gate.slot[i].evicted)
			r = -ECONNABORTED;
		if (r == 0 && want != QFT_CIPHER__COUNT && sl->cipher != want)
			r = -EPROTO;
		srv_gate_done(&w->gate, (int)i, r, auth_reason(r));
		if (r == 0)
			return sl;
		qft_session_keys_wipe(&sl->keys);
		close(sl->fd);
		sl->fd = -1;
	}
	return NULL;
}

/* Ends every handshake still running and frees the waiter. */
static void waiter_free(struct waiter *w)
{
	for (size_t i = 0; i < SRV_GATE_SLOTS; i++) {
		struct hs_slot *sl = &w->slot[i];

		if (!sl->used)
			continue;
		/* The handshake's poll wakes at once and fails. */
		shutdown(sl->fd, SHUT_RDWR);
		pthread_join(sl->thread, NULL);
		close(sl->fd);
		qft_session_keys_wipe(&sl->keys);
		sl->used = false;
	}
	close(w->notify[0]);
	close(w->notify[1]);
	pthread_mutex_destroy(&w->lock);
}

static int session_keys(struct srv_session *ss, enum qft_cipher cipher,
			struct qft_session_keys *keys)
{
	int r;

	ss->cipher = cipher;
	r = qft_seal_init(&ss->tx, cipher, keys->s2c, true);
	if (r == 0) {
		r = qft_seal_init(&ss->rx, cipher, keys->c2s, false);
		if (r < 0)
			qft_seal_free(&ss->tx);
	}
	qft_session_keys_wipe(keys);
	if (r < 0)
		qft_err("cannot key the record layer: %s", strerror(-r));
	return r;
}

/*
 * Waits for the first client to prove it knows the secret, over TCP or
 * through the channel.  Returns 0 with the data plane set up in *ss.
 * Failed handshakes on the listener end nothing (gate.h): the wait ends
 * with the client, the channel's end, or the deadline.
 */
static int session_wait(struct srv_session *ss, int lfd, const uint8_t *secret)
{
	int64_t deadline = now_ms() + CLIENT_TIMEOUT_MS;
	struct qft_session_keys keys;
	struct hs_slot *winner = NULL;
	enum qft_cipher cipher;
	struct waiter w;
	int r;

	r = waiter_init(&w, secret, "data connection");
	if (r < 0)
		return r;
	while (!winner) {
		struct pollfd p[3];
		int64_t left = deadline - now_ms();

		if (left <= 0) {
			qft_err("no client connected within %d s; exiting",
				CLIENT_TIMEOUT_MS / 1000);
			r = -ETIMEDOUT;
			break;
		}
		p[0].fd = w.notify[0];
		p[0].events = POLLIN;
		p[1].fd = ss->in_fd;
		p[1].events = POLLIN;
		p[2].fd = lfd >= 0 && srv_gate_room(&w.gate) ? lfd : -1;
		p[2].events = POLLIN;
		if (poll(p, 3, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			qft_err("poll failed: %s", strerror(-r));
			break;
		}

		if (p[0].revents && (winner = hs_reap(&w, QFT_CIPHER__COUNT)))
			break;

		if (p[1].revents) {
			/* The client writes to the channel only to start the
			 * tunnel; its end means the client is gone. */
			r = qft_auth_server_fds(ss->in_fd, ss->out_fd, secret,
						QFT_AUTH_TIMEOUT_MS, &cipher,
						&keys);
			if (r == -EPIPE) {
				qft_err("the ssh channel closed before a client "
					"connected");
				break;
			}
			if (r < 0) {
				/* The channel is out of step: no second try. */
				qft_err("rejected the tunnelled data plane: %s",
					auth_reason(r));
				break;
			}
			ss->tunnel = true;
			ss->data_fd = -1;
			qft_debug("client authenticated through the ssh "
				  "channel (%s)", qft_cipher_name(cipher));
			r = session_keys(ss, cipher, &keys);
			break;
		}

		if (p[2].revents)
			hs_start(&w, lfd);
	}

	if (winner) {
		ss->tunnel = false;
		ss->data_fd = winner->fd;
		winner->fd = -1;
		srv_session_tune_tcp(ss, ss->data_fd, "data connection");
		qft_debug("client authenticated (%s)",
			  qft_cipher_name(winner->cipher));
		r = session_keys(ss, winner->cipher, &winner->keys);
		if (r < 0) {
			close(ss->data_fd);
			ss->data_fd = -1;
		}
	}
	waiter_free(&w);
	OPENSSL_cleanse(&keys, sizeof(keys));
	return r;
}

/*
 * A tunnel that may be resumed by attaching: its first connection goes
 * through a relay, so that it is a socket the session can shut down like
 * the ones that replace it, and the attach socket is handed over with K_r
 * at once (no connection under S comes after the tunnel's).  Without a
 * relay the tunnel is served as before, not resumable.
 */
static void tunnel_resumable(struct srv_session *ss)
{
	int sock;

	if (srv_attach_relay_start(&ss->relay, ss->in_fd, ss->out_fd,
				   &sock) < 0) {
		ss->resume = NULL;
		OPENSSL_cleanse(ss->resume_key, sizeof(ss->resume_key));
		ss->have_resume_key = false;
		return;
	}
	ss->data_fd = sock;
	ss->hooks->listen(ss->resume, -1, ss->afd, ss->resume_key,
			  ss->cipher);
	ss->afd = -1;
	OPENSSL_cleanse(ss->resume_key, sizeof(ss->resume_key));
	ss->have_resume_key = false;
	qft_debug("the tunnel may be resumed by attaching over ssh");
}

int srv_session_open(struct srv_session *ss, int in_fd, int out_fd,
		     struct srv_resume *rs,
		     const struct srv_session_hooks *hooks,
		     const struct qft_tcpcc *tcpcc)
{
	uint8_t secret[QFT_SECRET_SIZE];
	char line[64];
	unsigned port;
	int lfd, n, r;

	memset(ss, 0, sizeof(*ss));
	ss->in_fd = in_fd;
	ss->out_fd = out_fd;
	ss->data_fd = -1;
	ss->lfd = -1;
	ss->meta_fd = -1;
	ss->afd = -1;
	ss->resume = rs && rs->grace_s && hooks ? rs : NULL;
	ss->hooks = hooks;
	ss->tcpcc = *tcpcc;
	pthread_mutex_init(&ss->lock, NULL);
	/* No core file, no ptrace by other processes of the user: the
	 * secret is about to be in memory. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		qft_warn("cannot make the process non-dumpable: %s",
			 strerror(errno));

	r = srv_session_read_secret(in_fd, secret);
	if (r < 0)
		return r;
	session_listen(&lfd, &port);
	/* Only a client that asked can parse the id, and only one that
	 * resumes has a use for it. */
	if (ss->resume && srv_attach_wanted())
		srv_attach_listen(&ss->afd, ss->attach_id);
	if (ss->afd >= 0)
		n = snprintf(line, sizeof(line), "QFTFS %u %u %s\n",
			     QFT_VERSION, port, ss->attach_id);
	else
		n = snprintf(line, sizeof(line), "QFTFS %u %u\n", QFT_VERSION,
			     port);
	r = qft_write_all(out_fd, line, (size_t)n);
	if (r < 0) {
		qft_err("cannot report the port: %s", strerror(-r));
		goto out_close;
	}
	r = session_wait(ss, lfd, secret);
	/* Resuming needs a listener: TCP, or, for the tunnel, the attach
	 * socket (docs/protocol.md). */
	if (r == 0 && ss->resume && (ss->tunnel ? ss->afd >= 0 : lfd >= 0) &&
	    qft_auth_resume_key(secret, ss->resume_key) == 0)
		/* K_r now, while S is here; S is wiped as before. */
		ss->have_resume_key = true;
	else if (r == 0)
		ss->resume = NULL;
	if (r == 0 && ss->tunnel && ss->resume)
		tunnel_resumable(ss);
	if (r == 0 && !ss->tunnel && lfd >= 0) {
		/* Step 5: the meta connection may follow. */
		ss->lfd = lfd;
		memcpy(ss->secret, secret, sizeof(secret));
		ss->have_secret = true;
		lfd = -1;
	}
out_close:
	/* Once the client is in, nobody else may even try. */
	if (lfd >= 0)
		close(lfd);
	if ((r < 0 || !ss->resume) && ss->afd >= 0) {
		close(ss->afd);
		ss->afd = -1;
	}
	OPENSSL_cleanse(secret, sizeof(secret));
	return r;
}

/*
 * Closes the listener and wipes the secret: no more connections under S.
 * A resumable session keeps the listener for connections under K_r
 * (resume.h).
 */
static void accept_end(struct srv_session *ss)
{
	int lfd;

	pthread_mutex_lock(&ss->lock);
	lfd = ss->lfd;
	ss->lfd = -1;
	if (ss->accept_stop && lfd >= 0) {
		close(lfd);
		lfd = -1;
	}
	pthread_mutex_unlock(&ss->lock);
	if (ss->resume && ss->have_resume_key) {
		ss->hooks->listen(ss->resume, lfd, ss->afd, ss->resume_key,
				  ss->cipher);
	} else {
		if (lfd >= 0)
			close(lfd);
		if (ss->afd >= 0)
			close(ss->afd);
	}
	ss->afd = -1;
	OPENSSL_cleanse(ss->resume_key, sizeof(ss->resume_key));
	ss->have_resume_key = false;
	OPENSSL_cleanse(ss->secret, sizeof(ss->secret));
	ss->have_secret = false;
}

/*
 * One authenticated meta connection from the listener, with the
 * session's cipher, or -errno: -ETIMEDOUT at the deadline, -ECANCELED
 * when the session stops accepting.  Failed handshakes end nothing, as
 * in session_wait.
 */
static int accept_one(struct srv_session *ss, int lfd, int64_t deadline,
		      int *out, enum qft_cipher *cipher,
		      struct qft_session_keys *keys)
{
	struct hs_slot *winner = NULL;
	struct waiter w;
	int r;

	r = waiter_init(&w, ss->secret, "meta connection");
	if (r < 0)
		return r;
	while (!winner) {
		struct pollfd p[2];
		int64_t left = deadline - now_ms();
		bool stop;

		pthread_mutex_lock(&ss->lock);
		stop = ss->accept_stop;
		pthread_mutex_unlock(&ss->lock);
		if (stop) {
			r = -ECANCELED;
			break;
		}
		if (left <= 0) {
			r = -ETIMEDOUT;
			break;
		}
		p[0].fd = w.notify[0];
		p[0].events = POLLIN;
		/* With every slot busy no connection is taken, but the
		 * listener's POLLHUP (stop) still wakes us. */
		p[1].fd = lfd;
		p[1].events = srv_gate_room(&w.gate) ? POLLIN : 0;
		if (poll(p, 2, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (p[0].revents && (winner = hs_reap(&w, ss->cipher)))
			break;
		if (p[1].revents & (POLLERR | POLLHUP)) {
			r = -ECANCELED;         /* shut down by stop */
			break;
		}
		if (p[1].revents & POLLIN)
			hs_start(&w, lfd);
	}
	if (winner) {
		*out = winner->fd;
		winner->fd = -1;
		*cipher = winner->cipher;
		*keys = winner->keys;
		qft_session_keys_wipe(&winner->keys);
		r = 0;
	}
	waiter_free(&w);
	return r;
}

int srv_session_accept_meta(struct srv_session *ss, int *fd,
			    struct qft_seal *tx, struct qft_seal *rx)
{
	struct qft_session_keys keys;
	enum qft_cipher cipher;
	int lfd, r;

	pthread_mutex_lock(&ss->lock);
	lfd = ss->lfd;
	pthread_mutex_unlock(&ss->lock);
	if (lfd < 0 || !ss->have_secret) {
		accept_end(ss);
		return -ECANCELED;
	}
	r = accept_one(ss, lfd, now_ms() + CLIENT_TIMEOUT_MS, fd, &cipher,
		       &keys);
	accept_end(ss);
	if (r < 0) {
		if (r == -ETIMEDOUT)
			qft_debug("no meta connection: serving one");
		return r;
	}
	srv_session_tune_tcp(ss, *fd, "meta connection");
	r = qft_seal_init(tx, cipher, keys.s2c, true);
	if (r == 0) {
		r = qft_seal_init(rx, cipher, keys.c2s, false);
		if (r < 0)
			qft_seal_free(tx);
	}
	qft_session_keys_wipe(&keys);
	if (r < 0) {
		qft_err("cannot key the meta connection: %s", strerror(-r));
		close(*fd);
		return r;
	}
	/* The watcher shuts it down with the rest once the channel ends. */
	pthread_mutex_lock(&ss->lock);
	if (ss->channel_closed)
		shutdown(*fd, SHUT_RDWR);
	ss->meta_fd = *fd;
	pthread_mutex_unlock(&ss->lock);
	qft_debug("meta connection authenticated (%s)",
		  qft_cipher_name(cipher));
	return 0;
}

void srv_session_cut_meta(struct srv_session *ss)
{
	srv_session_stop_accept(ss);
	pthread_mutex_lock(&ss->lock);
	if (ss->meta_fd >= 0)
		shutdown(ss->meta_fd, SHUT_RDWR);
	pthread_mutex_unlock(&ss->lock);
}

void srv_session_forget_meta(struct srv_session *ss)
{
	pthread_mutex_lock(&ss->lock);
	ss->meta_fd = -1;
	pthread_mutex_unlock(&ss->lock);
}

void srv_session_stop_accept(struct srv_session *ss)
{
	pthread_mutex_lock(&ss->lock);
	ss->accept_stop = true;
	/* Wakes the poll on it (POLLHUP). */
	if (ss->lfd >= 0)
		shutdown(ss->lfd, SHUT_RDWR);
	pthread_mutex_unlock(&ss->lock);
}

static void *watch_main(void *arg)
{
	struct srv_session *ss = arg;
	char buf[256];

	/* Cancellation (at exit) only inside read(2), never in a log call
	 * holding stdio's lock. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		ssize_t n;

		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		n = read(ss->in_fd, buf, sizeof(buf));
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* Nothing is expected here over TCP; ignore it. */
	}
	if (ss->resume && ss->hooks->active(ss->resume)) {
		/* The data connections carry the session now; the client
		 * may come back without ssh (docs/protocol.md). */
		qft_info("the ssh channel closed; the session stays, "
			 "resumable");
		return NULL;
	}
	qft_debug("the ssh channel closed: the client is gone");
	/* The request loops wake with end of stream and the server exits. */
	pthread_mutex_lock(&ss->lock);
	ss->channel_closed = true;
	if (ss->meta_fd >= 0)
		shutdown(ss->meta_fd, SHUT_RDWR);
	pthread_mutex_unlock(&ss->lock);
	srv_session_stop_accept(ss);
	shutdown(ss->data_fd, SHUT_RDWR);
	return NULL;
}

int srv_session_attach(struct srv_session *ss, struct qft_chan *chan)
{
	int r;

	qft_chan_set_seal(chan, &ss->tx, &ss->rx);
	if (ss->tunnel)
		return 0;
	r = -qft_thread_start(&ss->watcher, watch_main, ss);
	if (r) {
		qft_err("cannot watch the ssh channel: %s", strerror(r));
		return -r;
	}
	ss->watching = true;
	return 0;
}

bool srv_session_channel_closed(struct srv_session *ss)
{
	bool closed;

	pthread_mutex_lock(&ss->lock);
	closed = ss->channel_closed;
	pthread_mutex_unlock(&ss->lock);
	return closed;
}

void srv_session_free(struct srv_session *ss)
{
	if (ss->watching) {
		/* Blocked in read(2), a cancellation point. */
		pthread_cancel(ss->watcher);
		pthread_join(ss->watcher, NULL);
		ss->watching = false;
	}
	accept_end(ss);
	srv_attach_relay_stop(ss->relay);
	ss->relay = NULL;
	qft_seal_free(&ss->tx);
	qft_seal_free(&ss->rx);
	pthread_mutex_destroy(&ss->lock);
}
