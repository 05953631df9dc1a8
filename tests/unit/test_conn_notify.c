// SPDX-License-Identifier: MIT
/*
 * The client's change notification hook (fuse/net/reader.c, link.c) against
 * a real qftfs-server: with qc_conn_opts.want_notify the HELLO asks for
 * QFT_FEAT_NOTIFY, a READDIR with QFT_READDIR_WATCH answers WATCHED, a file
 * created in the directory behind the client's back reaches the notify
 * callback as CHANGED for the directory's inode, the client's own UNLINK of
 * it does not, and when the link dies (the server is killed) the callback
 * gets ALL.  Without want_notify nothing is watched and the callback is
 * never called.
 *
 * Usage: test_conn_notify SERVER (the qftfs-server binary; meson passes
 * it).  Exits 77 when the server cannot watch here (no inotify).
 */
#include <errno.h>
#include <fcntl.h>
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

#include "check.h"
#include "fixture.h"
#include "net/conn.h"
#include "log.h"
#include "msg.h"
#include "protocol.h"
#include "thread.h"

struct seen {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned calls;              /* lock, as all below */
	unsigned changed, all;
	uint64_t last_ino;
	char last_name[QFT_MAX_NAME + 1];
};

static struct seen seen = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

/* The reader thread's callback: short, never waits (conn.h). */
static void on_notify(void *ctx, uint64_t ino, uint32_t kind,
		      const char *name, size_t namelen)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->calls++;
	if (kind == QFT_NOTIFY_CHANGED)
		s->changed++;
	if (kind == QFT_NOTIFY_ALL)
		s->all++;
	s->last_ino = ino;
	snprintf(s->last_name, sizeof(s->last_name), "%.*s", (int)namelen,
		 name);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Waits until *counter exceeds `above`, at most `ms`; its value. */
static unsigned wait_count(unsigned *counter, unsigned above, int ms)
{
	struct timespec ts;
	unsigned v;

	qft_deadline_in(&ts, ms);
	pthread_mutex_lock(&seen.lock);
	while (*counter <= above &&
	       pthread_cond_timedwait(&seen.cond, &seen.lock, &ts) == 0)
		;
	v = *counter;
	pthread_mutex_unlock(&seen.lock);
	return v;
}

/* A connection over a fresh server; *pid is the server's. */
static struct qc_conn *connect_server(const char *exe, const char *root,
				      bool want, pid_t *pid)
{
	struct qc_conn_opts o;
	struct qc_endpoint ep;
	struct qc_conn *c;
	char msg[256];
	int sv[2];

	make_pair(sv);
	*pid = spawn_stdio_server(exe, root, sv[1]);
	close(sv[1]);
	memset(&o, 0, sizeof(o));
	o.timeout_s = 10;
	o.host = "test";
	o.want_notify = want;
	o.notify = on_notify;
	o.notify_ctx = &seen;
	memset(&ep, 0, sizeof(ep));
	ep.fd = sv[0];
	ep.meta_fd = -1;
	CHECK_EQ(qc_conn_new(&c, &o, &ep), 0);
	CHECK_EQ(qc_conn_hello(c, 10, msg, sizeof(msg)), 0);
	CHECK_EQ(qc_conn_start(c), 0);
	return c;
}

/* OPENDIR + READDIR(WATCH) of `path`; the reply's opflags. */
static uint32_t list_watched(struct qc_conn *c, const char *path)
{
	uint64_t gen = qc_conn_gen(c), h;
	struct qc_reply rep;
	struct qft_msg m;
	uint32_t flags;

	CHECK_EQ(qc_handle_alloc(c, gen, &h), 0);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	m.path.s = path;
	m.path.len = (uint32_t)strlen(path);
	CHECK_EQ(qc_call_gen(c, gen, &m, &rep), 0);
	qc_reply_free(&rep);
	qft_msg_init(&m, QFT_OP_READDIR, 0);
	m.handle = h;
	m.length = 4096;
	m.opflags = QFT_READDIR_WATCH;
	CHECK_EQ(qc_call_gen(c, gen, &m, &rep), 0);
	flags = rep.msg.opflags;
	qc_reply_free(&rep);
	return flags;
}

