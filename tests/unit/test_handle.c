// SPDX-License-Identifier: MIT
/*
 * Unit test of the open-handle base (fuse/fs/handle.c), without a server:
 * the references a file's node holds and when the last one closes it, the
 * async calls that keep a released file alive until the last completion
 * frees it, the features' hooks, the changes in flight and their sticky
 * error, what a flush or fsync marks, failing for good, and the refusal
 * to re-open a file on a new link when something written through it may
 * have been lost.
 *
 * The connection is real but never started (a socketpair nobody answers):
 * its link 1 is live, so handles can be allocated; a file bound to gen 0
 * is one whose link is gone, for which nothing is ever sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "check.h"
#include "fixture.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/handle.h"
#include "protocol.h"

static struct qc_fs fs;

/* What the hooks saw. */
static unsigned gone_calls, fini_calls;

static void count_gone(struct qc_file *f)
{
	qc_file_assert_locked(f);
	gone_calls++;
}

static void count_fini(struct qc_file *f)
{
	(void)f;
	fini_calls++;
}

static const struct qc_file_hooks hooks = {
	.handle_gone = count_gone,
	.fini = count_fini,
};

static void setup(void)
{
	struct qc_conn_opts o;
	struct qc_endpoint ep;
	int sv[2];

	memset(&fs, 0, sizeof(fs));
	CHECK_EQ(qn_table_init(&fs.nodes), 0);
	make_pair(sv);
	/* The other end stays open and silent. */
	memset(&o, 0, sizeof(o));
	o.timeout_s = 5;
	o.host = "test";
	memset(&ep, 0, sizeof(ep));
	ep.fd = sv[0];
	ep.meta_fd = -1;
	CHECK_EQ(qc_conn_new(&fs.conn, &o, &ep), 0);
}

/* A file of the base alone, counted by the hooks above. */
static struct qc_file *new_file(void)
{
	struct qc_file *f = calloc(1, sizeof(*f));

	if (!f) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	qc_file_init(f, &fs, false, 0, &hooks);
	return f;
}

/* A file attached to a fresh node "name" of the root, as an open does. */
static struct qc_file *open_file(const char *name, uint64_t gen,
				 uint64_t handle)
{
	static uint64_t ino = 100;
	struct qc_file *f = new_file();
	struct qft_attr a;
	struct qn_node *n;

	memset(&a, 0, sizeof(a));
	a.mode = QFT_S_IFREG | 0644;
	a.ino = ino++;
	n = qn_lookup(&fs.nodes, &fs.nodes.root, name, &a);
	CHECK(n != NULL);
	qc_file_bind(f, gen, handle);
	qn_file_attach(&fs.nodes, n, &f->nf, handle);
	return f;
}

static void test_free_and_hooks(void)
{
	struct qc_file *f;

	check_ctx("free");
	fini_calls = gone_calls = 0;
	f = new_file();
	CHECK_EQ(f->gen, 0);
	CHECK(f->hooks == &hooks);
	qc_file_free(f);
	CHECK_EQ(fini_calls, 1);
	CHECK_EQ(gone_calls, 0);

	/* An error nobody collected is logged, not lost silently; the
	 * features are freed all the same. */
	f = new_file();
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_file_change_begin(f, true), 0);
	qc_file_change_done(f, -ENOSPC);
	CHECK_EQ(f->async, 1);
	f->async--;
	pthread_mutex_unlock(&f->lock);
	qc_file_free(f);
	CHECK_EQ(fini_calls, 2);
}

/* Closing: the handle goes, the file lives until its last completion. */
static void test_async_after_close(void)
{
	struct qc_file *f;

	check_ctx("async after close");
	fini_calls = gone_calls = 0;
	f = new_file();
	qc_file_bind(f, 0, 7);
	pthread_mutex_lock(&f->lock);
	qc_file_hold(f);
	qc_file_hold(f);
	CHECK_EQ(f->async, 2);
	/* A completion of a file still open frees nothing. */
	qc_file_async_done(f);
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(f->async, 1);
	CHECK(!f->closing);
	pthread_mutex_unlock(&f->lock);
	/* Its link is gone (gen 0): nothing to send for the CLOSE. */
	qc_file_close(&fs, f);
	CHECK_EQ(gone_calls, 1);
	CHECK_EQ(fini_calls, 0);
	pthread_mutex_lock(&f->lock);
	CHECK(f->closing);
	qc_file_async_done(f);
	/* The last completion freed it (ASan would see a use after). */
	CHECK_EQ(fini_calls, 1);

	/* Nothing in flight: freed by the close itself. */
	f = new_file();
	qc_file_bind(f, 0, 7);
	qc_file_close(&fs, f);
	CHECK_EQ(gone_calls, 2);
	CHECK_EQ(fini_calls, 2);
}

