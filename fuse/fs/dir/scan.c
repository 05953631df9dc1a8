// SPDX-License-Identifier: MIT
/*
 * SCAN: a walked tree's listings fetched in a few replies (see
 * dircache.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* ---- SCAN: a subtree's listings in a few replies ---- */

/* A directory a SCAN announced (index 0: the scanned one).  This and
 * struct scan are the scanning thread's own, no lock. */
struct sdir {
	uint32_t parent;        /* index */
	char *name;             /* NULL for index 0 */
	struct qft_attr attr;
	struct bent *e;
	size_t n, cap;
	bool complete;          /* its DIR_END said status 0 */
	bool watched;           /* WATCHED came before it: a lease */
	struct qn_node *node;   /* made at install, with a reference */
};

struct scan {
	struct sdir *d;
	size_t nd, cap;
	size_t entries, limit;
	bool stop;              /* over the limit: nothing more is taken */
};

static void scan_free(struct qc_fs *fs, struct scan *sc)
{
	for (size_t i = 0; i < sc->nd; i++) {
		struct sdir *sd = &sc->d[i];

		for (size_t j = 0; j < sd->n; j++)
			free(sd->e[j].name);
		free(sd->e);
		free(sd->name);
		if (i && sd->node)
			qn_unref(&fs->nodes, sd->node);
	}
	free(sc->d);
}

static int scan_announce(struct scan *sc, uint32_t parent, const char *name,
			 const struct qft_attr *a)
{
	struct sdir *sd;

	if (sc->nd == sc->cap) {
		size_t nc = sc->cap ? sc->cap * 2 : 64;
		struct sdir *nd = realloc(sc->d, nc * sizeof(*nd));

		if (!nd)
			return -ENOMEM;
		sc->d = nd;
		sc->cap = nc;
	}
	sd = &sc->d[sc->nd];
	memset(sd, 0, sizeof(*sd));
	sd->parent = parent;
	if (name) {
		sd->name = strdup(name);
		if (!sd->name)
			return -ENOMEM;
		sd->attr = *a;
	}
	sc->nd++;
	return 0;
}