static void unlink_remote(struct qc_conn *c, const char *dir, const char *n)
{
	struct qc_reply rep;
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_UNLINK, 0);
	m.path.s = dir;
	m.path.len = (uint32_t)strlen(dir);
	m.name.s = n;
	m.name.len = (uint32_t)strlen(n);
	CHECK_EQ(qc_call(c, &m, &rep), 0);
	qc_reply_free(&rep);
}

static void touch(const char *root, const char *rel)
{
	char p[4096];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	char root[] = "/tmp/qftfs-conn-notify-XXXXXX", d[4096];
	struct qc_conn *c;
	struct stat st;
	unsigned n;
	pid_t pid;
	int status;

	if (argc != 2) {
		fprintf(stderr, "usage: %s QFTFS-SERVER\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	qft_log_init("test_conn_notify", QFT_LOG_WARN);
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(d, sizeof(d), "%s/d", root);
	if (mkdir(d, 0755) < 0 || stat(d, &st) < 0) {
		perror(d);
		return 1;
	}

	/* Granted: foreign changes come, own ones do not, ALL at the end. */
	c = connect_server(argv[1], root, true, &pid);
	if (!(list_watched(c, "d") & QFT_READDIR_WATCHED)) {
		fprintf(stderr, "the server does not watch here: skipped\n");
		qc_conn_shutdown(c, 2000, 2000);
		qc_conn_free(c);
		waitpid(pid, NULL, 0);
		rmdir(d);
		rmdir(root);
		return T_SKIP;
	}
	touch(root, "d/x");
	n = wait_count(&seen.changed, 0, 5000);
	CHECK(n >= 1);
	pthread_mutex_lock(&seen.lock);
	CHECK_EQ(seen.last_ino, st.st_ino);
	CHECK(strcmp(seen.last_name, "x") == 0 ||
	      seen.last_name[0] == '\0');
	pthread_mutex_unlock(&seen.lock);
	/* touch makes several events, which may come as more than one
	 * notification: the count is taken once they have stopped. */
	do
		n = wait_count(&seen.calls, 0, 0);
	while (wait_count(&seen.calls, n, 300) != n);
	unlink_remote(c, "d", "x");
	CHECK_EQ(wait_count(&seen.calls, n, 700), n);
	/* A dead link ends every lease. */
	kill(pid, SIGKILL);
	CHECK_EQ(wait_count(&seen.all, 0, 5000), 1);
	pthread_mutex_lock(&seen.lock);
	CHECK_EQ(seen.last_ino, 0);
	pthread_mutex_unlock(&seen.lock);
	qc_conn_shutdown(c, 2000, 2000);
	qc_conn_free(c);
	waitpid(pid, &status, 0);

	/* Not asked: no watch, no callback, not even ALL at the end. */
	pthread_mutex_lock(&seen.lock);
	seen.calls = seen.changed = seen.all = 0;
	pthread_mutex_unlock(&seen.lock);
	c = connect_server(argv[1], root, false, &pid);
	CHECK_EQ(list_watched(c, "d") & QFT_READDIR_WATCHED, 0);
	touch(root, "d/y");
	CHECK_EQ(wait_count(&seen.calls, 0, 700), 0);
	qc_conn_shutdown(c, 2000, 2000);
	qc_conn_free(c);
	waitpid(pid, &status, 0);
	CHECK_EQ(seen.calls, 0);

	snprintf(d, sizeof(d), "%s/d/y", root);
	unlink(d);
	snprintf(d, sizeof(d), "%s/d", root);
	rmdir(d);
	rmdir(root);
	return check_exit("test_conn_notify");
}
