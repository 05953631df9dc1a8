// SPDX-License-Identifier: MIT
/* Subtree scans (see scan.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "errmap.h"
#include "handle.h"
#include "log.h"
#include "msg.h"
#include "path.h"
#include "protocol.h"
#include "scan.h"
#include "watch.h"

/* The limits (scan.h); test builds can lower them to reach them. */
static uint32_t max_entries = SRV_SCAN_MAX_ENTRIES;
static size_t mem_max = SRV_SCAN_MEM_MAX;

#ifdef QFT_FAULT_INJECTION
/* QFTFS_SCAN_LIMITS=ENTRIES,BYTES, read once, logged. */
static void limits_init(void)
{
	static bool done;
	unsigned long e, m;
	const char *env;

	if (done)
		return;
	done = true;
	env = getenv("QFTFS_SCAN_LIMITS");
	if (!env || sscanf(env, "%lu,%lu", &e, &m) != 2 || e > UINT32_MAX)
		return;
	max_entries = (uint32_t)e;
	mem_max = m;
	qft_warn("test scan limits armed: %lu entries, %lu bytes", e, m);
}
#else
static void limits_init(void)
{
}
#endif

/* A directory announced and not yet listed. */
struct scan_dir {
	struct scan_dir *next;
	size_t size;            /* what it counts against the connection */
	uint32_t index;
	bool via_link;          /* reached through a followed symlink:
				 * announced, never listed (scan.h) */
	uint32_t len;           /* of path */
	char path[];            /* below the scanned directory; "" for it */
};

struct srv_scan {
	int top;                /* O_PATH: the scanned directory */
	struct scan_dir *head;  /* queue, in index order */
	struct scan_dir *tail;
	struct scan_dir *cur;   /* being listed (off the queue), or NULL */
	DIR *dir;               /* cur's stream; NULL once it has ended */
	int status;             /* cur: -errno that left its listing
				 * incomplete, or 0 */
	/* Siblings are listed one after the other (breadth-first), so the
	 * parent of the last directory opened is kept open: each of them
	 * then costs one openat instead of a walk from the top. */
	int pfd;                /* O_PATH, or -1 */
	char *ppath;            /* its path below the top */
	size_t plen;
	/* The entry that did not fit the last reply, sent first next time. */
	char stash[QFT_MAX_NAME + 1];
	bool stashed;
	uint32_t next_index;    /* directories announced, index 0 included */
	uint32_t entries;       /* ENTRY records sent */
	bool follow;            /* --follow-symlinks (scan.h) */
	bool truncated;         /* something announced will not be listed */
	bool done;
	/* QFT_SCAN_WATCH: the session's watches, or NULL; cur is watched
	 * (as `key`) since before its first entry was read */
	struct srv_watch *watch;
	bool cur_watched;
	struct srv_watch_key key;
};

static bool is_dot_or_dotdot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

static void dir_free(struct srv_handles *t, struct scan_dir *d)
{
	t->scan_mem -= d->size;
	free(d);
}

/*
 * Queues directory `name` of `parent` (the scanned directory itself when
 * `parent` is NULL) as `index`.  False when the connection's budget or
 * memory is exhausted: the directory stays announced and is not listed.
 */
static bool enqueue(struct srv_handles *t, struct srv_scan *sc,
		    const struct scan_dir *parent, const char *name,
		    uint32_t index)
{
	size_t nlen = name ? strlen(name) : 0;
	size_t plen = parent ? parent->len : 0;
	size_t len = plen ? plen + 1 + nlen : nlen;
	size_t size = sizeof(struct scan_dir) + len + 1;
	struct scan_dir *d;

	if (len > UINT32_MAX || size > mem_max - t->scan_mem)
		return false;
	d = malloc(size);
	if (!d)
		return false;
	d->next = NULL;
	d->size = size;
	d->index = index;
	d->via_link = false;
	d->len = (uint32_t)len;
	if (plen) {
		memcpy(d->path, parent->path, plen);
		d->path[plen] = '/';
		memcpy(d->path + plen + 1, name, nlen);
	} else if (nlen) {
		memcpy(d->path, name, nlen);
	}
	d->path[len] = '\0';
	if (sc->tail)
		sc->tail->next = d;
	else
		sc->head = d;
	sc->tail = d;
	t->scan_mem += size;
	return true;
}

static void parent_forget(struct srv_scan *sc)
{
	if (sc->pfd >= 0)
		close(sc->pfd);
	free(sc->ppath);
	sc->pfd = -1;
	sc->ppath = NULL;
	sc->plen = 0;
}

/*
 * Opens the first `len` bytes of `path` below `top` as an O_PATH
 * directory, one component at a time, following none: a component that
 * became a symlink or a file since it was listed ends the walk (ELOOP,
 * ENOTDIR), and since the components are names from readdir (never "."
 * or ".."), nothing above `top` is reachable.
 */
