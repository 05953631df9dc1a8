// SPDX-License-Identifier: MIT
/* Handle table (see handle.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cred.h"
#include "handle.h"
#include "protocol.h"
#include "scan.h"

void srv_handle_init(struct srv_handles *t)
{
	t->tab = NULL;
	t->cap = 0;
	t->ndirs = 0;
	t->scan_mem = 0;
}

static int close_entry(struct srv_handles *t, struct srv_handle *e)
{
	int ret = 0;

	if (e->kind == SRV_H_DIR) {
		srv_scan_free(t, e->scan);
		if (closedir(e->dir) < 0)
			ret = -errno;
	} else if (e->kind == SRV_H_FILE) {
		/* After close() the descriptor is gone even on EINTR. */
		if (close(e->fd) < 0 && errno != EINTR)
			ret = -errno;
		/* Its writes were waited for (the handle's operations were
		 * drained) and their errors are the FLUSH's. */
		if (e->dfd >= 0)
			(void)close(e->dfd);
	}
	srv_cred_put(e->cred);
	memset(e, 0, sizeof(*e));
	e->fd = -1;
	return ret;
}

void srv_handle_destroy(struct srv_handles *t)
{
	for (size_t h = 1; h < t->cap; h++)
		close_entry(t, &t->tab[h]);
	free(t->tab);
	t->tab = NULL;
	t->cap = 0;
	t->ndirs = 0;
}

int srv_handle_get(struct srv_handles *t, uint64_t h,
		   enum srv_handle_kind kind, struct srv_handle **out)
{
	struct srv_handle *e;

	if (h == 0 || h >= t->cap)
		return -EBADF;
	e = &t->tab[h];
	if (e->kind == SRV_H_FREE || (kind != SRV_H_ANY && e->kind != kind))
		return -EBADF;
	*out = e;
	return 0;
}

int srv_handle_reserve(struct srv_handles *t, uint64_t h,
		       struct srv_handle **out)
{
	if (h == 0 || h > QFT_MAX_HANDLES)
		return -EBADF;
	if (h >= t->cap) {
		size_t cap = t->cap ? t->cap : 64;
		struct srv_handle *tab;

		while (cap <= h)
			cap *= 2;
		if (cap > (size_t)QFT_MAX_HANDLES + 1)
			cap = (size_t)QFT_MAX_HANDLES + 1;
		tab = realloc(t->tab, cap * sizeof(*tab));
		if (!tab)
			return -ENOMEM;
		for (size_t i = t->cap; i < cap; i++) {
			memset(&tab[i], 0, sizeof(tab[i]));
			tab[i].fd = -1;
		}
		t->tab = tab;
		t->cap = cap;
	}
	if (t->tab[h].kind != SRV_H_FREE)
		return -EBADF;
	*out = &t->tab[h];
	return 0;
}

void srv_handle_set_file(struct srv_handle *e, int fd)
{
	memset(e, 0, sizeof(*e));
	e->kind = SRV_H_FILE;
	e->fd = fd;
	e->dfd = -1;
}

void srv_handle_set_dir(struct srv_handles *t, struct srv_handle *e,
			DIR *dir)
{
	t->ndirs++;
	memset(e, 0, sizeof(*e));
	e->kind = SRV_H_DIR;
	e->dir = dir;
	e->fd = dirfd(dir);
}

int srv_handle_close(struct srv_handles *t, uint64_t h)
{
	struct srv_handle *e;
	int r;

	if ((r = srv_handle_get(t, h, SRV_H_ANY, &e)) < 0)
		return r;
	if (e->kind == SRV_H_DIR)
		t->ndirs--;
	return close_entry(t, e);
}
