// SPDX-License-Identifier: MIT
/*
 * Unit test of fuse/fs/node.c, the client's inode table: names to nodes and
 * back to paths, what detaches a node, when a node is freed, and the open
 * files a node lists.  Freed nodes cannot be looked at, so freeing shows
 * in the table's count of hashed nodes and, under ASan, as use-after-free
 * or a leak.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fs/node.h"
#include "protocol.h"

static struct qft_attr attr(uint64_t ino, uint32_t type)
{
	struct qft_attr a;

	memset(&a, 0, sizeof(a));
	a.ino = ino;
	a.mode = type | 0644;
	return a;
}

static struct qn_node *look(struct qn_table *t, struct qn_node *parent,
			    const char *name, uint64_t ino, uint32_t type)
{
	struct qft_attr a = attr(ino, type);

	return qn_lookup(t, parent, name, &a);
}

/* qn_path as a string, or "error" (see path_err). */
static const char *path_of(struct qn_table *t, struct qn_node *n,
			   const char *name)
{
	static char buf[QFT_MAX_PATH + 1];
	int r = qn_path(t, n, name, buf);

	if (r < 0)
		return "error";
	if ((size_t)r != strlen(buf))
		return "length mismatch";
	return buf;
}

static int path_err(struct qn_table *t, struct qn_node *n, const char *name)
{
	char buf[QFT_MAX_PATH + 1];
	int r = qn_path(t, n, name, buf);

	return r < 0 ? r : 0;
}

#define CHECK_PATH(t, n, name, want) \
	CHECK(strcmp(path_of(t, n, name), want) == 0)
#define CHECK_NOPATH(t, n, name, err) CHECK_EQ(path_err(t, n, name), err)

static void test_lookup(void)
{
	struct qn_table t;
	struct qn_node *root, *a, *a2, *b, *c;

	check_ctx("lookup");
	CHECK_EQ(qn_table_init(&t), 0);
	root = &t.root;
	CHECK(qn_from_ino(&t, 1) == root);
	CHECK_EQ(qn_to_ino(&t, root), 1);

	a = look(&t, root, "a", 10, QFT_S_IFDIR);
	CHECK(a != NULL && a != root);
	CHECK(qn_from_ino(&t, qn_to_ino(&t, a)) == a);
	/* The same name twice is the same node, with two lookups. */
	a2 = look(&t, root, "a", 10, QFT_S_IFDIR);
	CHECK(a2 == a);
	CHECK_EQ(a->nlookup, 2);
	CHECK_EQ(t.count, 1);
	/* The same name in another directory is another node. */
	b = look(&t, a, "a", 11, QFT_S_IFREG);
	CHECK(b != a);
	CHECK_EQ(t.count, 2);

	/* Another inode behind the name: a new node; the old one keeps
	 * living for the kernel but has no path any more. */
	c = look(&t, a, "a", 12, QFT_S_IFREG);
	CHECK(c != b);
	CHECK_PATH(&t, c, NULL, "a/a");
	CHECK_NOPATH(&t, b, NULL, -ENOENT);
	CHECK_EQ(t.count, 2);
	/* Another type with the same inode: also a new node. */
	b = look(&t, a, "a", 12, QFT_S_IFDIR);
	CHECK(b != c);
	CHECK_NOPATH(&t, c, NULL, -ENOENT);
	CHECK_PATH(&t, b, NULL, "a/a");
	/* The attributes are remembered for the next comparison. */
	CHECK_EQ(b->rino, 12);
	CHECK_EQ(b->rtype, QFT_S_IFDIR);

	qn_table_destroy(&t, NULL);
}

