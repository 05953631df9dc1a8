// SPDX-License-Identifier: MIT
/* Spawning the server on a socketpair (see transport.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "log.h"
#include "thread.h"
#include "login/exec.h"
#include "net/transport.h"

#define SERVER_NAME "qftfs-server"

static void free_argv(char **argv)
{
	if (!argv)
		return;
	for (char **a = argv; *a; a++)
		free(*a);
	free(argv);
}

/*
 * Splits `cmd` on blanks into a NULL-terminated argv with room for the
 * `extra` arguments the caller appends.  No quoting: the option is a
 * program and its flags, never a shell line.
 */
static int split_cmd(const char *cmd, int extra, char ***out, int *argc)
{
	size_t len = strlen(cmd);
	char **argv;
	int n = 0;

	/* At most one word per two bytes, plus the extras and the NULL. */
	argv = calloc(len / 2 + 1 + (size_t)extra + 1, sizeof(*argv));
	if (!argv)
		return -ENOMEM;
	for (const char *p = cmd; *p;) {
		size_t w;

		p += strspn(p, " \t");
		w = strcspn(p, " \t");
		if (w == 0)
			break;
		argv[n] = strndup(p, w);
		if (!argv[n]) {
			free_argv(argv);
			return -ENOMEM;
		}
		n++;
		p += w;
	}
	if (n == 0) {
		free(argv);
		return -EINVAL;
	}
	*out = argv;
	*argc = n;
	return 0;
}

/*
 * The server installed beside this binary wins over whatever PATH finds,
 * so that a qftfs run from its install directory talks to the server of the
 * same version; "../server/" is the same rule for an uninstalled build tree
 * (build/fuse/qftfs, build/server/qftfs-server).
 */
static char *default_server(void)
{
	static const char *const rel[] = { "", "../server/" };
	char self[PATH_MAX], *slash, *path;
	ssize_t n;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			slash[1] = '\0';
			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				if (asprintf(&path, "%s%s%s", self, rel[i],
					     SERVER_NAME) < 0)
					return NULL;
				if (access(path, X_OK) == 0) {
					/* Tidy for messages and ps. */
					char *real = realpath(path, NULL);

					if (real) {
						free(path);
						path = real;
					}
					return path;
				}
				free(path);
			}
		}
	}
	return strdup(SERVER_NAME);
}

/* Runs in the child between fork and exec: async-signal-safe calls only,
 * apart from the error message on the way out. */
static void __attribute__((noreturn)) exec_server(int sock, int meta,
						  int errfd, char **argv)
{
	/* An ignored SIGPIPE would survive exec; the server expects default
	 * dispositions (and qc_exec an empty signal mask). */
	signal(SIGPIPE, SIG_DFL);
	/*
	 * The server's life is tied to the connection, not to a terminal: a
	 * ^C or hangup must reach the client alone, which then unmounts and
	 * ends the connection, and the server exits on that end of stream
	 * after answering everything it was sent.
	 */
	setsid();
	/* Like any daemon, keep no directory busy (argv[0] is absolute). */
	if (chdir("/") < 0)
		_exit(127);
	/* The kernel has already applied the caller's umask to every mode
	 * the server is asked to create with. */
	umask(0);

	/* Move the descriptors clear of 0-3 before placing them there. */
	if (sock <= QC_META_FD)
		sock = fcntl(sock, F_DUPFD, QC_META_FD + 1);
	if (meta <= QC_META_FD)
		meta = fcntl(meta, F_DUPFD, QC_META_FD + 1);
	if (errfd >= 0 && errfd <= QC_META_FD)
		errfd = fcntl(errfd, F_DUPFD, QC_META_FD + 1);
	if (sock < 0 || meta < 0 || dup2(sock, STDIN_FILENO) < 0 ||
	    dup2(sock, STDOUT_FILENO) < 0 || dup2(meta, QC_META_FD) < 0)
		_exit(127);
	if (errfd >= 0 && dup2(errfd, STDERR_FILENO) < 0)
		_exit(127);
	qc_exec(argv, QC_META_FD + 1, "qftfs: cannot run server '",
		"': ", "; set -o server=PATH\n");
}

