// SPDX-License-Identifier: MIT
/*
 * The OpenSSH client as the ssh side of a remote mount (see sshproc.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "log.h"
#include "login/serverlog.h"
#include "login/sshproc.h"
#include "thread.h"
#include "login/exec.h"

/* What the remote shell prints once logged in, before the command. */
#define MARKER        "qftfs-ssh-login-ok"
#define LOGIN_TIMEOUT_S 60
#define NOISE_MAX     (64 * 1024)  /* login-script output before it */
#define ERR_MAX       2048         /* ssh's stderr kept for messages */
#define LINE_MAX_LEN  512

struct qc_sshproc {
	pid_t pid;
	pid_t parent;            /* only it can wait for pid */
	int fd;                  /* our end of stdin/stdout until handed out */
	int errfd;               /* ssh's stderr */
	int wake[2];             /* a byte asks the reader to look at stop */
	char *label;
	pthread_t reader;
	bool running;            /* owner thread only */

	pthread_mutex_t lock;
	pthread_cond_t cond;     /* lock: err_eof set */
	bool stop;               /* lock */
	bool err_eof;            /* lock: ssh closed its stderr (it ended) */
	char head[ERR_MAX];      /* lock: the command's first stderr bytes */
	size_t head_len;         /* lock */
	char line[LINE_MAX_LEN]; /* reader: a partial line */
	size_t line_len;
};

