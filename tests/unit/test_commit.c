// SPDX-License-Identifier: MIT
/*
 * Unit test of close() and its errors (fuse/fs/file.c, fuse/fs/commit.c)
 * against a real qftfs-server, without FUSE: files are created and
 * written through the engine as the callbacks do it, then flushed,
 * fsynced and released.
 *
 * commit=close: a written file's flush waits for the server's FLUSH and
 * reports a failed WRITE; fsync reports it and keeps it for the close,
 * which clears it; a file only read costs no FLUSH at all.
 * commit=async: the flush returns at once, a release while its FLUSH is
 * in flight is deferred and done by the closer thread, a failure is
 * reported exactly once -- at that close when it was known already, else
 * by the sync (`qftfs --sync`) -- and path requests sent ahead report
 * theirs the same way.
 *
 * Usage: test_commit SERVER (the qftfs-server binary; meson passes it).
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
#include "fs/commit.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/handle.h"
#include "fs/steps.h"
#include "fs/writebehind.h"
#include "log.h"
#include "msg.h"
#include "protocol.h"

static struct qc_fs fs;
static char root[] = "/tmp/qftfs-commit-XXXXXX";
static pid_t server;

static void start_mount(const char *exe, bool async)
{
	struct qc_conn_opts o;
	struct qc_endpoint ep;
	char msg[256];
	int sv[2];

	memset(&fs, 0, sizeof(fs));
	fs.commit.on = async;
	CHECK_EQ(qc_fs_init(&fs), 0);
	fs.window = 16 << 20;
	fs.readahead = 0;
	fs.attr_timeout = 1.0;
	fs.entry_timeout = 1.0;
	make_pair(sv);
	server = spawn_stdio_server(exe, root, sv[1]);
	close(sv[1]);
	memset(&o, 0, sizeof(o));
	o.timeout_s = 10;
	o.host = "test";
	memset(&ep, 0, sizeof(ep));
	ep.fd = sv[0];
	ep.meta_fd = -1;
	CHECK_EQ(qc_conn_new(&fs.conn, &o, &ep), 0);
	CHECK_EQ(qc_conn_hello(fs.conn, 10, msg, sizeof(msg)), 0);
	CHECK_EQ(qc_conn_start(fs.conn), 0);
	CHECK_EQ(qc_commit_start(&fs), 0);
}

static void stop(void)
{
	char text[256];

	if (fs.commit.on)
		(void)qc_commit_sync(&fs, text, sizeof(text));
	qc_commit_stop(&fs);
	qc_conn_shutdown(fs.conn, 2000, 2000);
	qc_conn_free(fs.conn);
	waitpid(server, NULL, 0);
	qc_fs_destroy(&fs);
}

/* A file `name` of the root, opened as the open or create callback does:
 * created (O_CREAT) or opened with `flags`. */
static struct qc_file *open_file(const char *name, int flags)
{
	uint64_t gen, handle;
	struct qc_reply rep;
	struct qc_file *f;
	struct qn_node *n;
	struct qft_msg m;

	CHECK_EQ(qc_file_begin(&fs, false, flags, &f, &gen, &handle), 0);
	if (flags & O_CREAT) {
		qft_msg_init(&m, QFT_OP_CREATE, 0);
		qc_set_str(&m.path, "");
		qc_set_str(&m.name, name);
		m.opflags = qc_file_oflags(&fs, flags & ~O_CREAT);
		m.mode = 0644;
	} else {
		qft_msg_init(&m, QFT_OP_OPEN, 0);
		qc_set_str(&m.path, name);
		m.opflags = qc_file_oflags(&fs, flags);
	}
	m.handle = handle;
	CHECK_EQ(qc_call_gen(fs.conn, gen, &m, &rep), 0);
	n = qn_lookup(&fs.nodes, &fs.nodes.root, name, &rep.msg.attr);
	CHECK(n != NULL);
	qc_reply_free(&rep);
	qn_file_attach(&fs.nodes, n, &f->nf, handle);
	/* The kernel's lookup reference, given back at the end. */
	return f;
}

