// SPDX-License-Identifier: MIT
/* Attaching to a running session over a new ssh login (see attach.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <openssl/rand.h>

#include "attach.h"
#include "chan.h"
#include "log.h"
#include "thread.h"

#define NAME_PREFIX     "qftfs-attach-"
#define LISTEN_BACKLOG  8
/* Per direction: what one read takes from the channel or the socket. */
#define RELAY_BUF       (256u * 1024u)
/* Once the session's side has ended, what it said last still goes to
 * the channel, but not for longer than this. */
#define RELAY_DRAIN_MS  2000

bool srv_attach_wanted(void)
{
	const char *v = getenv(SRV_ATTACH_ENV);

	return v && strcmp(v, "1") == 0;
}

static bool id_ok(const char *id)
{
	size_t n = 0;

	for (; id[n]; n++)
		if (!((id[n] >= '0' && id[n] <= '9') ||
		      (id[n] >= 'a' && id[n] <= 'f')))
			return false;
	return n == QFT_ATTACH_ID_HEX;
}

/* The abstract address of session `id`; its length. */
static socklen_t attach_addr(struct sockaddr_un *sa, const char *id)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* sun_path[0] == '\0': the abstract namespace; no NUL at the end. */
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
		     NAME_PREFIX "%s", id);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

int srv_attach_listen(int *fd, char id[QFT_ATTACH_ID_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t rnd[QFT_ATTACH_ID_HEX / 2];
	struct sockaddr_un sa;
	socklen_t len;
	int s, r = -EADDRINUSE;

	*fd = -1;
	/* A collision of 128 random bits is someone squatting: try again. */
	for (int tries = 0; tries < 3 && r == -EADDRINUSE; tries++) {
		if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
			qft_warn("cannot make a session id; the session cannot "
				 "be attached to over ssh");
			return -EIO;
		}
		for (size_t i = 0; i < sizeof(rnd); i++) {
			id[2 * i] = hex[rnd[i] >> 4];
			id[2 * i + 1] = hex[rnd[i] & 15];
		}
		id[QFT_ATTACH_ID_HEX] = '\0';
		s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			   0);
		if (s < 0) {
			r = -errno;
			break;
		}
		len = attach_addr(&sa, id);
		if (bind(s, (struct sockaddr *)&sa, len) == 0 &&
		    listen(s, LISTEN_BACKLOG) == 0) {
			*fd = s;
			qft_debug("attach socket @" NAME_PREFIX "%s", id);
			return 0;
		}
		r = -errno;
		close(s);
	}
	qft_warn("cannot listen on the attach socket: %s; the session cannot "
		 "be attached to over ssh", strerror(-r));
	return r;
}