int qc_sshproc_arg(struct qc_sshproc_args *a, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	if (a->argc + 2 > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 32;
		char **nv = realloc(a->argv, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->argv = nv;
		a->cap = cap;
	}
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	a->argv[a->argc++] = s;
	a->argv[a->argc] = NULL;
	return 0;
}

void qc_sshproc_args_free(struct qc_sshproc_args *a)
{
	for (size_t i = 0; i < a->argc; i++)
		free(a->argv[i]);
	free(a->argv);
	memset(a, 0, sizeof(*a));
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In the child, between fork and exec: async-signal-safe calls only,
 * apart from the message on the way out. */
static void __attribute__((noreturn)) exec_ssh(int sock, int err,
					       char **argv, bool detach)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Without a terminal to prompt on (a reconnect), away from the
	 * terminal's signals too; with one, ssh may ask for a password. */
	if (detach)
		setsid();
	if (sock <= STDERR_FILENO)
		sock = fcntl(sock, F_DUPFD, STDERR_FILENO + 1);
	if (err <= STDERR_FILENO)
		err = fcntl(err, F_DUPFD, STDERR_FILENO + 1);
	if (sock < 0 || err < 0 || dup2(sock, STDIN_FILENO) < 0 ||
	    dup2(sock, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
		_exit(127);
	qc_exec(argv, STDERR_FILENO + 1, "qftfs-exec-failed: ", ": ",
		"\n");
}

/* Appends what ssh said on stderr during login. */
static void keep(char *buf, size_t *len, const char *p, size_t n)
{
	size_t k = ERR_MAX - 1 - *len;

	k = k < n ? k : n;
	memcpy(buf + *len, p, k);
	*len += k;
	buf[*len] = '\0';
}

/* Waits up to `ms` for the child; its status, or -ETIMEDOUT. */
static int wait_child(pid_t pid, int ms, int *status)
{
	int64_t until = now_ms() + ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (now_ms() >= until)
			return -ETIMEDOUT;
		usleep(10000);
	}
}

static void end_child(pid_t pid, int *status)
{
	int st = 0;

	if (wait_child(pid, 2000, &st) == -ETIMEDOUT) {
		kill(pid, SIGTERM);
		if (wait_child(pid, 2000, &st) == -ETIMEDOUT) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
		}
	}
	if (status)
		*status = st;
}

/* Why the login failed, from what ssh said, with what to change. */
static int explain(const char *label, const char *err, int status,
		   const char *prog)
{
	const char *nl;

	if (strstr(err, "qftfs-exec-failed:")) {
		qft_err("cannot run the OpenSSH client '%s' (%s): install "
			"openssh-client, or name another with "
			"-o ssh_command=CMD", prog,
			strchr(strchr(err, ':') + 1, ':') ?
			strchr(strchr(err, ':') + 1, ':') + 2 : "not found");
		return -ENOENT;
	}
	/* ssh's own words first, one line each. */
	for (const char *p = err; *p; p = nl ? nl + 1 : p + strlen(p)) {
		nl = strchr(p, '\n');
		if ((nl ? (size_t)(nl - p) : strlen(p)) > 0)
			qft_err("ssh %s: %.*s", label,
				(int)(nl ? nl - p : (long)strlen(p)), p);
		if (!nl)
			break;
	}
	if (strstr(err, "Permission denied")) {
		qft_err("cannot log in to %s with the OpenSSH client: give the "
			"key with -o IdentityFile=FILE (or add it to ssh-agent), "
			"check the user, and try `ssh %s` by hand", label,
			label);
		return -EACCES;
	}
	if (strstr(err, "Host key verification failed") ||
	    strstr(err, "HOST IDENTIFICATION HAS CHANGED")) {
		qft_err("the host key of %s is unknown or has changed: check it "
			"with `ssh %s`, or accept a new host with -o "
			"StrictHostKeyChecking=accept-new", label, label);
		return -EACCES;
	}
	if (strstr(err, "Could not resolve") ||
	    strstr(err, "Connection refused") ||
	    strstr(err, "timed out") || strstr(err, "No route")) {
		qft_err("cannot reach %s (see ssh's message above; a "
			"ProxyJump host may be down)", label);
		return -EHOSTUNREACH;
	}
	if (WIFEXITED(status))
		qft_err("the OpenSSH client could not log in to %s (exit "
			"status %d)", label, WEXITSTATUS(status));
	else
		qft_err("the OpenSSH client could not log in to %s", label);
	return -EACCES;
}

/*
 * Reads stdout up to the marker line (login scripts may print before
 * it), keeping stderr meanwhile.  0 at the marker, -EPIPE at end of file,
 * -ETIMEDOUT.
 */
static int await_marker(struct qc_sshproc *p, int timeout_s, char *err,
			size_t *err_len)
{
	int64_t until = now_ms() + (int64_t)timeout_s * 1000;
	char line[256];
	size_t len = 0, seen = 0;
	bool err_open = true;

	for (;;) {
		struct pollfd pf[2] = {
			{ .fd = p->fd, .events = POLLIN },
			{ .fd = err_open ? p->errfd : -1, .events = POLLIN },
		};
		int64_t left = until - now_ms();
		char buf[512];
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(pf, 2, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pf[1].revents) {
			n = read(p->errfd, buf, sizeof(buf));
			if (n > 0)
				keep(err, err_len, buf, (size_t)n);
			else
				err_open = false;
		}
		if (!pf[0].revents)
			continue;
		/* One byte at a time: what follows the marker is the
		 * command's, and must stay in the socket. */
		n = read(p->fd, buf, 1);
		if (n <= 0)
			return -EPIPE;
		if (++seen > NOISE_MAX)
			return -EPROTO;
		if (buf[0] != '\n') {
			if (len < sizeof(line) - 1)
				line[len++] = buf[0];
			continue;
		}
		line[len] = '\0';
		if (len && line[len - 1] == '\r')
			line[len - 1] = '\0';
		if (strcmp(line, MARKER) == 0)
			return 0;
		len = 0;
	}
}

int qc_sshproc_start(struct qc_sshproc **out, struct qc_sshproc_args *args,
		     const char *dest, const char *command, const char *label,
		     int timeout_s)
{
	struct qc_sshproc *p;
	char err[ERR_MAX] = "";
	size_t err_len = 0;
	int sv[2], ep[2], r, status = 0;
	bool detach = !isatty(STDIN_FILENO);

	p = calloc(1, sizeof(*p));
	if (!p) {
		qc_sshproc_args_free(args);
		return -ENOMEM;
	}
	p->fd = p->errfd = -1;
	p->wake[0] = p->wake[1] = -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->label = strdup(label);
	if (!p->label ||
	    (r = qc_sshproc_arg(args, "--")) < 0 ||
	    (r = qc_sshproc_arg(args, "%s", dest)) < 0 ||
	    (r = qc_sshproc_arg(args, "echo %s; %s", MARKER,
				command)) < 0) {
		r = -ENOMEM;
		goto out_free;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		goto out_free;
	}
	if (pipe2(ep, O_CLOEXEC) < 0) {
		r = -errno;
		close(sv[0]);
		close(sv[1]);
		goto out_free;
	}
	if (qft_log_level() >= QFT_LOG_DEBUG) {
		char cmd[2048] = "";
		size_t n = 0;

		for (size_t i = 0; i < args->argc && n < sizeof(cmd); i++)
			n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "%s%s",
					      i ? " " : "", args->argv[i]);
		qft_debug("logging in with the OpenSSH client: %s", cmd);
	}
	p->pid = fork();
	if (p->pid < 0) {
		r = -errno;
		close(sv[0]);
		close(sv[1]);
		close(ep[0]);
		close(ep[1]);
		goto out_free;
	}
	if (p->pid == 0)
		exec_ssh(sv[1], ep[1], args->argv, detach);
	close(sv[1]);
	close(ep[1]);
	p->parent = getpid();
	p->fd = sv[0];
	p->errfd = ep[0];

	r = await_marker(p, timeout_s > 0 ? timeout_s : LOGIN_TIMEOUT_S, err,
			 &err_len);
	if (r == 0) {
		/* What ssh said while logging in (warnings, banners). */
		for (char *l = strtok(err, "\n"); l; l = strtok(NULL, "\n"))
			qft_debug("ssh %s: %s", label, l);
		qc_sshproc_args_free(args);
		*out = p;
		return 0;
	}
	if (r == -ETIMEDOUT) {
		qft_err("no login to %s within %d s with the OpenSSH client "
			"(does it wait for a password without a terminal?)",
			label, timeout_s > 0 ? timeout_s : LOGIN_TIMEOUT_S);
		kill(p->pid, SIGTERM);
		end_child(p->pid, NULL);
		p->pid = 0;
		goto out_free;
	}
	if (r == -EPROTO) {
		qft_err("%s printed more than %d bytes on login without running "
			"the command (does a login script print to stdout?)",
			label, NOISE_MAX);
		kill(p->pid, SIGTERM);
		end_child(p->pid, NULL);
		p->pid = 0;
		goto out_free;
	}
	/* ssh ended: everything it said is in the pipe. */
	for (;;) {
		char buf[512];
		ssize_t n = read(p->errfd, buf, sizeof(buf));

		if (n <= 0)
			break;
		keep(err, &err_len, buf, (size_t)n);
	}
	end_child(p->pid, &status);
	p->pid = 0;
	r = explain(label, err, status, args->argv[0]);
out_free:
	qc_sshproc_args_free(args);
	qc_sshproc_free(p);
	return r;
}