/* A program named by path is made absolute, as the child leaves the
 * current directory; a bare name is looked up in PATH by execvp. */
static int absolute_program(char **argv0)
{
	char *real;

	if (!strchr(*argv0, '/'))
		return 0;
	real = realpath(*argv0, NULL);
	if (!real)
		return errno == ENOMEM ? -ENOMEM : 0; /* exec reports it */
	free(*argv0);
	*argv0 = real;
	return 0;
}

int qc_transport_spawn(struct qc_transport *t, const char *server_cmd,
		       const char *root, bool follow, bool capture_stderr)
{
	char **argv = NULL, *def = NULL;
	int sv[2], mv[2], ep[2] = { -1, -1 }, argc, r;
	pid_t pid;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	t->meta_fd = -1;
	t->errfd = -1;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	if (!server_cmd) {
		def = default_server();
		if (!def)
			return -ENOMEM;
		server_cmd = def;
	}
	r = split_cmd(server_cmd, 6, &argv, &argc);
	free(def);
	if (r < 0)
		return r;
	/* argv stays NULL-terminated after each step, for free_argv. */
	if (!(argv[argc++] = strdup("--stdio")) ||
	    !(argv[argc++] = strdup("--root")) ||
	    !(argv[argc++] = strdup(root)) ||
	    !(argv[argc++] = strdup("--meta-fd")) ||
	    !(argv[argc++] = strdup(QC_META_FD_STR)) ||
	    (follow && !(argv[argc++] = strdup("--follow-symlinks")))) {
		r = -ENOMEM;
		goto out_free_argv;
	}
	t->argv0 = strdup(argv[0]);
	if (!t->argv0 || (r = absolute_program(&argv[0])) < 0) {
		r = -ENOMEM;
		goto out_free_argv;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		goto out_free_argv;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, mv) < 0) {
		r = -errno;
		goto out_close_sv;
	}
	if (capture_stderr && pipe2(ep, O_CLOEXEC) < 0) {
		r = -errno;
		goto out_close_mv;
	}

	pid = fork();
	if (pid < 0) {
		r = -errno;
		goto out_close_ep;
	}
	if (pid == 0)
		exec_server(sv[1], mv[1], ep[1], argv);

	close(sv[1]);
	close(mv[1]);
	if (ep[1] >= 0)
		close(ep[1]);
	free_argv(argv);
	t->fd = sv[0];
	t->meta_fd = mv[0];
	t->errfd = ep[0];
	t->pid = pid;
	t->parent = getpid();
	return 0;

out_close_ep:
	if (ep[0] >= 0) {
		close(ep[0]);
		close(ep[1]);
	}
out_close_mv:
	close(mv[0]);
	close(mv[1]);
out_close_sv:
	close(sv[0]);
	close(sv[1]);
out_free_argv:
	free(t->argv0);
	t->argv0 = NULL;
	free_argv(argv);
	return r;
}

void qc_transport_copy_stderr(struct qc_transport *t, int timeout_ms)
{
	char buf[4096];

	if (t->errfd < 0)
		return;
	for (;;) {
		struct pollfd pfd = { .fd = t->errfd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, timeout_ms) <= 0)
			return;
		n = read(t->errfd, buf, sizeof(buf));
		if (n <= 0)
			return;
		(void)!write(STDERR_FILENO, buf, (size_t)n);
	}
}

static void relay_line(char *line, size_t len)
{
	if (len && line[len - 1] == '\r')
		len--;
	line[len] = '\0';
	if (len)
		qft_log(QFT_LOG_WARN, "%s", line);
}

/*
 * Reads the server's stderr until its end.  Cancellation is allowed only
 * inside read(), so a stop that cannot wait never cuts a log call short.
 */
