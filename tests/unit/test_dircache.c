// SPDX-License-Identifier: MIT
/*
 * Unit test of fuse/fs/dir/, the client's directory cache, without a
 * connection or a kernel: the bookkeeping of listings the client keeps
 * exact by its own changes (mkdir, create, unlink, rename, exchange,
 * link), what it answers and what it leaves to the server (hard links,
 * renamed objects, open files, names changed on the server), change
 * notification (a name, a directory, everything), expiry and eviction
 * under a small cap.  Listings are made the one way that needs no server:
 * a directory the client just made, known empty.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fs/dircache.h"
#include "fs/fs.h"
#include "fs/node.h"
#include "protocol.h"

static struct qft_attr attr(uint64_t ino, uint32_t type, uint64_t size,
			    uint32_t nlink)
{
	struct qft_attr a;

	memset(&a, 0, sizeof(a));
	a.ino = ino;
	a.mode = type | (type == QFT_S_IFDIR ? 0755 : 0644);
	a.size = size;
	a.nlink = nlink;
	a.mtime.sec = 1000 + (int64_t)ino;
	a.ctime = a.mtime;
	return a;
}

static void setup(struct qc_fs *fs, size_t cap, double timeout)
{
	memset(fs, 0, sizeof(*fs));
	fs->entry_timeout = timeout;
	fs->attr_timeout = timeout;
	CHECK_EQ(qn_table_init(&fs->nodes), 0);
	CHECK_EQ(qc_dir_init(fs, cap), 0);
	CHECK(fs->dirs != NULL);
}

static void drop_file(struct qn_file *f)
{
}

static void teardown(struct qc_fs *fs)
{
	qc_dir_destroy(fs);
	qn_table_destroy(&fs->nodes, drop_file);
}

/* A directory `name` in `parent` made by the client: its listing is
 * known empty.  Returns its node, with a kernel lookup (as the mkdir's
 * reply gives one) that keeps it alive whatever happens to the listing;
 * the table's teardown frees it. */
static struct qn_node *made_dir(struct qc_fs *fs, struct qn_node *parent,
				const char *name, uint64_t ino)
{
	struct qft_attr a = attr(ino, QFT_S_IFDIR, 4096, 2);
	struct qc_dir_fetch fb;
	struct qn_node *n;

	qc_dir_fetch_begin(fs, &fb);
	qc_dir_note_mkdir(fs, parent, name, &a, &fb);
	n = qn_lookup(&fs->nodes, parent, name, &a);
	CHECK(n != NULL);
	return n;
}

static void file(struct qc_fs *fs, struct qn_node *dir, const char *name,
		 uint64_t ino, uint64_t size, uint32_t nlink)
{
	struct qft_attr a = attr(ino, QFT_S_IFREG, size, nlink);

	qc_dir_note_entry(fs, dir, name, &a);
}

static void test_own_changes(void)
{
	struct qc_fs fs;
	struct qn_node *root, *d, *e;
	struct qft_attr out;

	check_ctx("own changes");
	setup(&fs, 1000, 60);
	root = &fs.nodes.root;
	/* The root was never listed: nothing is known there. */
	CHECK_EQ(qc_dir_lookup(&fs, root, "d", NULL), -EAGAIN);
	d = made_dir(&fs, root, "d", 10);
	CHECK_EQ(qc_dir_lookup(&fs, d, "x", NULL), 0);
	/* Made by this client, but no lease: O_EXCL asks the server. */
	CHECK(!qc_dir_leased_absent(&fs, d, "x"));

	file(&fs, d, "f", 11, 5, 1);
	CHECK_EQ(qc_dir_lookup(&fs, d, "f", &out), 1);
	CHECK_EQ(out.ino, 11);
	CHECK_EQ(out.size, 5);
	/* Another name of it may be written: only the server knows. */
	file(&fs, d, "h", 12, 7, 2);
	CHECK_EQ(qc_dir_lookup(&fs, d, "h", NULL), -EAGAIN);

	/* A rename moves the name; the object's ctime changed, so its
	 * attributes are asked for again. */
	qc_dir_note_rename(&fs, d, "f", d, "g", false);
	CHECK_EQ(qc_dir_lookup(&fs, d, "f", NULL), 0);
	CHECK_EQ(qc_dir_lookup(&fs, d, "g", NULL), -EAGAIN);
	qc_dir_note_entry(&fs, d, "g", &(struct qft_attr){ .ino = 11,
			  .mode = QFT_S_IFREG | 0644, .nlink = 1, .size = 6 });
	CHECK_EQ(qc_dir_lookup(&fs, d, "g", &out), 1);
	CHECK_EQ(out.size, 6);

	/* Across directories, over an existing name. */
	e = made_dir(&fs, root, "e", 20);
	file(&fs, e, "t", 21, 1, 1);
	qc_dir_note_rename(&fs, d, "g", e, "t", false);
	CHECK_EQ(qc_dir_lookup(&fs, d, "g", NULL), 0);
	CHECK(qc_dir_lookup(&fs, e, "t", NULL) != 0);

	/* Exchange: both names stay, with each other's objects. */
	file(&fs, e, "a", 30, 1, 1);
	file(&fs, e, "b", 31, 2, 1);
	qc_dir_note_rename(&fs, e, "a", e, "b", true);
	CHECK(qc_dir_lookup(&fs, e, "a", NULL) != 0);
	CHECK(qc_dir_lookup(&fs, e, "b", NULL) != 0);

	/* Gone, and a failure that makes the directory unknown. */
	qc_dir_note_gone(&fs, e, "a");
	CHECK_EQ(qc_dir_lookup(&fs, e, "a", NULL), 0);
	qc_dir_drop(&fs, e);
	CHECK_EQ(qc_dir_lookup(&fs, e, "nothing", NULL), -EAGAIN);

	/* rmdir of d drops d's own listing with its entry. */
	qc_dir_note_gone(&fs, root, "d");
	CHECK_EQ(qc_dir_lookup(&fs, d, "x", NULL), -EAGAIN);
	teardown(&fs);
}