bool srv_attach_peer_ok(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		qft_warn("refused an attach: cannot tell who it is: %s",
			 strerror(errno));
		return false;
	}
	if (cr.uid != geteuid()) {
		qft_warn("refused an attach from uid %u (pid %d): not the "
			 "session's user", (unsigned)cr.uid, (int)cr.pid);
		return false;
	}
	return true;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static bool again(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/*
 * Relays between the channel (in_fd, out_fd; non-blocking) and `sock`
 * (non-blocking) until the socket's peer ends, the channel's reader is
 * gone, or *stop is set (checked after each wakeup; a shutdown of `sock`
 * is the wakeup).  The channel's end of input is passed on as a
 * half-close, and what the peer still says after it is relayed.
 */
static int relay(int in_fd, int out_fd, int sock, atomic_bool *stop)
{
	uint8_t *up = malloc(RELAY_BUF), *down = malloc(RELAY_BUF);
	size_t ulen = 0, uoff = 0, dlen = 0, doff = 0;
	bool in_eof = false, sock_eof = false;
	int r = 0;

	if (!up || !down) {
		r = -ENOMEM;
		goto out_free;
	}
	for (;;) {
		bool moved = false;
		struct pollfd p[3];
		ssize_t n;
		int t;

		/* Channel to socket. */
		if (uoff < ulen) {
			n = send(sock, up + uoff, ulen - uoff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) {
				uoff += (size_t)n;
				moved = true;
			} else if (n < 0 && !again()) {
				break;          /* the session's side is gone */
			}
		}
		if (uoff == ulen && !in_eof) {
			uoff = ulen = 0;
			n = read(in_fd, up, RELAY_BUF);
			if (n > 0) {
				ulen = (size_t)n;
				moved = true;
			} else if (n == 0 || !again()) {
				in_eof = true;
				shutdown(sock, SHUT_WR);
				moved = true;
			}
		}
		/* Socket to channel. */
		if (doff < dlen) {
			n = write(out_fd, down + doff, dlen - doff);
			if (n > 0) {
				doff += (size_t)n;
				moved = true;
			} else if (n < 0 && !again()) {
				/* Nobody reads the channel any more. */
				shutdown(sock, SHUT_RDWR);
				break;
			}
		}
		if (doff == dlen && !sock_eof) {
			doff = dlen = 0;
			n = recv(sock, down, RELAY_BUF, MSG_DONTWAIT);
			if (n > 0) {
				dlen = (size_t)n;
				moved = true;
			} else if (n == 0 || !again()) {
				sock_eof = true;
			}
		}
		if (sock_eof && doff == dlen)
			break;
		if (stop && atomic_load(stop))
			break;
		if (moved)
			continue;

		p[0].fd = !in_eof && uoff == ulen ? in_fd : -1;
		p[0].events = POLLIN;
		/* Polled even for nothing, for its hang-up, until it ended
		 * (then it would report that at once, forever). */
		p[1].fd = sock_eof && uoff == ulen ? -1 : sock;
		p[1].events = (uoff < ulen ? POLLOUT : 0) |
			      (doff == dlen && !sock_eof ? POLLIN : 0);
		p[2].fd = doff < dlen ? out_fd : -1;
		p[2].events = POLLOUT;
		t = sock_eof ? RELAY_DRAIN_MS : -1;
		n = poll(p, 3, t);
		if (n < 0 && errno != EINTR) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;          /* the drain took too long */
		/* Both directions of the socket shut: the session ended it
		 * (or the relay is being stopped) while we wait on the
		 * channel; what is left goes within the drain. */
		if ((p[1].revents & (POLLHUP | POLLERR)) && doff < dlen)
			sock_eof = true;
	}
out_free:
	free(up);
	free(down);
	return r;
}

int srv_attach_main(const char *id)
{
	struct sockaddr_un sa;
	struct ucred cr;
	socklen_t len = sizeof(cr), alen;
	char line[64];
	int fd, n, r;

	if (!id_ok(id)) {
		qft_err("--attach %s: not a session id (%u hex digits); "
			"--attach is run by qftfs over ssh, not by hand", id,
			QFT_ATTACH_ID_HEX);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		qft_err("cannot make a socket: %s", strerror(errno));
		return 1;
	}
	alen = attach_addr(&sa, id);
	do {
		r = connect(fd, (struct sockaddr *)&sa, alen);
	} while (r < 0 && errno == EINTR);
	if (r < 0 && errno != ECONNREFUSED && errno != ENOENT) {
		qft_err("cannot reach session %s: %s", id, strerror(errno));
		close(fd);
		return 1;
	}
	/* The abstract name is free for anybody to take once the session
	 * is gone: one that is not our own user's is not the session. */
	if (r == 0 && (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
		       cr.uid != geteuid())) {
		qft_warn("the socket of session %s is not this user's: not "
			 "the session", id);
		r = -1;
	}
	if (r < 0) {
		close(fd);
		n = snprintf(line, sizeof(line), "QFTFS %u gone\n",
			     QFT_VERSION);
		(void)qft_write_all(STDOUT_FILENO, line, (size_t)n);
		return QFT_ATTACH_EXIT_GONE;
	}
	n = snprintf(line, sizeof(line), "QFTFS %u attached\n", QFT_VERSION);
	if (qft_write_all(STDOUT_FILENO, line, (size_t)n) < 0 ||
	    set_nonblock(STDIN_FILENO) < 0 || set_nonblock(STDOUT_FILENO) < 0 ||
	    set_nonblock(fd) < 0) {
		close(fd);
		return 1;
	}
	r = relay(STDIN_FILENO, STDOUT_FILENO, fd, NULL);
	close(fd);
	if (r < 0) {
		qft_err("relaying session %s: %s", id, strerror(-r));
		return 1;
	}
	return 0;
}

struct srv_attach_relay {
	pthread_t thread;
	int in_fd, out_fd;
	int sock;               /* the thread's end */
	atomic_bool stop;
};

static void *relay_main(void *arg)
{
	struct srv_attach_relay *r = arg;
	int e;

	pthread_setname_np(pthread_self(), "qftfs-relay");
	e = relay(r->in_fd, r->out_fd, r->sock, &r->stop);
	if (e < 0)
		qft_warn("the ssh channel's relay failed: %s", strerror(-e));
	/* The session's side reads the end of stream. */
	shutdown(r->sock, SHUT_RDWR);
	return NULL;
}

int srv_attach_relay_start(struct srv_attach_relay **out, int in_fd,
			   int out_fd, int *sock)
{
	struct srv_attach_relay *r;
	int sv[2], e;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		e = -errno;
		goto out_free;
	}
	if ((e = set_nonblock(in_fd)) < 0 || (e = set_nonblock(out_fd)) < 0 ||
	    (e = set_nonblock(sv[1])) < 0)
		goto out_close;
	r->in_fd = in_fd;
	r->out_fd = out_fd;
	r->sock = sv[1];
	atomic_init(&r->stop, false);
	e = qft_thread_start(&r->thread, relay_main, r);
	if (e < 0)
		goto out_close;
	*sock = sv[0];
	*out = r;
	return 0;
out_close:
	close(sv[0]);
	close(sv[1]);
out_free:
	free(r);
	qft_err("cannot relay the ssh channel: %s", strerror(-e));
	return e;
}

void srv_attach_relay_stop(struct srv_attach_relay *r)
{
	if (!r)
		return;
	atomic_store(&r->stop, true);
	/* Wakes its poll (POLLHUP) wherever it waits. */
	shutdown(r->sock, SHUT_RDWR);
	pthread_join(r->thread, NULL);
	close(r->sock);
	free(r);
}