static void forget(struct qn_node *n)
{
	qn_forget(&fs.nodes, n, 1);
}

static int write_str(struct qc_file *f, const char *s, off_t off)
{
	return qc_wb_write(&fs, f, s, (uint32_t)strlen(s), off);
}

static off_t size_of(const char *name)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* commit=close: close() is where a write's error is told. */
static void test_close(const char *exe)
{
	struct qc_file *f;
	struct qn_node *n;

	check_ctx("commit=close");
	start_mount(exe, false);
	f = open_file("a", O_WRONLY | O_CREAT);
	n = qn_file_node(&fs.nodes, &f->nf);
	CHECK_EQ(write_str(f, "hello", 0), 0);
	CHECK_EQ(qc_file_flush(&fs, f), 0);
	CHECK_EQ(size_of("a"), 5);
	/* Made durable: nothing left to lose. */
	CHECK_EQ(f->durable, f->mods);
	CHECK(!qc_commit_release(&fs, f));
	qc_file_release(&fs, f);
	forget(n);

	/* Read only: no FLUSH, no error (even a stale file closes). */
	f = open_file("a", O_RDONLY);
	n = qn_file_node(&fs.nodes, &f->nf);
	CHECK_EQ(qc_file_flush(&fs, f), 0);
	/* A WRITE through a read-only handle fails on the server: answered
	 * at once to the writer, told by fsync (and kept), then by the
	 * close (and cleared). */
	CHECK_EQ(write_str(f, "x", 0), 0);
	CHECK_EQ(qc_file_fsync(&fs, f, 0), -EBADF);
	CHECK_EQ(write_str(f, "y", 0), -EBADF);
	CHECK_EQ(qc_file_flush(&fs, f), -EBADF);
	CHECK_EQ(f->err, 0);
	/* Told once: the next close sends a FLUSH that succeeds. */
	CHECK_EQ(qc_file_flush(&fs, f), 0);
	qc_file_release(&fs, f);
	forget(n);
	CHECK_EQ(size_of("a"), 5);
	stop();
}

struct fixed {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls;
	int err;
};