static void test_attributes(void)
{
	struct qft_attr a = attr(41, QFT_S_IFREG, 9, 1), out;
	struct qn_file nf;
	struct qn_node *d, *k;
	struct qc_fs fs;

	check_ctx("attributes");
	setup(&fs, 1000, 60);
	d = made_dir(&fs, &fs.nodes.root, "d", 40);
	qc_dir_note_entry(&fs, d, "k", &a);
	k = qn_lookup(&fs.nodes, d, "k", &a);
	CHECK(k != NULL);
	CHECK(qc_dir_cached_attr(&fs, k, &out));
	CHECK_EQ(out.size, 9);
	/* Open: writes may change it behind the listing. */
	memset(&nf, 0, sizeof(nf));
	qn_file_attach(&fs.nodes, k, &nf, 1);
	CHECK(!qc_dir_cached_attr(&fs, k, &out));
	CHECK_EQ(qc_dir_lookup(&fs, d, "k", NULL), -EAGAIN);
	CHECK(qn_file_detach(&fs.nodes, &nf));
	/* Released after the listing got it: still not trusted. */
	CHECK(!qc_dir_cached_attr(&fs, k, &out));
	/* Until the client learns it afresh. */
	a.size = 12;
	qc_dir_note_entry(&fs, d, "k", &a);
	CHECK(qc_dir_cached_attr(&fs, k, &out));
	CHECK_EQ(out.size, 12);
	/* An xattr set through the mount ends the NOXATTR hint. */
	a.flags = QFT_ATTR_NOXATTR;
	qc_dir_note_entry(&fs, d, "k", &a);
	CHECK(qc_dir_cached_attr(&fs, k, &out));
	CHECK(out.flags & QFT_ATTR_NOXATTR);
	qc_dir_xattr_changed(&fs, k);
	CHECK(qc_dir_cached_attr(&fs, k, &out));
	CHECK(!(out.flags & QFT_ATTR_NOXATTR));
	/* The root has no parent listing. */
	CHECK(!qc_dir_cached_attr(&fs, &fs.nodes.root, &out));
	qn_forget(&fs.nodes, k, 1);
	teardown(&fs);
}