static void *relay_main(void *arg)
{
	struct qc_transport *t = arg;
	char buf[4096];
	size_t have = 0;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		ssize_t n;
		char *nl;

		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		n = read(t->errfd, buf + have, sizeof(buf) - 1 - have);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		while ((nl = memchr(buf, '\n', have))) {
			size_t len = (size_t)(nl - buf);

			relay_line(buf, len);
			memmove(buf, nl + 1, have - len - 1);
			have -= len + 1;
		}
		if (have == sizeof(buf) - 1) {
			relay_line(buf, have);
			have = 0;
		}
	}
	if (have)
		relay_line(buf, have);
	pthread_mutex_lock(&t->lock);
	t->relay_done = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int qc_transport_relay_start(struct qc_transport *t)
{
	int r;

	if (t->errfd < 0)
		return 0;
	r = -qft_thread_start(&t->relay, relay_main, t);
	if (r)
		return -r;
	t->relay_running = true;
	return 0;
}

static void relay_stop(struct qc_transport *t, int timeout_ms)
{
	struct timespec deadline;
	bool done;

	if (!t->relay_running)
		return;
	qft_deadline_in(&deadline, timeout_ms);
	pthread_mutex_lock(&t->lock);
	while (!t->relay_done &&
	       pthread_cond_timedwait(&t->cond, &t->lock, &deadline) == 0)
		;
	done = t->relay_done;
	pthread_mutex_unlock(&t->lock);
	/* The pipe stays open while anything the server started lives. */
	if (!done)
		pthread_cancel(t->relay);
	pthread_join(t->relay, NULL);
	t->relay_running = false;
}

static int wait_for(pid_t pid, int timeout_ms, int *status)
{
	const struct timespec tick = { 0, 10 * 1000 * 1000 };

	for (int waited = 0;; waited += 10) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		nanosleep(&tick, NULL);
	}
}

/*
 * Waits up to timeout_ms for the server to exit, then ends it: with
 * `gentle`, SIGTERM and two more seconds before SIGKILL (an orderly
 * unmount); otherwise SIGKILL at once (a server that stopped answering).
 */
static int stop_server(struct qc_transport *t, int timeout_ms, int *status,
		       bool gentle)
{
	int st = 0, r;

	if (t->pid <= 0)
		return -ECHILD;
	/*
	 * After fuse_daemonize() we are the forked child: the server belongs
	 * to the exited parent and init reaps it.  Its pid may even be reused
	 * by then, so it must not be signalled from here.
	 */
	if (getpid() != t->parent) {
		t->pid = 0;
		return -ECHILD;
	}
	r = wait_for(t->pid, timeout_ms, &st);
	if (r == -ETIMEDOUT && gentle) {
		qft_warn("server (pid %d) did not exit; terminating it",
			 (int)t->pid);
		kill(t->pid, SIGTERM);
		r = wait_for(t->pid, 2000, &st);
	}
	if (r == -ETIMEDOUT) {
		qft_debug("server (pid %d) did not exit; killing it",
			  (int)t->pid);
		kill(t->pid, SIGKILL);
		do {
			r = waitpid(t->pid, &st, 0) == t->pid ? 0 : -errno;
		} while (r == -EINTR);
	}
	t->pid = 0;
	if (r == 0 && status)
		*status = st;
	return r;
}

int qc_transport_reap(struct qc_transport *t, int timeout_ms, int *status)
{
	return stop_server(t, timeout_ms, status, true);
}

int qc_transport_kill(struct qc_transport *t, int timeout_ms, int *status)
{
	return stop_server(t, timeout_ms, status, false);
}

void qc_transport_free(struct qc_transport *t, int timeout_ms)
{
	relay_stop(t, timeout_ms);
	if (t->errfd >= 0) {
		close(t->errfd);
		t->errfd = -1;
	}
	free(t->argv0);
	t->argv0 = NULL;
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
}

const char *qc_transport_status_str(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, size, "status 0x%x", (unsigned)status);
	return buf;
}