static void test_paths(void)
{
	struct qn_table t;
	struct qn_node *root, *n, *d, *e, *deep;
	char name[QFT_MAX_NAME + 1];
	int i;

	check_ctx("paths");
	CHECK_EQ(qn_table_init(&t), 0);
	root = &t.root;
	CHECK_PATH(&t, root, NULL, "");
	CHECK_PATH(&t, root, "x", "x");
	d = look(&t, root, "d", 2, QFT_S_IFDIR);
	e = look(&t, d, "e", 3, QFT_S_IFDIR);
	CHECK_PATH(&t, e, NULL, "d/e");
	CHECK_PATH(&t, e, "f", "d/e/f");

	/* 16 components of 255 bytes: 16 * 256 - 1 = 4095, just fits. */
	memset(name, 'n', QFT_MAX_NAME);
	name[QFT_MAX_NAME] = '\0';
	deep = root;
	for (i = 0; i < 16; i++) {
		name[0] = (char)('a' + i);
		deep = look(&t, deep, name, 100 + (uint64_t)i, QFT_S_IFDIR);
	}
	CHECK_EQ(strlen(path_of(&t, deep, NULL)), QFT_MAX_PATH);
	/* One byte more, as a name or as a node, is too long. */
	CHECK_NOPATH(&t, deep, "z", -ENAMETOOLONG);
	n = look(&t, deep, "z", 200, QFT_S_IFREG);
	CHECK_NOPATH(&t, n, NULL, -ENAMETOOLONG);
	/* Fifteen components and a name of 254: one byte to spare; with
	 * 256 (names are checked elsewhere), one byte too many. */
	name[QFT_MAX_NAME - 1] = '\0';
	CHECK_EQ(strlen(path_of(&t, deep->names->parent, name)), QFT_MAX_PATH - 1);
	{
		char big[QFT_MAX_NAME + 2];

		memset(big, 'b', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		CHECK_NOPATH(&t, deep->names->parent, big, -ENAMETOOLONG);
		big[sizeof(big) - 2] = '\0';
		CHECK_EQ(strlen(path_of(&t, deep->names->parent, big)), QFT_MAX_PATH);
	}

	/* A detached node has no path, and neither has anything below it;
	 * the name is free for a new node. */
	qn_remove(&t, root, "d");
	CHECK_NOPATH(&t, d, NULL, -ENOENT);
	CHECK_NOPATH(&t, e, NULL, -ENOENT);
	CHECK_NOPATH(&t, e, "f", -ENOENT);
	n = look(&t, root, "d", 2, QFT_S_IFDIR);
	CHECK(n != d);
	CHECK_PATH(&t, n, NULL, "d");
	qn_table_destroy(&t, NULL);
}

static void test_rename(void)
{
	struct qn_table t;
	struct qn_node *root, *d1, *d2, *x, *y, *z;

	check_ctx("rename");
	CHECK_EQ(qn_table_init(&t), 0);
	root = &t.root;
	d1 = look(&t, root, "d1", 2, QFT_S_IFDIR);
	d2 = look(&t, root, "d2", 3, QFT_S_IFDIR);
	x = look(&t, d1, "x", 4, QFT_S_IFREG);
	y = look(&t, d2, "y", 5, QFT_S_IFREG);

	/* A move keeps the node and gives it the new path. */
	qn_rename(&t, d1, "x", d2, "x2", false);
	CHECK_PATH(&t, x, NULL, "d2/x2");
	CHECK(look(&t, d2, "x2", 4, QFT_S_IFREG) == x);
	CHECK_EQ(x->nlookup, 2);

	/* Over an existing name: the old owner is detached. */
	qn_rename(&t, d2, "x2", d2, "y", false);
	CHECK_PATH(&t, x, NULL, "d2/y");
	CHECK_NOPATH(&t, y, NULL, -ENOENT);
	CHECK(look(&t, d2, "y", 4, QFT_S_IFREG) == x);

	/* Exchange swaps both names. */
	z = look(&t, d1, "z", 6, QFT_S_IFREG);
	qn_rename(&t, d1, "z", d2, "y", true);
	CHECK_PATH(&t, z, NULL, "d2/y");
	CHECK_PATH(&t, x, NULL, "d1/z");
	/* Exchange with a name the table does not know moves the one it
	 * knows. */
	qn_rename(&t, d1, "z", d1, "unknown", true);
	CHECK_PATH(&t, x, NULL, "d1/unknown");

	/* Onto itself: nothing changes. */
	qn_rename(&t, d1, "unknown", d1, "unknown", false);
	CHECK_PATH(&t, x, NULL, "d1/unknown");

	/* A directory moves with what is below it. */
	qn_rename(&t, root, "d1", d2, "sub", false);
	CHECK_PATH(&t, x, NULL, "d2/sub/unknown");
	CHECK_PATH(&t, d1, NULL, "d2/sub");

	/* A source the table does not know still detaches the target. */
	qn_rename(&t, root, "nothing", d2, "y", false);
	CHECK_NOPATH(&t, z, NULL, -ENOENT);

	qn_table_destroy(&t, NULL);
}

static void test_forget(void)
{
	struct qn_table t;
	struct qn_node *root, *d, *f;

	check_ctx("forget");
	CHECK_EQ(qn_table_init(&t), 0);
	root = &t.root;
	d = look(&t, root, "d", 2, QFT_S_IFDIR);
	f = look(&t, d, "f", 3, QFT_S_IFREG);
	f = look(&t, d, "f", 3, QFT_S_IFREG);
	CHECK_EQ(t.count, 2);

	/* A directory with a child lives on without lookups. */
	qn_forget(&t, d, 1);
	CHECK_EQ(t.count, 2);
	CHECK_PATH(&t, f, NULL, "d/f");
	/* One lookup of two forgotten: still there. */
	qn_forget(&t, f, 1);
	CHECK_EQ(t.count, 2);
	/* The last one frees the file, and then its parent. */
	qn_forget(&t, f, 1);
	CHECK_EQ(t.count, 0);

	/* More forgotten than known is clamped (and logged). */
	d = look(&t, root, "d", 2, QFT_S_IFDIR);
	qn_forget(&t, d, 5);
	CHECK_EQ(t.count, 0);

	/* Forgetting the root does nothing. */
	qn_forget(&t, root, 1);
	CHECK_PATH(&t, root, NULL, "");

	/* A detached node is freed by its last forget, its old parent
	 * stays while it has lookups. */
	d = look(&t, root, "d", 2, QFT_S_IFDIR);
	f = look(&t, d, "f", 3, QFT_S_IFREG);
	qn_remove(&t, d, "f");
	CHECK_EQ(t.count, 1);
	qn_remove(&t, d, "f"); /* unknown name: nothing */
	CHECK_EQ(t.count, 1);
	qn_forget(&t, f, 1);
	CHECK_PATH(&t, d, NULL, "d");
	qn_forget(&t, d, 1);
	CHECK_EQ(t.count, 0);
	qn_table_destroy(&t, NULL);
}

/* Provisional inode numbers (node.h): stable for a node's life, shared
 * by the other names of its server inode, gone with it. */
static void test_shown_ino(void)
{
	struct qn_table t;
	struct qn_node *root, *f, *g, *h;
	struct qft_attr a;
	uint64_t v;

	check_ctx("shown_ino");
	CHECK_EQ(qn_table_init(&t), 0);
	root = &t.root;
	/* Server numbers pass through while nothing is provisional. */
	g = look(&t, root, "g", 40, QFT_S_IFREG);
	CHECK_EQ(qn_shown_ino(&t, g, 40), 40);
	CHECK_EQ(qn_shown_ino(&t, NULL, 41), 41);

	/* A pipelined create: rino 0, a number from the reserved range. */
	f = look(&t, root, "f", 0, QFT_S_IFREG);
	v = qn_provisional_ino(&t, f);
	CHECK(v > QN_VINO_BASE);
	CHECK_EQ(qn_provisional_ino(&t, f), v);
	CHECK_EQ(qn_shown_ino(&t, f, 0), v);
	CHECK_EQ(qn_shown_child_ino(&t, root, "f", 0), v);
	/* Another create gets another number. */
	h = look(&t, root, "h", 0, QFT_S_IFREG);
	CHECK(qn_provisional_ino(&t, h) != v);

	/* The server answers: the node keeps its number, and the server's
	 * number shows as it for every name of that inode. */
	a = attr(50, QFT_S_IFREG);
	a.nlink = 2;
	qn_note_created(&t, f, &a);
	CHECK_EQ(qn_rino(&t, f), 50);
	CHECK_EQ(qn_shown_ino(&t, f, 50), v);
	CHECK_EQ(qn_shown_ino(&t, NULL, 50), v);
	CHECK_EQ(qn_shown_child_ino(&t, root, "link", 50), v);
	g = look(&t, root, "link", 50, QFT_S_IFREG);
	CHECK_EQ(qn_shown_ino(&t, g, 50), v);

	/* Forgotten, the node takes its number along: the server's shows. */
	qn_forget(&t, f, 1);
	CHECK_EQ(qn_shown_ino(&t, NULL, 50), 50);
	CHECK_EQ(qn_shown_ino(&t, g, 50), 50);
	qn_table_destroy(&t, NULL);
}

static int dropped;

static void drop(struct qn_file *f)
{
	CHECK(f->node == NULL);
	dropped++;
}

static bool count_file(struct qn_file *f, void *ctx)
{
	(*(int *)ctx)++;
	return false;
}

static bool stop_at_first(struct qn_file *f, void *ctx)
{
	(*(int *)ctx)++;
	return true;
}

static void test_files(void)
{
	struct qn_table t;
	struct qn_file f1, f2, *b;
	struct qn_node *root, *n;
	struct qft_attr a;
	bool same;
	int k;

	check_ctx("files");
	memset(&f1, 0, sizeof(f1));
	memset(&f2, 0, sizeof(f2));
	CHECK_EQ(qn_table_init(&t), 0);
	root = &t.root;
	n = look(&t, root, "f", 3, QFT_S_IFREG);
	CHECK(qn_file_borrow(&t, n) == NULL);
	qn_file_attach(&t, n, &f1, 7);
	CHECK_EQ(f1.handle, 7);
	CHECK(qn_file_node(&t, &f1) == n);

	/* An open file keeps its node alive past the last lookup, and
	 * without a name. */
	qn_forget(&t, n, 1);
	CHECK_EQ(t.count, 1);
	qn_remove(&t, root, "f");
	CHECK_EQ(t.count, 0);
	CHECK_NOPATH(&t, n, NULL, -ENOENT);

	/* Borrowers and the kernel: only the last reference closes. */
	b = qn_file_borrow(&t, n);
	CHECK(b == &f1);
	CHECK_EQ(f1.refs, 2);
	CHECK(!qn_file_detach(&t, &f1));
	/* Detached: no longer lent out, but alive for its borrower. */
	CHECK(qn_file_borrow(&t, n) == NULL);
	CHECK(qn_file_node(&t, &f1) == n);
	CHECK(qn_file_put(&t, &f1));
	CHECK(qn_file_node(&t, &f1) == NULL);

	/* Two files of one node, the callback over them, early stop. */
	n = look(&t, root, "g", 4, QFT_S_IFREG);
	qn_file_attach(&t, n, &f1, 8);
	qn_file_attach(&t, n, &f2, 9);
	k = 0;
	qn_for_each_file(&t, n, count_file, &k);
	CHECK_EQ(k, 2);
	k = 0;
	qn_for_each_file(&t, n, stop_at_first, &k);
	CHECK_EQ(k, 1);
	k = 0;
	qn_for_each_file(&t, NULL, count_file, &k);
	CHECK_EQ(k, 0);
	b = qn_file_borrow(&t, n);
	CHECK(b == &f1 || b == &f2);
	CHECK(!qn_file_put(&t, b));
	CHECK(qn_file_detach(&t, &f2));
	k = 0;
	qn_for_each_file(&t, n, count_file, &k);
	CHECK_EQ(k, 1);

	/* Attributes: size and mtime decide whether cached pages stay. */
	a = attr(4, QFT_S_IFREG);
	a.size = 10;
	qn_note_attr(&t, n, &a, &same);
	CHECK(!same);
	qn_note_attr(&t, n, &a, &same);
	CHECK(same);
	a.mtime.nsec = 1;
	qn_note_attr(&t, n, &a, &same);
	CHECK(!same);
	CHECK(!qn_replaced(&t, n, &a, true));
	a.ino = 5;
	CHECK(qn_replaced(&t, n, &a, true));
	CHECK(!qn_replaced(&t, n, &a, false));
	a = attr(4, QFT_S_IFDIR);
	CHECK(qn_replaced(&t, n, &a, false));
	CHECK_EQ(qn_noxattr_until(&t, n), 0);
	qn_set_noxattr_until(&t, n, 1234);
	CHECK_EQ(qn_noxattr_until(&t, n), 1234);

	/* Still open at the end: handed to drop_file. */
	dropped = 0;
	qn_table_destroy(&t, drop);
	CHECK_EQ(dropped, 1);
}

static struct qn_node *look_linked(struct qn_table *t,
				   struct qn_node *parent, const char *name,
				   uint64_t ino, uint32_t nlink)
{
	struct qft_attr a = attr(ino, QFT_S_IFREG);

	a.nlink = nlink;
	return qn_lookup(t, parent, name, &a);
}

/* Hard links: every name of a linked file is one node, which keeps a path
 * while it has a name and is detached with its last. */
static void test_links(void)
{
	struct qn_table t;
	struct qn_node *root, *d1, *d2, *a, *b, *c, *o;
	struct qft_attr at;

	check_ctx("links");
	CHECK_EQ(qn_table_init(&t), 0);
	root = &t.root;
	d1 = look(&t, root, "d1", 2, QFT_S_IFDIR);
	d2 = look(&t, root, "d2", 3, QFT_S_IFDIR);
	a = look_linked(&t, d1, "a", 10, 1);
	/* A name with the same number but one link is another object. */
	o = look_linked(&t, d1, "other", 10, 1);
	CHECK(o != a);
	qn_remove(&t, d1, "other");
	/* The newest node of a number is the one found: "a" again. */
	a = look_linked(&t, d1, "a", 10, 1);
	/* Linked (LINK's answer): one node, the new name first. */
	at = attr(10, QFT_S_IFREG);
	at.nlink = 2;
	CHECK(qn_link(&t, a, d2, "b", &at) == a);
	CHECK_EQ(a->nlookup, 3);
	CHECK_PATH(&t, a, NULL, "d2/b");
	/* Found by a lookup of a name made behind the client: the same. */
	c = look_linked(&t, d1, "c", 10, 3);
	CHECK(c == a);
	CHECK_PATH(&t, a, NULL, "d1/c");
	b = look_linked(&t, d2, "b", 10, 3);
	CHECK(b == a);
	CHECK_EQ(t.count, 5);
	/* A directory with the same number never merges. */
	o = look(&t, root, "dir10", 10, QFT_S_IFDIR);
	CHECK(o != a);
	/* Another type neither. */
	at = attr(10, QFT_S_IFLNK);
	at.nlink = 3;
	CHECK(qn_lookup(&t, root, "lnk", &at) != a);

	/* A name the server told of (maybe gone) is used last. */
	qn_child_attr_stale(&t, d1, "c");
	CHECK_PATH(&t, a, NULL, "d2/b");
	CHECK(look_linked(&t, d1, "c", 10, 3) == a);
	CHECK_PATH(&t, a, NULL, "d1/c");
	b = look_linked(&t, d2, "b", 10, 3);
	/* Unlinking the name the paths use switches to another, and
	 * counts one link less. */
	qn_remove(&t, d2, "b");
	CHECK_PATH(&t, a, NULL, "d1/c");
	CHECK(qn_get_attr(&t, a, &at));
	CHECK_EQ(at.nlink, 2);
	/* Renaming one name away: the node follows to the new one. */
	qn_rename(&t, d1, "c", d2, "moved", false);
	CHECK_PATH(&t, a, NULL, "d2/moved");
	/* A rename of one link onto another does nothing. */
	qn_rename(&t, d2, "moved", d1, "a", false);
	CHECK_PATH(&t, a, NULL, "d2/moved");
	CHECK(look_linked(&t, d1, "a", 10, 2) == a);
	/* Renamed over by another file: that name goes, the node stays. */
	o = look(&t, d1, "x", 11, QFT_S_IFREG);
	qn_rename(&t, d1, "x", d2, "moved", false);
	CHECK_PATH(&t, a, NULL, "d1/a");
	CHECK_PATH(&t, o, NULL, "d2/moved");
	/* A name that now leads to another object leaves the node. */
	CHECK(look(&t, d1, "a", 12, QFT_S_IFREG) != a);
	CHECK_NOPATH(&t, a, NULL, -ENOENT);
	/* Detached, it is not found by number any more. */
	CHECK(look_linked(&t, d1, "again", 10, 2) != a);
	/* Its last lookup frees it, with the names (ASan: no leak). */
	qn_forget(&t, a, a->nlookup);
	qn_table_destroy(&t, NULL);
}

int main(void)
{
	test_lookup();
	test_paths();
	test_rename();
	test_forget();
	test_shown_ino();
	test_links();
	test_files();
	return check_exit("test_node");
}