static void test_notify(void)
{
	struct qn_node *d, *e;
	struct qc_fs fs;

	check_ctx("notify");
	setup(&fs, 1000, 60);
	d = made_dir(&fs, &fs.nodes.root, "d", 50);
	file(&fs, d, "k", 51, 1, 1);
	/* A name changed on the server: asked for again, the rest known. */
	qc_dir_notify(&fs, 50, QFT_NOTIFY_CHANGED, "k", 1);
	CHECK_EQ(qc_dir_lookup(&fs, d, "k", NULL), -EAGAIN);
	CHECK_EQ(qc_dir_lookup(&fs, d, "other", NULL), 0);
	/* The client's own change of it settles it. */
	file(&fs, d, "k", 51, 3, 1);
	CHECK_EQ(qc_dir_lookup(&fs, d, "k", NULL), 1);
	/* Another directory's notice changes nothing here. */
	qc_dir_notify(&fs, 999, QFT_NOTIFY_CHANGED, "", 0);
	CHECK_EQ(qc_dir_lookup(&fs, d, "other", NULL), 0);
	/* Anything in it. */
	qc_dir_notify(&fs, 50, QFT_NOTIFY_CHANGED, "", 0);
	CHECK_EQ(qc_dir_lookup(&fs, d, "other", NULL), -EAGAIN);
	/* Its watch ended. */
	e = made_dir(&fs, &fs.nodes.root, "e", 60);
	CHECK_EQ(qc_dir_lookup(&fs, e, "x", NULL), 0);
	qc_dir_notify(&fs, 60, QFT_NOTIFY_GONE, "", 0);
	CHECK_EQ(qc_dir_lookup(&fs, e, "x", NULL), -EAGAIN);
	/* Everything (the server lost track, or the link died). */
	d = made_dir(&fs, &fs.nodes.root, "d2", 70);
	e = made_dir(&fs, &fs.nodes.root, "e2", 71);
	qc_dir_notify(&fs, 0, QFT_NOTIFY_ALL, "", 0);
	CHECK_EQ(qc_dir_lookup(&fs, d, "x", NULL), -EAGAIN);
	CHECK_EQ(qc_dir_lookup(&fs, e, "x", NULL), -EAGAIN);
	/* Too many names changed: the listing goes. */
	d = made_dir(&fs, &fs.nodes.root, "d3", 80);
	for (int i = 0; i < 40; i++) {
		char name[16];

		snprintf(name, sizeof(name), "n%d", i);
		qc_dir_notify(&fs, 80, QFT_NOTIFY_CHANGED, name, strlen(name));
	}
	CHECK_EQ(qc_dir_lookup(&fs, d, "zzz", NULL), -EAGAIN);
	teardown(&fs);
}

static void test_bounds(void)
{
	struct qn_node *d1, *d2, *d3;
	struct timespec ts = { 0, 150 * 1000 * 1000 };
	struct qc_fs fs;
	size_t max;

	check_ctx("eviction");
	setup(&fs, 10, 60);
	d1 = made_dir(&fs, &fs.nodes.root, "d1", 90);
	for (int i = 0; i < 6; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		file(&fs, d1, name, 100 + (uint64_t)i, 1, 1);
	}
	d2 = made_dir(&fs, &fs.nodes.root, "d2", 91);
	for (int i = 0; i < 6; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d", i);
		file(&fs, d2, name, 200 + (uint64_t)i, 1, 1);
	}
	/* 12 names over a cap of 10: the least recently used went. */
	CHECK_EQ(qc_dir_lookup(&fs, d1, "nope", NULL), -EAGAIN);
	CHECK_EQ(qc_dir_lookup(&fs, d2, "nope", NULL), 0);
	CHECK_EQ(qc_dir_lookup(&fs, d2, "g5", NULL), 1);
	teardown(&fs);

	check_ctx("expiry");
	setup(&fs, 1000, 0.1);
	d3 = made_dir(&fs, &fs.nodes.root, "d3", 95);
	CHECK_EQ(qc_dir_lookup(&fs, d3, "x", NULL), 0);
	nanosleep(&ts, NULL);
	CHECK_EQ(qc_dir_lookup(&fs, d3, "x", NULL), -EAGAIN);
	teardown(&fs);

	check_ctx("off");
	setup(&fs, 1000, 0);
	/* entry_timeout=0: nothing is kept, nothing answered. */
	qc_dir_note_mkdir(&fs, &fs.nodes.root, "d3",
			  &(struct qft_attr){ .ino = 96, .mode = QFT_S_IFDIR | 0755,
					      .nlink = 2 }, &(struct qc_dir_fetch){ 0 });
	d3 = qn_find_ref(&fs.nodes, &fs.nodes.root, "d3");
	CHECK(d3 == NULL);
	CHECK_EQ(qc_dir_lookup(&fs, &fs.nodes.root, "d3", NULL), -EAGAIN);
	teardown(&fs);

	check_ctx("parse");
	CHECK_EQ(qc_dir_parse_max("0", &max), 0);
	CHECK_EQ(max, 0);
	CHECK_EQ(qc_dir_parse_max("12345", &max), 0);
	CHECK_EQ(max, 12345);
	CHECK_EQ(qc_dir_parse_max("-1", &max), -EINVAL);
	CHECK_EQ(qc_dir_parse_max("12k", &max), -EINVAL);
	CHECK_EQ(qc_dir_parse_max("", &max), -EINVAL);
}

int main(void)
{
	test_own_changes();
	test_attributes();
	test_notify();
	test_bounds();
	return check_exit("test_dircache");
}