static void emit(struct qc_sshproc *p)
{
	qc_serverlog_line(p->label, p->line, p->line_len);
	p->line_len = 0;
}

static void *reader_main(void *arg)
{
	struct qc_sshproc *p = arg;

	for (;;) {
		struct pollfd pf[2] = {
			{ .fd = p->errfd, .events = POLLIN },
			{ .fd = p->wake[0], .events = POLLIN },
		};
		char buf[512];
		ssize_t n;
		bool stop;

		pthread_mutex_lock(&p->lock);
		stop = p->stop;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			return NULL;
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents) {
			(void)!read(p->wake[0], buf, sizeof(buf));
			continue;
		}
		if (!pf[0].revents)
			continue;
		n = read(p->errfd, buf, sizeof(buf));
		if (n <= 0)
			break;
		pthread_mutex_lock(&p->lock);
		if (p->head_len < ERR_MAX - 1) {
			size_t k = ERR_MAX - 1 - p->head_len;

			k = k < (size_t)n ? k : (size_t)n;
			memcpy(p->head + p->head_len, buf, k);
			p->head_len += k;
		}
		pthread_mutex_unlock(&p->lock);
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				emit(p);
				continue;
			}
			p->line[p->line_len++] = buf[i];
			if (p->line_len == LINE_MAX_LEN - 1)
				emit(p);
		}
	}
	if (p->line_len)
		emit(p);
	pthread_mutex_lock(&p->lock);
	p->err_eof = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int qc_sshproc_pump_start(struct qc_sshproc *p, int *fd)
{
	int r;

	if (p->running)
		return 0;
	if (p->fd >= 0) {
		if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0)
			return -errno;
		*fd = p->fd;
		p->fd = -1;
	}
	pthread_mutex_lock(&p->lock);
	if (p->err_eof) {
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	p->stop = false;
	pthread_mutex_unlock(&p->lock);
	r = qft_thread_start(&p->reader, reader_main, p);
	if (r)
		return -r;
	p->running = true;
	return 0;
}