static int scan_add(struct scan *sc, const struct qft_scan_rec *rec)
{
	struct sdir *sd = &sc->d[rec->index];

	if (sd->n == sd->cap) {
		size_t nc = sd->cap ? sd->cap * 2 : 16;
		struct bent *ne = realloc(sd->e, nc * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		sd->e = ne;
		sd->cap = nc;
	}
	sd->e[sd->n].name = strdup(rec->name.s);
	if (!sd->e[sd->n].name)
		return -ENOMEM;
	sd->e[sd->n++].attr = rec->attr;
	sc->entries++;
	return 0;
}

/* Takes the records of one checked SCAN reply; -EPROTO when it does not
 * continue from where the last one stopped. */
static int scan_take(struct scan *sc, const struct qft_blob *data)
{
	struct qft_scan_rec rec;
	uint32_t base;
	struct qcur c;

	qcur_init(&c, data->p, data->len);
	if (qft_scan_head_decode(&c, &base) < 0 || base != sc->nd)
		return -EPROTO;
	while (!sc->stop && c.left && qft_scan_rec_decode(&c, &rec) == 0) {
		if (rec.kind == QFT_SCAN_REC_DIR_END) {
			sc->d[rec.index].complete = rec.status == 0;
			continue;
		}
		if (rec.kind == QFT_SCAN_REC_WATCHED) {
			sc->d[rec.index].watched = true;
			continue;
		}
		if (sc->entries >= sc->limit) {
			/* What is complete so far stays so; the rest is
			 * walked directory by directory. */
			sc->stop = true;
			break;
		}
		if (scan_add(sc, &rec) < 0 ||
		    ((rec.attr.mode & QFT_S_IFMT) == QFT_S_IFDIR &&
		     scan_announce(sc, rec.index, rec.name.s, &rec.attr) < 0)) {
			sc->stop = true;
			break;
		}
	}
	return 0;
}

/* One SCAN reply's records, checked and taken; when malformed, nothing
 * of the scan is trusted and -EPROTO. */
static int scan_reply(struct scan *sc, const struct qft_blob *data)
{
	int r = qft_scan_check(data);

	if (r >= 0)
		r = scan_take(sc, data);
	if (r < 0) {
		/* Before install no directory has a node: what the others
		 * took is freed here, or it would leak with every malformed
		 * reply a server sends. */
		for (size_t i = 1; i < sc->nd; i++) {
			struct sdir *sd = &sc->d[i];

			for (size_t j = 0; j < sd->n; j++)
				free(sd->e[j].name);
			free(sd->e);
			free(sd->name);
		}
		sc->nd = sc->nd ? 1 : 0;
		sc->d[0].complete = false;
		return -EPROTO;
	}
	return 0;
}

int qc_dir_scan_parse(const struct qft_blob *replies, size_t n, size_t limit,
		      size_t *dirs, size_t *entries, size_t *complete)
{
	struct scan sc = { 0 };
	int r = 0;

	sc.limit = limit ? limit : 1;
	if (scan_announce(&sc, 0, NULL, NULL) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n && !sc.stop && r == 0; i++)
		r = scan_reply(&sc, &replies[i]);
	*dirs = sc.nd;
	*entries = sc.entries;
	*complete = 0;
	for (size_t i = 0; i < sc.nd; i++)
		*complete += sc.d[i].complete;
	/* No node was made: nothing to release in the node table. */
	scan_free(NULL, &sc);
	return r;
}

/* The node of announced directory i (listing lock held: the table lock
 * nests inside it). */
static struct qn_node *scan_node(struct qc_fs *fs, struct scan *sc,
				 uint32_t i)
{
	struct sdir *sd = &sc->d[i];
	struct qn_node *p;

	if (sd->node || i == 0)
		return sd->node;
	p = scan_node(fs, sc, sd->parent);
	if (p)
		sd->node = qn_child_ref(&fs->nodes, p, sd->name, &sd->attr);
	return sd->node;
}

static void scan_install(struct qc_fs *fs, struct scan *sc,
			 const struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	bool strip = qc_hint_xattr_gen(fs) != fb->xgen;
	uint64_t top_dino, top_pino;
	struct listing *l;

	pthread_mutex_lock(&dc->lock);
	/* The client's own changes anywhere may be in the subtree. */
	if (qc_dir_spoiled(dc, fb->seq, NULL, 0, true))
		goto out_unlock;
	l = qc_dir_find_listing(dc, sc->d[0].node);
	top_dino = l ? l->dino : qn_rino(&fs->nodes, sc->d[0].node);
	top_pino = l ? l->pino : 0;
	for (uint32_t i = 0; i < sc->nd; i++) {
		struct sdir *sd = &sc->d[i];
		uint64_t dino = i ? sd->attr.ino : top_dino;
		uint64_t pino;
		struct qn_node *node;

		if (!sd->complete ||
		    qc_dir_spoiled(dc, fb->seq, NULL, dino, false)) {
			/* Not kept: nor is the watch it may have set. */
			if (sd->watched && dino)
				qc_dir_work_add(fs, WORK_UNWATCH, NULL, dino,
						NULL);
			continue;
		}
		node = scan_node(fs, sc, i);
		if (!node) {
			if (sd->watched && dino)
				qc_dir_work_add(fs, WORK_UNWATCH, NULL, dino,
						NULL);
			continue;
		}
		pino = i == 0 ? top_pino :
		       sd->parent ? sc->d[sd->parent].attr.ino : top_dino;
		l = qc_dir_listing_new(fs, node, dino, pino, fb->start_ns +
				       qc_dir_secs_ns(fs->entry_timeout),
				       fb->gen);
		if (!l)
			break;
		l->scanned = true;
		if (sd->watched && dino) {
			/* Watched since before the server read it. */
			l->leased = true;
			l->names_until = NEVER;
		}
		for (size_t j = 0; j < sd->n; j++) {
			if (strip)
				sd->e[j].attr.flags &= ~QFT_ATTR_NOXATTR;
			if (qc_dir_dent_put(dc, l, sd->e[j].name,
					    &sd->e[j].attr, fb->start_ns) < 0) {
				qc_dir_listing_drop(fs, l);
				l = NULL;
				break;
			}
		}
		if (l)
			qc_dir_evict(fs, l);
	}
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}


/*
 * Lists the subtree of `top` into the cache with SCAN: OPENDIR sent
 * without waiting, SCANs until EOF or the cache's half is filled, CLOSE
 * without waiting.  Failures only mean nothing is cached.
 */
static void scan(struct qc_fs *fs, struct qn_node *top)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	char path[QFT_MAX_PATH + 1];
	struct scan sc = { 0 };
	struct qc_dir_fetch fb;
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen, h;
	bool eof = false;
	int r;

	if (qn_path(&fs->nodes, top, NULL, path) < 0 ||
	    qc_conn_wait(fs->conn, &gen) < 0 ||
	    qc_handle_alloc(fs->conn, gen, &h) < 0)
		return;
	sc.limit = dc->max_entries / 2 ? dc->max_entries / 2 : 1;
	if (scan_announce(&sc, 0, NULL, NULL) < 0)
		goto out_free;
	sc.d[0].node = top;
	/* Begun before settling, as a LOOKUP is (ops.c, qc_lookup). */
	qc_dir_fetch_begin(fs, &fb);
	qc_step_settle(fs);
	atomic_fetch_add(&dc->scans, 1);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	/* The server runs requests in order: the SCAN behind it needs no
	 * wait for its reply (and fails with EBADF if it failed). */
	if (qc_call_async(fs->conn, gen, &m, qc_dir_ignore_reply, NULL) < 0) {
		qc_handle_free(fs->conn, gen, h);
		goto out_free;
	}
	while (!eof && !sc.stop) {
		qft_msg_init(&m, QFT_OP_SCAN, 0);
		m.handle = h;
		m.length = QFT_MAX_SCAN;
		/* Leases for the listings, where the server can watch. */
		m.opflags = QFT_SCAN_WATCH;
		r = qc_call_gen(fs->conn, gen, &m, &rep);
		if (r == -ENOSYS || r == -EOPNOTSUPP) {
			pthread_mutex_lock(&dc->lock);
			dc->scan_broken = true;
			pthread_mutex_unlock(&dc->lock);
		}
		if (r < 0) {
			qft_debug("dircache: SCAN of '%s': %s", path,
				  strerror(-r));
			break;
		}
		r = scan_reply(&sc, &rep.msg.data);
		eof = rep.msg.opflags & QFT_SCAN_EOF;
		qc_reply_free(&rep);
		if (r < 0) {
			qft_warn("malformed SCAN reply for '%s'", path);
			break;
		}
	}
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = h;
	(void)qc_send_noreply(fs->conn, gen, &m);
	qc_handle_free(fs->conn, gen, h);
	qft_debug("dircache: SCAN of '%s': %zu directories, %zu entries%s",
		  path, sc.nd, sc.entries, sc.stop ? " (stopped at the cap)" :
		  "");
	scan_install(fs, &sc, &fb);
out_free:
	scan_free(fs, &sc);
}

/*
 * A readdir of `dir` that the cache cannot answer: when its parent was
 * listed moments ago, something walks the tree, and the parent's whole
 * subtree is fetched at once (each listing once: a scan's own listings do
 * not start another).
 */
void qc_dir_maybe_scan(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	char name[QFT_MAX_NAME + 1];
	uint64_t now = qc_now_ns();
	struct qn_node *parent;
	struct listing *pl;
	bool walk = false;

	if (qn_parent_ref(&fs->nodes, dir, &parent, name) < 0)
		return;
	pthread_mutex_lock(&dc->lock);
	pl = qc_dir_valid_listing(fs, parent, now);
	if (pl && !dc->scan_broken && !pl->scanned && pl->walked_ns &&
	    now - pl->walked_ns < WALK_NS) {
		pl->scanned = true;
		walk = true;
	}
	pthread_mutex_unlock(&dc->lock);
	if (walk)
		scan(fs, parent);
	qn_unref(&fs->nodes, parent);
}
