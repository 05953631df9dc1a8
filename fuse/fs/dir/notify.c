// SPDX-License-Identifier: MIT
/*
 * Change notification: the server's NOTIFY frames drop or correct
 * listings, and a worker thread invalidates the kernel's caches and gives
 * watches back (see dircache.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/dir/internal.h"
#include "fs/fs.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"

/* ---- leases: notifications, the worker ---- */

/* How often the worker looks for a new link while it holds invalidations
 * back (qc_dir_work_add_names). */
#define HELD_TICK_MS 250

/*
 * After an UNWATCH of `ino` was sent: a READDIR WATCH sent before it may
 * have put a watch in place that the UNWATCH then removed, so no listing
 * of that directory may count as leased, and no fetch begun before now
 * may install one (the event).
 */
static void unwatched(struct qc_fs *fs, uint64_t ino)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l, *next;

	pthread_mutex_lock(&dc->lock);
	qc_dir_record(dc, NULL, ino, false);
	for (l = dc->by_ino[qc_dir_ino_bucket(dc, ino)]; l; l = next) {
		next = l->inext;
		if (l->dino == ino && l->leased)
			qc_dir_listing_drop(fs, l);
	}
	pthread_mutex_unlock(&dc->lock);
}

static void work_do(struct qc_fs *fs, struct work *w)
{
	struct qft_msg m;
	struct qn_node *n;

	switch (w->kind) {
	case WORK_INVAL_ENTRY:
		/* The inode first: once the name is seen gone, another name
		 * of a linked file must not show the old link count. */
		n = qn_find_ref(&fs->nodes, w->dir, w->name);
		if (n) {
			(void)fuse_lowlevel_notify_inval_inode(fs->se,
				qn_to_ino(&fs->nodes, n), 0, 0);
			qn_unref(&fs->nodes, n);
		}
		/* -ENOENT: the kernel had nothing of it cached, fine. */
		(void)fuse_lowlevel_notify_inval_entry(fs->se,
			qn_to_ino(&fs->nodes, w->dir), w->name,
			strlen(w->name));
		break;
	case WORK_INVAL_INODE:
		(void)fuse_lowlevel_notify_inval_inode(fs->se,
			qn_to_ino(&fs->nodes, w->dir), -1, 0);
		break;
	case WORK_INVAL_NAMES:
		for (const char *p = w->names; w->names && w->nnames--;
		     p += strlen(p) + 1)
			(void)fuse_lowlevel_notify_inval_entry(fs->se,
				qn_to_ino(&fs->nodes, w->dir), p, strlen(p));
		(void)fuse_lowlevel_notify_inval_inode(fs->se,
			qn_to_ino(&fs->nodes, w->dir), -1, 0);
		break;
	case WORK_UNWATCH:
		qft_msg_init(&m, QFT_OP_UNWATCH, 0);
		m.ino = w->ino;
		/* No link: its watches went with it.  One being resumed
		 * keeps them, but a send would wait for it, holding up this
		 * thread and the unmount that stops it: the watch is left
		 * to end with the session. */
		if (!qc_conn_lost(fs->conn))
			(void)qc_send_noreply(fs->conn,
					      qc_conn_gen(fs->conn), &m);
		unwatched(fs, w->ino);
		break;
	}
}

/* Sleeps HELD_TICK_MS at most (listing lock held). */
static void held_wait(struct qc_dircache *dc)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += HELD_TICK_MS * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	(void)pthread_cond_timedwait(&dc->work_cond, &dc->lock, &ts);
}

/*
 * The worker: invalidates the kernel's caches and gives watches back.
 * fuse_lowlevel_notify_inval_* may wait for the kernel, which may be
 * waiting for a reply only the connection's reader delivers; so this is
 * never done on the reader, nor with the listing lock held.
 */