static int walk(int top, const char *path, size_t len)
{
	char name[QFT_MAX_NAME + 1];
	size_t i = 0;
	int fd, nfd, r;

	fd = openat(top, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (i < len) {
		const char *slash = memchr(path + i, '/', len - i);
		size_t n = slash ? (size_t)(slash - (path + i)) : len - i;

		/* Queued names passed qft_name_valid(); this is a bug net. */
		if (n == 0 || n > QFT_MAX_NAME) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(name, path + i, n);
		name[n] = '\0';
		nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC);
		r = nfd < 0 ? -errno : 0;
		close(fd);
		if (r < 0)
			return r;
		fd = nfd;
		i += n + 1;
	}
	return fd;
}

/* Opens queued directory `d` for listing; 0 or a negative errno. */
static int open_dir(struct srv_scan *sc, const struct scan_dir *d,
		    DIR **out)
{
	const char *slash, *name;
	size_t plen;
	DIR *dir;
	int fd, r;

	if (d->len == 0) {
		fd = openat(sc->top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		slash = strrchr(d->path, '/');
		plen = slash ? (size_t)(slash - d->path) : 0;
		name = slash ? slash + 1 : d->path;
		if (sc->pfd < 0 || sc->plen != plen ||
		    memcmp(sc->ppath, d->path, plen) != 0) {
			char *p = malloc(plen + 1);

			if (!p)
				return -ENOMEM;
			r = walk(sc->top, d->path, plen);
			if (r < 0) {
				free(p);
				return r;
			}
			parent_forget(sc);
			memcpy(p, d->path, plen);
			p[plen] = '\0';
			sc->pfd = r;
			sc->ppath = p;
			sc->plen = plen;
		}
		fd = openat(sc->pfd, name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		r = -errno;
		close(fd);
		return r;
	}
	*out = dir;
	return 0;
}

/* Ends the listing of the current directory without its DIR_END. */
static void drop_cur(struct srv_handles *t, struct srv_scan *sc)
{
	if (sc->dir)
		closedir(sc->dir);
	sc->dir = NULL;
	if (sc->cur)
		dir_free(t, sc->cur);
	sc->cur = NULL;
	sc->stashed = false;
	sc->status = 0;
	sc->cur_watched = false;
}

/* Stops the scan where it stands: what is queued is never listed. */
static void cut(struct srv_handles *t, struct srv_scan *sc)
{
	drop_cur(t, sc);
	while (sc->head) {
		struct scan_dir *d = sc->head;

		sc->head = d->next;
		dir_free(t, d);
	}
	sc->tail = NULL;
	sc->done = true;
}

/* The DIR_END of the current directory, whose listing is over. */
static int put_dir_end(struct srv_handles *t, struct srv_scan *sc,
		       struct qbuf *out)
{
	struct qft_scan_rec rec;
	size_t start;
	int r;

	memset(&rec, 0, sizeof(rec));
	rec.index = sc->cur->index;
	/* WATCHED and DIR_END go in one reply, or neither does. */
	start = out->len;
	if (sc->cur_watched && sc->status == 0 &&
	    srv_watch_holds(sc->watch, &sc->key)) {
		rec.kind = QFT_SCAN_REC_WATCHED;
		if ((r = qft_scan_rec_encode(out, &rec)) < 0)
			return r;
	}
	rec.kind = QFT_SCAN_REC_DIR_END;
	rec.status = qft_status_from_errno(-sc->status);
	if ((r = qft_scan_rec_encode(out, &rec)) < 0) {
		out->len = start;
		return r;
	}
	drop_cur(t, sc);
	return 1;
}

/*
 * The ENTRY of `name` in the current directory, which announces it when
 * it is a directory.  1 when sent, 0 when there is nothing to send,
 * -EMSGSIZE when it does not fit (it is then stashed for the next reply).
 */
static int put_entry(struct srv_handles *t, struct srv_scan *sc,
		     const char *name, struct qbuf *out)
{
	size_t len = strlen(name);
	struct qft_scan_rec rec;
	bool followed;
	struct stat st;
	int r;

	if (is_dot_or_dotdot(name))
		return 0;
	if (!qft_name_valid(name, len)) {
		/* A name the protocol cannot carry (a filesystem with longer
		 * names): the listing can no longer be complete. */
		if (sc->status == 0)
			sc->status = -ENAMETOOLONG;
		return 0;
	}
	if (sc->entries >= max_entries) {
		qft_debug("SCAN: cut short after %u entries", sc->entries);
		sc->truncated = true;
		cut(t, sc);
		return 0;
	}
	memset(&rec, 0, sizeof(rec));
	rec.kind = QFT_SCAN_REC_ENTRY;
	rec.index = sc->cur->index;
	rec.name.s = name;
	rec.name.len = (uint32_t)len;
	r = srv_path_attr_at(dirfd(sc->dir), name, sc->follow, &st,
			     &rec.attr, &followed);
	if (r < 0) {
		/* Removed since readdir: as if it had been listed a moment
		 * later.  Anything else (EACCES without search permission)
		 * leaves the listing incomplete. */
		if (r != -ENOENT && sc->status == 0)
			sc->status = r;
		return 0;
	}
	if ((r = qft_scan_rec_encode(out, &rec)) < 0) {
		if (name != sc->stash)
			memcpy(sc->stash, name, len + 1);
		sc->stashed = true;
		return r;
	}
	sc->entries++;
	if (S_ISDIR(st.st_mode)) {
		/* Announced by this entry, listed or not; symlinks are
		 * directories here only when followed, and then queued just
		 * for their DIR_END. */
		uint32_t index = sc->next_index++;

		if (!enqueue(t, sc, sc->cur, name, index)) {
			if (!sc->truncated)
				qft_debug("SCAN: directory queue full (%zu "
					  "bytes); not every directory will "
					  "be listed", t->scan_mem);
			sc->truncated = true;
		} else if (followed) {
			sc->tail->via_link = true;
		}
	}
	return 1;
}

/*
 * One step of the scan: 1 when it added a record to `out`, 0 when it only
 * moved on, -EMSGSIZE when the next record does not fit in `out`.
 */
static int step(struct srv_handles *t, struct srv_scan *sc, struct qbuf *out)
{
	struct dirent *de;
	int r;

	if (!sc->cur) {
		if (!sc->head) {
			sc->done = true;
			return 0;
		}
		sc->cur = sc->head;
		sc->head = sc->cur->next;
		if (!sc->head)
			sc->tail = NULL;
		/* A directory that cannot be opened any more ends at once,
		 * its DIR_END carrying why; one behind a symlink is left to
		 * READDIR (scan.h). */
		if (sc->cur->via_link) {
			sc->status = -EXDEV;
			sc->dir = NULL;
			return 0;
		}
		sc->status = open_dir(sc, sc->cur, &sc->dir);
		if (sc->status < 0) {
			sc->dir = NULL;
		} else if (sc->watch) {
			/* Before the entries are read, as READDIR does: a
			 * change the listing misses is one the watch sees. */
			r = srv_watch_add(sc->watch, dirfd(sc->dir), &sc->key);
			sc->cur_watched = r == 0;
		}
		return 0;
	}
	if (!sc->dir)
		return put_dir_end(t, sc, out);
	if (sc->stashed) {
		r = put_entry(t, sc, sc->stash, out);
		if (r != -EMSGSIZE)
			sc->stashed = false;
		return r;
	}
	errno = 0;
	de = readdir(sc->dir);
	if (!de) {
		if (errno && sc->status == 0)
			sc->status = -errno;
		closedir(sc->dir);
		sc->dir = NULL;
		return 0;
	}
	return put_entry(t, sc, de->d_name, out);
}

static int start(struct srv_handles *t, struct srv_handle *h,
		 struct srv_scan **out)
{
	struct srv_scan *sc;
	int r;

	limits_init();
	if (sizeof(*sc) > mem_max - t->scan_mem)
		return -ENOMEM;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	/* Its own descriptor: READDIR on the handle keeps its position. */
	sc->top = openat(h->fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (sc->top < 0) {
		r = -errno;
		free(sc);
		return r;
	}
	t->scan_mem += sizeof(*sc);
	sc->pfd = -1;
	sc->next_index = 1;
	if (!enqueue(t, sc, NULL, NULL, 0)) {
		srv_scan_free(t, sc);
		return -ENOMEM;
	}
	*out = sc;
	return 0;
}

int srv_scan_step(struct srv_handles *t, struct srv_handle *h,
		  struct srv_watch *watch, bool follow, struct qbuf *out,
		  uint32_t *rflags)
{
	struct srv_scan *sc;
	unsigned nrec = 0;
	int r;

	*rflags = 0;
	if (!h->scan) {
		if ((r = start(t, h, &h->scan)) < 0)
			return r;
		h->scan->watch = watch;
		h->scan->follow = follow;
	}
	sc = h->scan;
	/* Every reply starts with the indexes announced before it, so the
	 * client can check that it missed none. */
	if ((r = qft_scan_head_encode(out, sc->next_index)) < 0)
		return r;
	while (!sc->done) {
		r = step(t, sc, out);
		if (r == -EMSGSIZE)
			break;
		if (r < 0)
			return r;
		nrec += (unsigned)r;
	}
	if (!sc->done && nrec == 0)
		return -EMSGSIZE;
	if (sc->done)
		*rflags = QFT_SCAN_EOF |
			  (sc->truncated ? QFT_SCAN_TRUNCATED : 0);
	return 0;
}

void srv_scan_free(struct srv_handles *t, struct srv_scan *sc)
{
	if (!sc)
		return;
	cut(t, sc);
	parent_forget(sc);
	close(sc->top);
	t->scan_mem -= sizeof(*sc);
	free(sc);
}