/* The kernel's reference and borrowers': the last one closes. */
static void test_references(void)
{
	struct qc_file *f, *b;

	check_ctx("references");
	fini_calls = gone_calls = 0;
	f = open_file("refs", 0, 3);
	CHECK_EQ(f->nf.handle, 3);
	b = (struct qc_file *)qn_file_borrow(&fs.nodes,
					     qn_file_node(&fs.nodes, &f->nf));
	CHECK(b == f);
	/* A borrower that gives it back leaves it open. */
	qc_file_put(&fs, b);
	CHECK_EQ(fini_calls, 0);
	qc_file_put(&fs, NULL);
	b = (struct qc_file *)qn_file_borrow(&fs.nodes,
					     qn_file_node(&fs.nodes, &f->nf));
	CHECK(b == f);
	/* The kernel releases it while borrowed: still open, and no longer
	 * found through its node. */
	qc_file_release_now(&fs, f);
	CHECK_EQ(fini_calls, 0);
	CHECK(qn_file_borrow(&fs.nodes, qn_file_node(&fs.nodes, &b->nf)) ==
	      NULL);
	/* The borrower's put is the last reference. */
	qc_file_put(&fs, b);
	CHECK_EQ(gone_calls, 1);
	CHECK_EQ(fini_calls, 1);
}

/* Changes in flight: counted, answered, the first error sticky. */
static void test_changes(void)
{
	struct qc_file_mark mk;
	struct qc_file *f;

	check_ctx("changes");
	f = new_file();
	qc_file_mark(f, true, &mk);
	CHECK(!mk.written);
	CHECK(!mk.pending);
	CHECK_EQ(mk.err, 0);

	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_file_change_begin(f, true), 0);
	CHECK_EQ(qc_file_change_begin(f, false), 0);
	CHECK_EQ(f->issued, 2);
	CHECK_EQ(f->mods, 1);
	CHECK(f->written);
	CHECK_EQ(f->async, 2);
	pthread_mutex_unlock(&f->lock);

	/* A flush marks what it covers and counts f as not written. */
	qc_file_mark(f, true, &mk);
	CHECK(mk.written);
	CHECK(mk.pending);
	CHECK_EQ(mk.issued, 2);
	CHECK_EQ(mk.mods, 1);
	CHECK(!f->written);
	/* ... but data not yet durable is still to be covered. */
	qc_file_mark(f, false, &mk);
	CHECK(mk.written);

	pthread_mutex_lock(&f->lock);
	qc_file_change_done(f, -EIO);
	qc_file_change_done(f, -ENOSPC);
	CHECK_EQ(f->answered, 2);
	CHECK_EQ(f->err, -EIO);
	/* No later change may look like it succeeded. */
	CHECK_EQ(qc_file_change_begin(f, true), -EIO);
	CHECK_EQ(f->issued, 2);
	CHECK_EQ(f->mods, 1);
	f->async -= 2;
	pthread_mutex_unlock(&f->lock);

	/* fsync reports it and keeps it; flush reports and clears it. */
	CHECK_EQ(qc_file_collect(f, 2, false), -EIO);
	CHECK_EQ(f->err, -EIO);
	CHECK_EQ(qc_file_collect(f, 2, true), -EIO);
	CHECK_EQ(qc_file_collect(f, 2, true), 0);

	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_file_change_begin(f, false), 0);
	qc_file_change_done(f, -EPERM);
	CHECK_EQ(qc_file_take_err(f), -EPERM);
	CHECK_EQ(f->err, 0);
	f->async--;
	/* Durable: only ever grows. */
	qc_file_note_durable(f, 1);
	qc_file_note_durable(f, 0);
	CHECK_EQ(f->durable, 1);
	pthread_mutex_unlock(&f->lock);
	qc_file_mark(f, false, &mk);
	CHECK(!mk.written);
	CHECK(!mk.pending);

	/* Written, then made durable by an FSYNC (which leaves the file
	 * written since its last FLUSH): a close has nothing to commit. */
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_file_change_begin(f, true), 0);
	qc_file_change_done(f, 0);
	f->async--;
	CHECK(f->written);
	qc_file_note_durable(f, f->mods);
	pthread_mutex_unlock(&f->lock);
	qc_file_mark(f, false, &mk);
	CHECK(!mk.written);
	CHECK(!mk.pending);

	pthread_mutex_lock(&f->lock);
	f->written = false;
	pthread_mutex_unlock(&f->lock);
	qc_file_changed(f, false);
	CHECK_EQ(f->mods, 3);
	CHECK(!f->written);
	qc_file_mark(f, false, &mk);
	CHECK(mk.written);
	qc_file_changed(f, true);
	CHECK(f->written);
	qc_file_free(f);
}

