// SPDX-License-Identifier: MIT
/* The channel pump: the thread that carries the command's stdin, stdout
 * and stderr once it runs (see ssh.h, ssh_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "log.h"
#include "thread.h"
#include "login/serverlog.h"
#include "login/ssh_internal.h"

static void pump_emit(struct qc_ssh *s)
{
	qc_serverlog_line(s->alias, s->line, s->line_len);
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
			qc_ssh_errmsg(s));
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
	int64_t now = qc_ssh_now_ms();
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