static void fix(struct qc_fs *fsp, void *ctx, int err,
		const struct qc_reply *rep)
{
	struct fixed *x = ctx;

	(void)fsp;
	(void)rep;
	pthread_mutex_lock(&x->lock);
	x->calls++;
	x->err = err;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

/* commit=async: close() returns at once; failures go to the sync. */
static void test_async(const char *exe)
{
	struct fixed x = { .lock = PTHREAD_MUTEX_INITIALIZER,
			   .cond = PTHREAD_COND_INITIALIZER };
	struct qc_file *f;
	struct qn_node *n;
	struct qft_msg m;
	char text[512];
	int r;

	check_ctx("commit=async");
	start_mount(exe, true);
	f = open_file("b", O_WRONLY | O_CREAT);
	n = qn_file_node(&fs.nodes, &f->nf);
	CHECK(qc_file_oflags(&fs, O_WRONLY) & QFT_O_LAZY);
	CHECK_EQ(write_str(f, "async data", 0), 0);
	CHECK_EQ(qc_file_flush(&fs, f), 0);
	/* Released whether or not its FLUSH is answered yet: deferred to
	 * the closer thread, or now. */
	qc_file_release(&fs, f);
	forget(n);
	CHECK_EQ(qc_commit_sync(&fs, text, sizeof(text)), 0);
	CHECK(strcmp(text, "errors 0\n") == 0);
	CHECK_EQ(size_of("b"), 10);
	/* qc_commit_sync waits for the data, not for the CLOSE the closer
	 * thread may still have queued once the FLUSH was answered: the
	 * backlog empties when it has sent it. */
	for (int i = 0; i < 500 && qc_commit_backlog(&fs) != 0; i++)
		usleep(10000);
	CHECK_EQ(qc_commit_backlog(&fs), 0);

	/* The release decision: deferred exactly while a FLUSH is out. */
	f = open_file("b", O_WRONLY);
	n = qn_file_node(&fs.nodes, &f->nf);
	CHECK(!qc_commit_release(&fs, f));
	CHECK(!f->cm.deferred);
	pthread_mutex_lock(&f->lock);
	qc_step_flush_begin(f, NULL);
	pthread_mutex_unlock(&f->lock);
	CHECK(qc_commit_release(&fs, f));
	CHECK(f->cm.deferred);
	pthread_mutex_lock(&f->lock);
	qc_step_flush_done(f);
	f->cm.deferred = false;
	pthread_mutex_unlock(&f->lock);
	qc_file_release(&fs, f);
	forget(n);

	/* A failed WRITE is reported once: by the close when its answer
	 * was in, else by the sync, with the file's path. */
	f = open_file("b", O_RDONLY);
	n = qn_file_node(&fs.nodes, &f->nf);
	CHECK_EQ(write_str(f, "z", 0), 0);
	r = qc_file_flush(&fs, f);
	qc_file_release(&fs, f);
	forget(n);
	if (r == 0) {
		CHECK_EQ(qc_commit_sync(&fs, text, sizeof(text)), -EBADF);
		CHECK(strstr(text, "errors 1\nfirst /b: ") == text);
	} else {
		CHECK_EQ(r, -EBADF);
		CHECK_EQ(qc_commit_sync(&fs, text, sizeof(text)), 0);
	}
	/* Reported: the count starts again. */
	CHECK_EQ(qc_commit_sync(&fs, text, sizeof(text)), 0);
	CHECK(strcmp(text, "errors 0\n") == 0);

	/* A known error is the close's own. */
	f = open_file("b", O_RDONLY);
	n = qn_file_node(&fs.nodes, &f->nf);
	CHECK_EQ(write_str(f, "z", 0), 0);
	CHECK_EQ(qc_file_fsync(&fs, f, 0), -EBADF);
	CHECK_EQ(qc_file_flush(&fs, f), -EBADF);
	qc_file_release(&fs, f);
	forget(n);
	CHECK_EQ(qc_commit_sync(&fs, text, sizeof(text)), 0);

	/* Path requests sent ahead: the fix learns the outcome, and a
	 * failure is the sync's. */
	qft_msg_init(&m, QFT_OP_SETATTR, 0);
	qc_set_str(&m.path, "b");
	m.valid = QFT_SET_MODE;
	m.mode = 0600;
	CHECK_EQ(qc_commit_path_op(&fs, &m, "b", fix, &x), 0);
	qft_msg_init(&m, QFT_OP_SETATTR, 0);
	qc_set_str(&m.path, "missing");
	m.valid = QFT_SET_MODE;
	m.mode = 0600;
	CHECK_EQ(qc_commit_path_op(&fs, &m, "missing", fix, &x), 0);
	CHECK_EQ(qc_commit_sync(&fs, text, sizeof(text)), -ENOENT);
	CHECK(strstr(text, "errors 1\nfirst /missing: ") == text);
	pthread_mutex_lock(&x.lock);
	CHECK_EQ(x.calls, 2);
	CHECK_EQ(x.err, -ENOENT);
	pthread_mutex_unlock(&x.lock);
	/* Counted for the statistics: what only the sync could tell. */
	CHECK_EQ(qc_commit_errors(&fs), 1 + (uint64_t)(r == 0));
	stop();
}

int main(int argc, char **argv)
{
	char path[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: %s QFTFS-SERVER\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	qft_log_init("test_commit", QFT_LOG_WARN);
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_close(argv[1]);
	test_async(argv[1]);
	snprintf(path, sizeof(path), "%s/a", root);
	unlink(path);
	snprintf(path, sizeof(path), "%s/b", root);
	unlink(path);
	rmdir(root);
	return check_exit("test_commit");
}