/* A file failed for good reports that, first error first. */
static void test_failed(void)
{
	struct qc_file *f;

	check_ctx("failed");
	f = new_file();
	CHECK_EQ(qc_file_error(f, -ENOENT), -ENOENT);
	pthread_mutex_lock(&f->lock);
	qc_file_fail(f, -ESTALE);
	qc_file_fail(f, -EIO);
	pthread_mutex_unlock(&f->lock);
	CHECK_EQ(f->failed, -ESTALE);
	CHECK_EQ(qc_file_error(f, -ENOENT), -ESTALE);
	qc_file_free(f);
}

/* The handle to send on: the live link's, or none after a lost write. */
static void test_handle_and_reopen(void)
{
	uint64_t gen = 0, handle = 0;
	struct qc_file *f;

	check_ctx("reopen");
	fini_calls = gone_calls = 0;
	/* On the live link: as bound. */
	CHECK_EQ(qc_conn_gen(fs.conn), 1);
	f = open_file("live", 1, 5);
	CHECK_EQ(qc_file_handle(&fs, f, &gen, &handle), 0);
	CHECK_EQ(gen, 1);
	CHECK_EQ(handle, 5);
	CHECK(!qc_file_writes_in_flight(&fs, f));
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_file_change_begin(f, true), 0);
	pthread_mutex_unlock(&f->lock);
	CHECK(qc_file_writes_in_flight(&fs, f));
	pthread_mutex_lock(&f->lock);
	qc_file_change_done(f, 0);
	f->async--;
	pthread_mutex_unlock(&f->lock);
	CHECK(!qc_file_writes_in_flight(&fs, f));
	pthread_mutex_lock(&f->lock);
	f->gen = 0;     /* as if its link were lost: nothing sent at close */
	pthread_mutex_unlock(&f->lock);
	qc_file_release_now(&fs, f);

	/* Its link is gone and data written through it was not made
	 * durable: no re-open, it fails with EIO for good. */
	gone_calls = 0;
	f = open_file("lost", 0, 6);
	qc_file_changed(f, true);
	CHECK_EQ(qc_file_handle(&fs, f, &gen, &handle), -EIO);
	CHECK_EQ(f->failed, -EIO);
	CHECK_EQ(gone_calls, 0);
	CHECK_EQ(qc_file_handle(&fs, f, &gen, &handle), -EIO);
	CHECK_EQ(qc_file_error(f, -ENOENT), -EIO);
	CHECK(!qc_file_writes_in_flight(&fs, f));
	qc_file_release_now(&fs, f);

	/* The same for a change in flight, or an error not reported. */
	f = open_file("inflight", 0, 8);
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_file_change_begin(f, false), 0);
	pthread_mutex_unlock(&f->lock);
	CHECK_EQ(qc_file_handle(&fs, f, &gen, &handle), -EIO);
	pthread_mutex_lock(&f->lock);
	qc_file_change_done(f, 0);
	qc_file_async_done(f);
	qc_file_release_now(&fs, f);

	f = open_file("err", 0, 9);
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_file_change_begin(f, false), 0);
	qc_file_change_done(f, -ENOSPC);
	qc_file_async_done(f);
	CHECK_EQ(qc_file_handle(&fs, f, &gen, &handle), -EIO);
	qc_file_release_now(&fs, f);
	CHECK_EQ(fini_calls, 4);
}

static void test_begin_and_oflags(void)
{
	uint64_t gen = 0, handle = 0;
	struct qc_file *f;

	check_ctx("begin");
	CHECK_EQ(qc_file_begin(&fs, false, O_WRONLY, &f, &gen, &handle), 0);
	CHECK_EQ(gen, 1);
	CHECK(handle >= 1);
	CHECK_EQ(f->gen, gen);
	CHECK_EQ(f->nf.handle, handle);
	CHECK_EQ(f->oflags, O_WRONLY);
	qc_handle_free(fs.conn, gen, handle);
	qc_file_free(f);

	check_ctx("oflags");
	fs.commit.on = false;
	fs.commit_none = false;
	CHECK(!(qc_file_oflags(&fs, O_WRONLY) & QFT_O_LAZY));
	fs.commit.on = true;
	CHECK(qc_file_oflags(&fs, O_WRONLY) & QFT_O_LAZY);
	CHECK(qc_file_oflags(&fs, O_RDWR) & QFT_O_LAZY);
	CHECK(!(qc_file_oflags(&fs, O_RDONLY) & QFT_O_LAZY));
	fs.commit.on = false;
	fs.commit_none = true;
	CHECK(qc_file_oflags(&fs, O_WRONLY) & QFT_O_LAZY);
	fs.commit_none = false;
}

int main(void)
{
	setup();
	test_free_and_hooks();
	test_async_after_close();
	test_references();
	test_changes();
	test_failed();
	test_handle_and_reopen();
	test_begin_and_oflags();
	qc_conn_free(fs.conn);
	qn_table_destroy(&fs.nodes, NULL);
	return check_exit("test_handle");
}
