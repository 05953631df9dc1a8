// SPDX-License-Identifier: MIT
/*
 * Listings built from READDIR PLUS replies: collected by a readdir from
 * cookie 0 to EOF, or read whole for a directory with many lookups, and
 * installed unless a change raced with them (see dircache.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/dir/internal.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/hints.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"

/* ---- listings collected from READDIR PLUS ---- */

/* What a READDIR for the cache asks for: attributes, and a lease (a
 * server without change notification ignores WATCH). */
#define READDIR_CACHE_FLAGS (QFT_READDIR_PLUS | QFT_READDIR_WATCH)

void qc_dir_build_free(struct qc_dir_build *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		free(b->e[i].name);
	free(b->e);
	free(b);
}

/* A reply without WATCHED makes the collection unleased. */
void qc_dir_build_note_watched(struct qc_dir_build *b,
			       const struct qc_reply *rep)
{
	if (!(rep->msg.opflags & QFT_READDIR_WATCHED))
		b->watched = false;
}

struct qc_dir_build *qc_dir_build_new(struct qc_fs *fs)
{
	struct qc_dir_build *b = calloc(1, sizeof(*b));

	if (b) {
		qc_dir_fetch_begin(fs, &b->fb);
		b->watched = true;
	}
	return b;
}

/* A collection given up before its end: its watch goes back too. */
void qc_dir_build_abandon(struct qc_fs *fs, struct qc_dir_build *b)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	if (!b)
		return;
	if (b->watched && b->dino) {
		pthread_mutex_lock(&dc->lock);
		qc_dir_work_add(fs, WORK_UNWATCH, NULL, b->dino, NULL);
		pthread_mutex_unlock(&dc->lock);
	}
	qc_dir_build_free(b);
}

/* Adds the entries of one checked READDIR PLUS reply. */
void qc_dir_build_add(struct qc_fs *fs, struct qc_dir_build *b,
		      const struct qft_blob *data)
{
	struct qft_dirent d;
	struct qcur c;

	qcur_init(&c, data->p, data->len);
	while (!b->failed && c.left && qft_dirent_decode(&c, &d, true) == 0) {
		b->next = d.off;
		if (strcmp(d.name.s, ".") == 0) {
			b->dino = d.ino;
			continue;
		}
		if (strcmp(d.name.s, "..") == 0) {
			b->pino = d.ino;
			continue;
		}
		if (!d.has_attr || b->n >= qc_dir_of(fs)->max_entries) {
			b->failed = true;
			break;
		}
		if (b->n == b->cap) {
			size_t nc = b->cap ? b->cap * 2 : 64;
			struct bent *ne = realloc(b->e, nc * sizeof(*ne));

			if (!ne) {
				b->failed = true;
				break;
			}
			b->e = ne;
			b->cap = nc;
		}
		b->e[b->n].name = strdup(d.name.s);
		if (!b->e[b->n].name) {
			b->failed = true;
			break;
		}
		b->e[b->n++].attr = d.attr;
	}
}

/* Installs a collected listing of `dir` that reached EOF, unless a change
 * may have raced with it. */
void qc_dir_build_install(struct qc_fs *fs, struct qn_node *dir,
			  struct qc_dir_build *b)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	bool strip = qc_hint_xattr_gen(fs) != b->fb.xgen;
	struct listing *l;

	pthread_mutex_lock(&dc->lock);
	if (b->failed || qc_dir_spoiled(dc, b->fb.seq, dir, b->dino, false)) {
		qft_debug("dircache: listing of inode %llu not kept (%s)",
			  (unsigned long long)b->dino,
			  b->failed ? "incomplete" : "changed meanwhile");
		/* Not kept: nor is the watch it may have set. */
		if (b->watched && b->dino)
			qc_dir_work_add(fs, WORK_UNWATCH, NULL, b->dino, NULL);
		goto out_unlock;
	}
	l = qc_dir_listing_new(fs, dir, b->dino, b->pino, b->fb.start_ns +
			       qc_dir_secs_ns(fs->entry_timeout), b->fb.gen);
	if (!l)
		goto out_unlock;
	if (b->watched && b->dino) {
		/* The server watches it since before it read the entries. */
		l->leased = true;
		l->names_until = NEVER;
	}
	for (size_t i = 0; i < b->n; i++) {
		if (strip)
			b->e[i].attr.flags &= ~QFT_ATTR_NOXATTR;
		if (qc_dir_dent_put(dc, l, b->e[i].name, &b->e[i].attr,
				    b->fb.start_ns) < 0) {
			qc_dir_listing_drop_unwatch(fs, l);
			goto out_unlock;
		}
	}
	l->walked_ns = qc_now_ns();
	qc_dir_evict(fs, l);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}
/* ---- lookups ---- */

/*
 * A lookup in `dir` the cache could not answer: true when it is the
 * second one within WALK_NS of a directory without a listing, i.e. when
 * something looks up many names there (stat of many files, git status,
 * make) and reading the directory whole costs less than a lookup each.
 */
bool qc_dir_busy(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	uint64_t now = qc_now_ns();
	bool busy = false;
	size_t i;

	pthread_mutex_lock(&dc->lock);
	if (!qc_dir_find_listing(dc, dir)) {
		i = qc_dir_ptr_bucket(dc, dir) & (PROBES - 1);
		if (dc->probes[i].dir != dir ||
		    now - dc->probes[i].since > WALK_NS) {
			dc->probes[i].dir = dir;
			dc->probes[i].misses = 0;
			dc->probes[i].since = now;
		}
		busy = ++dc->probes[i].misses == 2;
	}
	pthread_mutex_unlock(&dc->lock);
	return busy;
}

/*
 * Reads `dir` into the cache when it fits one READDIR reply: OPENDIR not
 * waited for, one READDIR PLUS, CLOSE not waited for.  A bigger one is
 * left alone (its lookups go to the server one by one, as before).
 */
void qc_dir_fetch_listing(struct qc_fs *fs, struct qn_node *dir)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_dir_build *b;
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen, h;
	int r;

	if (qn_path(&fs->nodes, dir, NULL, path) < 0 ||
	    qc_conn_wait(fs->conn, &gen) < 0 ||
	    qc_handle_alloc(fs->conn, gen, &h) < 0)
		return;
	/* Begun before settling, as a LOOKUP is (ops.c, qc_lookup). */
	b = qc_dir_build_new(fs);
	if (!b)
		goto out_free_handle;
	qc_step_settle(fs);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	if (qc_call_async(fs->conn, gen, &m, qc_dir_ignore_reply, NULL) < 0)
		goto out_free_build;
	qft_msg_init(&m, QFT_OP_READDIR, 0);
	m.handle = h;
	m.length = QFT_MAX_READDIR;
	m.opflags = READDIR_CACHE_FLAGS;
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r == 0) {
		qc_dir_build_note_watched(b, &rep);
		if (qc_readdir_check(&rep.msg.data, true) < 0)
			b->failed = true;
		else
			qc_dir_build_add(fs, b, &rep.msg.data);
		if (!(rep.msg.opflags & QFT_READDIR_EOF))
			b->failed = true;
		qc_dir_build_install(fs, dir, b);
		qc_reply_free(&rep);
	}
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = h;
	(void)qc_send_noreply(fs->conn, gen, &m);
out_free_build:
	qc_dir_build_free(b);
out_free_handle:
	qc_handle_free(fs->conn, gen, h);
}