void *qc_dir_worker_main(void *arg)
{
	struct qc_fs *fs = arg;
	struct qc_dircache *dc = qc_dir_of(fs);
	struct work *w;

	pthread_mutex_lock(&dc->lock);
	for (;;) {
		while (!dc->work_head && !dc->work_stop) {
			if (!dc->held_head) {
				pthread_cond_wait(&dc->work_cond, &dc->lock);
				continue;
			}
			/* Put off until a new link is up: no hook says so,
			 * so it is looked at now and then. */
			if (qc_dir_link_gen(fs)) {
				dc->work_head = dc->held_head;
				dc->work_tail = dc->held_tail;
				dc->held_head = NULL;
				dc->held_tail = &dc->held_head;
				continue;
			}
			held_wait(dc);
		}
		if (dc->work_stop)
			break;
		w = dc->work_head;
		dc->work_head = w->next;
		if (!dc->work_head)
			dc->work_tail = &dc->work_head;
		dc->nwork--;
		pthread_mutex_unlock(&dc->lock);
		work_do(fs, w);
		if (w->dir)
			qn_unref(&fs->nodes, w->dir);
		free(w->names);
		free(w);
		pthread_mutex_lock(&dc->lock);
	}
	pthread_mutex_unlock(&dc->lock);
	return NULL;
}

static void work_free_all(struct qc_fs *fs, struct work *w)
{
	while (w) {
		struct work *next = w->next;

		if (w->dir)
			qn_unref(&fs->nodes, w->dir);
		free(w->names);
		free(w);
		w = next;
	}
}

/* Drops the work left (worker stopped or never started). */
void qc_dir_work_clear(struct qc_fs *fs)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	pthread_mutex_lock(&dc->lock);
	work_free_all(fs, dc->work_head);
	work_free_all(fs, dc->held_head);
	dc->work_head = dc->held_head = NULL;
	dc->work_tail = &dc->work_head;
	dc->held_tail = &dc->held_head;
	dc->nwork = 0;
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_notify(void *ctx, uint64_t dir_ino, uint32_t kind,
		   const char *name, size_t namelen)
{
	struct qc_fs *fs = ctx;
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l, *next;

	if (!dc)
		return;
	atomic_fetch_add(&dc->notices, 1);
	pthread_mutex_lock(&dc->lock);
	if (kind == QFT_NOTIFY_ALL) {
		/*
		 * The link died, or the server lost track of changes: no
		 * lease holds, and the listings go.  The kernel forgets the
		 * names it was given from them (qc_dir_work_add_names): at
		 * once when the server lost track, once a new link is up
		 * when the link died.
		 */
		qc_dir_record(dc, NULL, 0, true);
		for (l = dc->lru.next; l != &dc->lru; l = next) {
			next = l->next;
			qc_dir_work_add_names(fs, l);
			qc_dir_listing_drop(fs, l);
		}
		goto out_unlock;
	}
	qc_dir_record(dc, NULL, dir_ino, false);
	for (l = dc->by_ino[qc_dir_ino_bucket(dc, dir_ino)]; l; l = next) {
		next = l->inext;
		if (l->dino != dir_ino)
			continue;
		/* Its own mtime changed: its entry in its parent's listing
		 * is asked for again. */
		qn_touch(&fs->nodes, l->dir);
		/* What a node holds of the name (qn_note_fetched) must not
		 * answer the getattr the kernel makes again. */
		if (kind == QFT_NOTIFY_CHANGED && namelen)
			qn_child_attr_stale(&fs->nodes, l->dir, name);
		else if (kind == QFT_NOTIFY_CHANGED)
			qn_names_changed(&fs->nodes);
		if (kind == QFT_NOTIFY_CHANGED && namelen) {
			qc_dir_work_add(fs, WORK_INVAL_ENTRY, l->dir, 0, name);
			(void)qc_dir_mark_stale(fs, l, name);
		} else {
			if (l->leased)
				qc_dir_work_add_names(fs, l);
			else
				qc_dir_work_add(fs, WORK_INVAL_INODE, l->dir, 0,
						NULL);
			/* GONE: the server holds no watch any more. */
			if (kind == QFT_NOTIFY_GONE)
				qc_dir_listing_drop(fs, l);
			else
				qc_dir_listing_drop_unwatch(fs, l);
		}
	}
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}