void qc_sshproc_pump_pause(struct qc_sshproc *p)
{
	if (!p->running)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_mutex_unlock(&p->lock);
	(void)!write(p->wake[1], "p", 1);
	pthread_join(p->reader, NULL);
	p->running = false;
}

int qc_sshproc_wait(struct qc_sshproc *p, int timeout_ms,
		    struct qc_ssh_exit *exit)
{
	int status = 0, r;

	memset(exit, 0, sizeof(*exit));
	/* After fuse_daemonize() ssh belongs to the exited parent: its end
	 * shows only as the end of its stderr. */
	if (p->pid > 0 && getpid() == p->parent) {
		r = wait_child(p->pid, timeout_ms, &status);
		if (r < 0)
			return r;
		p->pid = 0;
		exit->known = true;
		if (WIFSIGNALED(status))
			snprintf(exit->signal, sizeof(exit->signal), "%s",
				 sigabbrev_np(WTERMSIG(status)) ?
				 sigabbrev_np(WTERMSIG(status)) : "?");
		else
			exit->status = WEXITSTATUS(status);
		return 0;
	}
	if (p->running) {
		struct timespec deadline;

		qft_deadline_in(&deadline, timeout_ms);
		pthread_mutex_lock(&p->lock);
		r = 0;
		while (!p->err_eof && r == 0)
			r = pthread_cond_timedwait(&p->cond, &p->lock,
						   &deadline);
		r = p->err_eof ? 0 : -ETIMEDOUT;
		pthread_mutex_unlock(&p->lock);
		return r;
	}
	return 0;
}

void qc_sshproc_stderr_head(struct qc_sshproc *p, char *buf, size_t size)
{
	size_t n;

	if (!size)
		return;
	pthread_mutex_lock(&p->lock);
	n = p->head_len < size - 1 ? p->head_len : size - 1;
	memcpy(buf, p->head, n);
	pthread_mutex_unlock(&p->lock);
	buf[n] = '\0';
}

void qc_sshproc_free(struct qc_sshproc *p)
{
	if (!p)
		return;
	qc_sshproc_pump_pause(p);
	if (p->fd >= 0)
		close(p->fd);
	/* Our end closed (by us or the caller), ssh sends EOF on, the
	 * command ends, ssh exits; only its parent can reap it. */
	if (p->pid > 0 && getpid() == p->parent)
		end_child(p->pid, NULL);
	if (p->errfd >= 0)
		close(p->errfd);
	if (p->wake[0] >= 0) {
		close(p->wake[0]);
		close(p->wake[1]);
	}
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->label);
	free(p);
}
