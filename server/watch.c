// SPDX-License-Identifier: MIT
/*
 * Change notification through inotify (see watch.h).
 *
 * Everything mutable lives in struct srv_watch under its one mutex: the
 * two connection threads (recording expectations, adding and removing
 * watches), the reader (turning events into pending notifications) and
 * the sender (taking them off the queue) all take it, never for longer
 * than a few syscalls that do not block (inotify_add_watch/rm_watch,
 * fstat).  Sending a frame is done without it, so a client that does not
 * read stalls the sender alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "log.h"
#include "msg.h"
#include "path.h"
#include "procfs.h"
#include "protocol.h"
#include "thread.h"
#include "watch.h"

/* Names pending per directory before it collapses to "all of it". */
#define NAMES_PER_DIR  8u
/* Names pending in all; past it directories collapse too. */
#define NAMES_MAX      4096u
/* GONE notifications waiting to be sent; past it the server sends ALL. */
#define GONE_MAX       1024u
/* Expectations and writer registrations at most; past it own changes
 * are not recorded, and the client hears of them (harmless, slower). */
#define EXPECT_MAX     16384u
/* While expectations wait to expire, the reader looks this often. */
#define EXPIRE_POLL_MS 20
#define EVENT_BUF      (64u * 1024u)

/* Everything a watched directory can tell us. */
#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
		    IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF | \
		    IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
/* Event kinds an event consumes rather than merely matches (watch.h). */
#define CONSUMED (SRV_WATCH_CREATE | SRV_WATCH_DELETE | \
		  SRV_WATCH_MOVED_FROM | SRV_WATCH_MOVED_TO)

struct watch {
	int wd;
	uint64_t dev, ino;
	struct watch *wd_next, *id_next;   /* hash chains */
	struct watch *lru_prev, *lru_next; /* head: most recently listed */
	struct watch *q_prev, *q_next;     /* the send queue, when queued */
	bool queued;
	bool whole;                        /* CHANGED with no name pending */
	unsigned nnames;
	char *names[NAMES_PER_DIR];
};

/* An expectation (op != 0) or a writer registration (writer != 0). */
struct expect {
	struct expect *prev, *next;
	uint64_t op;
	uint32_t writer;
	unsigned refs;        /* writer: handles open on it */
	uint64_t dev, ino;    /* the directory */
	unsigned kinds;       /* SRV_WATCH_* still expected */
	bool done;            /* expires once the queue was read after it */
	uint64_t done_seq;
	size_t namelen;       /* 0: the directory itself */
	char name[QFT_MAX_NAME + 1];
};

struct srv_watch {
	unsigned max;                  /* immutable */
	bool disabled;                 /* immutable */
	pthread_mutex_t lock;
	/* lock: work for the sender, stop, `sending` cleared */
	pthread_cond_t cond;

	/* All below: lock.  ifd, wake[] and the threads are set once when
	 * `active` becomes true and stay until srv_watch_free. */
	bool tried;                    /* the first grant tried inotify */
	bool active;
	bool stop;
	int ifd;
	int wake[2];                   /* pipe: wakes the reader */
	bool reader_idle;              /* the reader sleeps without timeout */
	pthread_t reader, sender;
	/* The connections granted NOTIFY; notifications go on meta when
	 * there is one, else on bulk (notify_chan). */
	struct qft_chan *bulk_chan, *meta_chan;
	struct qft_chan *sending;      /* the sender is sending on it */
	/* Notifications were dropped with nobody to tell, or the connection
	 * carrying them went (what it had in flight may never arrive): a
	 * resumed connection says so (srv_watch_lost_take). */
	bool lost;

	struct watch **by_wd, **by_id; /* nbuckets chains each */
	size_t nbuckets;
	struct watch *lru_head, *lru_tail;
	unsigned count;
	struct watch *q_head, *q_tail; /* directories with CHANGED pending */
	unsigned names;                /* names pending in all */
	uint64_t *gone;                /* ring of GONE inodes */
	unsigned gone_head, gone_len;
	bool all;                      /* ALL pending */
	bool overflowed;               /* logged an overflow already */

	struct expect *ex_head, *ex_tail;
	unsigned nex;
	unsigned ndone;                /* of which done, waiting to expire */
	uint64_t seq;                  /* orders done marks and reader passes */
	uint64_t next_op;
	uint32_t next_writer;
};

/* Of the low half of an inode number only, which srv_path_ino leaves as
 * it was: UNWATCH names a watch by the number its client was shown. */
static size_t bucket(const struct srv_watch *w, uint64_t v)
{
	v &= 0xffffffffull;
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	return (size_t)(v & (w->nbuckets - 1));
}

static struct watch *by_wd(struct srv_watch *w, int wd)
{
	struct watch *wt = w->by_wd[bucket(w, (uint64_t)(unsigned)wd)];

	while (wt && wt->wd != wd)
		wt = wt->wd_next;
	return wt;
}

static struct watch *by_id(struct srv_watch *w, uint64_t dev, uint64_t ino)
{
	struct watch *wt = w->by_id[bucket(w, ino)];

	while (wt && (wt->ino != ino || wt->dev != dev))
		wt = wt->id_next;
	return wt;
}

static void wake_sender(struct srv_watch *w)
{
	pthread_cond_broadcast(&w->cond);
}

static struct qft_chan *notify_chan(const struct srv_watch *w)
{
	return w->meta_chan ? w->meta_chan : w->bulk_chan;
}

static void set_all(struct srv_watch *w);

/*
 * `chan` cannot carry notifications any more, and what went on it may
 * never have arrived.  When they move to the other connection, the client
 * is told there to forget everything; and the next RESUME says so too
 * (srv_watch_lost_take), because the other connection may be as dead as
 * this one without the server knowing yet: a link cut drops both, and the
 * ALL written into the other's socket would be lost with it.  Lock held.
 */
static void lose_chan(struct srv_watch *w, struct qft_chan *chan)
{
	bool current = notify_chan(w) == chan;

	if (w->meta_chan == chan)
		w->meta_chan = NULL;
	if (w->bulk_chan == chan)
		w->bulk_chan = NULL;
	if (!current || !w->active)
		return;
	w->lost = true;
	if (notify_chan(w))
		set_all(w);
}

static void lru_unlink(struct srv_watch *w, struct watch *wt)
{
	if (wt->lru_prev)
		wt->lru_prev->lru_next = wt->lru_next;
	else
		w->lru_head = wt->lru_next;
	if (wt->lru_next)
		wt->lru_next->lru_prev = wt->lru_prev;
	else
		w->lru_tail = wt->lru_prev;
	wt->lru_prev = wt->lru_next = NULL;
}

static void lru_push(struct srv_watch *w, struct watch *wt)
{
	wt->lru_next = w->lru_head;
	wt->lru_prev = NULL;
	if (w->lru_head)
		w->lru_head->lru_prev = wt;
	else
		w->lru_tail = wt;
	w->lru_head = wt;
}

static void drop_names(struct srv_watch *w, struct watch *wt)
{
	for (unsigned i = 0; i < wt->nnames; i++)
		free(wt->names[i]);
	w->names -= wt->nnames;
	wt->nnames = 0;
}

static void dequeue(struct srv_watch *w, struct watch *wt)
{
	if (!wt->queued)
		return;
	if (wt->q_prev)
		wt->q_prev->q_next = wt->q_next;
	else
		w->q_head = wt->q_next;
	if (wt->q_next)
		wt->q_next->q_prev = wt->q_prev;
	else
		w->q_tail = wt->q_prev;
	wt->q_prev = wt->q_next = NULL;
	wt->queued = false;
	wt->whole = false;
	drop_names(w, wt);
}

/* Takes a watch out of every list and frees it; the inotify watch is the
 * caller's business. */
static void watch_free(struct srv_watch *w, struct watch *wt)
{
	struct watch **pp;

	for (pp = &w->by_wd[bucket(w, (uint64_t)(unsigned)wt->wd)];
	     *pp != wt; pp = &(*pp)->wd_next)
		;
	*pp = wt->wd_next;
	for (pp = &w->by_id[bucket(w, wt->ino)]; *pp != wt;
	     pp = &(*pp)->id_next)
		;
	*pp = wt->id_next;
	lru_unlink(w, wt);
	dequeue(w, wt);
	w->count--;
	free(wt);
}

/* Every watch ends and the client is told so with one ALL. */
static void set_all(struct srv_watch *w)
{
	while (w->lru_head) {
		(void)inotify_rm_watch(w->ifd, w->lru_head->wd);
		watch_free(w, w->lru_head);
	}
	w->gone_len = 0;
	w->all = true;
	wake_sender(w);
}

static void queue_gone(struct srv_watch *w, uint64_t ino)
{
	if (w->all)
		return;
	if (w->gone_len == GONE_MAX) {
		if (!w->overflowed)
			qft_info("change notification: the client reads "
				 "notifications too slowly; telling it to "
				 "forget everything (ALL)");
		w->overflowed = true;
		set_all(w);
		return;
	}
	w->gone[(w->gone_head + w->gone_len++) % GONE_MAX] = ino;
	wake_sender(w);
}

/* Ends watch `wt` (the inotify watch too unless the kernel did) with
 * GONE. */
static void end_watch(struct srv_watch *w, struct watch *wt, bool rm)
{
	uint64_t ino = srv_path_ino(wt->dev, wt->ino);

	if (rm)
		(void)inotify_rm_watch(w->ifd, wt->wd);
	watch_free(w, wt);
	queue_gone(w, ino);
}

/* Coalesces a change of `name` (namelen 0: of anything) in `wt`. */
static void mark_changed(struct srv_watch *w, struct watch *wt,
			 const char *name, size_t namelen)
{
	char *copy;

	if (w->all)
		return;
	if (!wt->queued) {
		wt->queued = true;
		wt->q_next = NULL;
		wt->q_prev = w->q_tail;
		if (w->q_tail)
			w->q_tail->q_next = wt;
		else
			w->q_head = wt;
		w->q_tail = wt;
		wake_sender(w);
	}
	if (wt->whole)
		return;
	/* Names the protocol cannot carry change the whole directory. */
	if (namelen == 0 || !qft_name_valid(name, namelen))
		goto whole;
	for (unsigned i = 0; i < wt->nnames; i++)
		if (strlen(wt->names[i]) == namelen &&
		    memcmp(wt->names[i], name, namelen) == 0)
			return;
	if (wt->nnames == NAMES_PER_DIR || w->names >= NAMES_MAX)
		goto whole;
	copy = strndup(name, namelen);
	if (!copy)
		goto whole;
	wt->names[wt->nnames++] = copy;
	w->names++;
	return;
whole:
	drop_names(w, wt);
	wt->whole = true;
}

static void expect_unlink(struct srv_watch *w, struct expect *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		w->ex_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		w->ex_tail = e->prev;
	w->nex--;
	if (e->done)
		w->ndone--;
	free(e);
}

static struct expect *expect_new(struct srv_watch *w, uint64_t dev,
				 uint64_t ino, const char *name,
				 size_t namelen, unsigned kinds)
{
	struct expect *e;

	if (w->nex >= EXPECT_MAX || namelen > QFT_MAX_NAME)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->dev = dev;
	e->ino = ino;
	e->kinds = kinds;
	memcpy(e->name, name, namelen);
	e->namelen = namelen;
	e->prev = w->ex_tail;
	if (w->ex_tail)
		w->ex_tail->next = e;
	else
		w->ex_head = e;
	w->ex_tail = e;
	w->nex++;
	return e;
}

/* Whether the event (directory, name, kind) is the client's own; a name
 * event uses its expectation up. */
static bool own_event(struct srv_watch *w, const struct watch *wt,
		      const char *name, size_t namelen, unsigned kind)
{
	for (struct expect *e = w->ex_head; e; e = e->next) {
		if (!(e->kinds & kind) || e->ino != wt->ino ||
		    e->dev != wt->dev || e->namelen != namelen ||
		    memcmp(e->name, name, namelen) != 0)
			continue;
		if ((kind & CONSUMED) && !e->writer) {
			e->kinds &= ~kind;
			if (!e->kinds)
				expect_unlink(w, e);
		}
		return true;
	}
	return false;
}

/* Expectations done before the reader's pass `start` have seen every
 * event of theirs: they expire. */
static void expire(struct srv_watch *w, uint64_t start)
{
	struct expect *e = w->ex_head;

	while (e) {
		struct expect *next = e->next;

		if (e->done && e->done_seq < start)
			expect_unlink(w, e);
		e = next;
	}
}

static unsigned event_kind(uint32_t mask)
{
	if (mask & IN_CREATE)
		return SRV_WATCH_CREATE;
	if (mask & IN_DELETE)
		return SRV_WATCH_DELETE;
	if (mask & IN_MOVED_FROM)
		return SRV_WATCH_MOVED_FROM;
	if (mask & IN_MOVED_TO)
		return SRV_WATCH_MOVED_TO;
	if (mask & IN_ATTRIB)
		return SRV_WATCH_ATTRIB;
	if (mask & (IN_MODIFY | IN_CLOSE_WRITE))
		return SRV_WATCH_MODIFY;
	return 0;
}

static void handle_event(struct srv_watch *w, const struct inotify_event *ev)
{
	struct watch *wt;
	size_t namelen;
	unsigned kind;

	if (ev->mask & IN_Q_OVERFLOW) {
		if (!w->overflowed)
			qft_info("change notification: inotify's queue "
				 "overflowed; telling the client to forget "
				 "everything (ALL)");
		w->overflowed = true;
		set_all(w);
		return;
	}
	wt = by_wd(w, ev->wd);
	if (!wt)
		return;         /* a watch we ended already */
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_UNMOUNT)) {
		end_watch(w, wt, false);
		return;
	}
	if (ev->mask & IN_MOVE_SELF) {
		/* The kernel would keep watching it wherever it went, even
		 * out of the root. */
		end_watch(w, wt, true);
		return;
	}
	kind = event_kind(ev->mask);
	if (!kind)
		return;
	namelen = ev->len ? strnlen(ev->name, ev->len) : 0;
	if (own_event(w, wt, ev->name, namelen, kind))
		return;
	mark_changed(w, wt, ev->name, namelen);
}

/* Reads the queue to its end; -errno on a failure other than EAGAIN. */
static int read_events(struct srv_watch *w, uint8_t *buf)
{
	for (;;) {
		ssize_t n = read(w->ifd, buf, EVENT_BUF);
		size_t off = 0;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		pthread_mutex_lock(&w->lock);
		while (off + sizeof(struct inotify_event) <= (size_t)n) {
			const struct inotify_event *ev =
				(const void *)(buf + off);

			if (off + sizeof(*ev) + ev->len > (size_t)n)
				break;
			handle_event(w, ev);
			off += sizeof(*ev) + ev->len;
		}
		pthread_mutex_unlock(&w->lock);
	}
}

static void *reader_main(void *arg)
{
	struct srv_watch *w = arg;
	uint8_t *buf;
	int r = 0;

	/* inotify_event is int-aligned; malloc's memory is. */
	buf = malloc(EVENT_BUF);
	if (!buf)
		r = -ENOMEM;
	pthread_mutex_lock(&w->lock);
	while (!w->stop && r == 0) {
		struct pollfd p[2] = {
			{ .fd = w->ifd, .events = POLLIN },
			{ .fd = w->wake[0], .events = POLLIN },
		};
		int timeout = w->ndone ? EXPIRE_POLL_MS : -1;
		uint64_t start;
		char drain[64];

		w->reader_idle = timeout < 0;
		pthread_mutex_unlock(&w->lock);
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			r = -errno;
		while (read(w->wake[0], drain, sizeof(drain)) > 0)
			;
		pthread_mutex_lock(&w->lock);
		w->reader_idle = false;
		if (w->stop || r < 0)
			break;
		/* Whatever was done before this mark is in the queue now. */
		start = ++w->seq;
		pthread_mutex_unlock(&w->lock);
		r = read_events(w, buf);
		pthread_mutex_lock(&w->lock);
		if (r == 0)
			expire(w, start);
	}
	if (r < 0 && !w->stop) {
		qft_err("change notification: inotify failed: %s; telling "
			"the client to forget everything (ALL)", strerror(-r));
		set_all(w);
		/* Nothing can be watched any more. */
		w->active = false;
	}
	pthread_mutex_unlock(&w->lock);
	free(buf);
	return NULL;
}

/*
 * The next notification into *m (name copied to `name`); false when there
 * is none.  Lock held.
 */
static bool next_notification(struct srv_watch *w, struct qft_msg *m,
			      char name[QFT_MAX_NAME + 1])
{
	struct watch *wt = w->q_head;
	char *n;

	if (w->all) {
		w->all = false;
		qft_msg_init_notify(m, 0, QFT_NOTIFY_ALL, NULL, 0);
		return true;
	}
	if (w->gone_len) {
		uint64_t ino = w->gone[w->gone_head];

		w->gone_head = (w->gone_head + 1) % GONE_MAX;
		w->gone_len--;
		qft_msg_init_notify(m, ino, QFT_NOTIFY_GONE, NULL, 0);
		return true;
	}
	if (!wt)
		return false;
	if (wt->whole || wt->nnames == 0) {
		qft_msg_init_notify(m, srv_path_ino(wt->dev, wt->ino),
				    QFT_NOTIFY_CHANGED, NULL, 0);
		dequeue(w, wt);
		return true;
	}
	n = wt->names[--wt->nnames];
	w->names--;
	snprintf(name, QFT_MAX_NAME + 1, "%s", n);
	free(n);
	qft_msg_init_notify(m, srv_path_ino(wt->dev, wt->ino),
			    QFT_NOTIFY_CHANGED, name,
			    (uint32_t)strlen(name));
	if (wt->nnames == 0)
		dequeue(w, wt);
	return true;
}

static void *sender_main(void *arg)
{
	struct srv_watch *w = arg;
	char name[QFT_MAX_NAME + 1];
	struct qbuf b;

	qbuf_init(&b, QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct qft_chan *chan;
		struct qft_msg m;
		int r;

		if (w->stop)
			break;
		if (!next_notification(w, &m, name)) {
			pthread_cond_wait(&w->cond, &w->lock);
			continue;
		}
		chan = notify_chan(w);
		if (!chan) {
			w->lost = true;
			continue;       /* nobody left to tell */
		}
		w->sending = chan;
		pthread_mutex_unlock(&w->lock);
		r = qft_chan_send_msg(chan, &b, &m);
		qft_debug("NOTIFY %s ino %llu%s%s: %s",
			  m.kind == QFT_NOTIFY_ALL ? "ALL" :
			  m.kind == QFT_NOTIFY_GONE ? "GONE" : "CHANGED",
			  (unsigned long long)m.ino, m.name.len ? " " : "",
			  m.name.s, r < 0 ? strerror(-r) : "sent");
		pthread_mutex_lock(&w->lock);
		w->sending = NULL;
		pthread_cond_broadcast(&w->cond);
		/* The connection's own thread reports the failure. */
		if (r < 0)
			lose_chan(w, chan);
	}
	pthread_mutex_unlock(&w->lock);
	qbuf_free(&b);
	return NULL;
}

int srv_watch_new(struct srv_watch **out, unsigned max_watches,
		  bool disabled)
{
	struct srv_watch *w;
	size_t n = 64;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->max = max_watches ? max_watches : SRV_WATCH_MAX_DEFAULT;
	w->disabled = disabled;
	w->ifd = w->wake[0] = w->wake[1] = -1;
	/* About two watches per chain at the cap. */
	while (n < w->max / 2 && n < 65536)
		n *= 2;
	w->nbuckets = n;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	*out = w;
	return 0;
}

/* Sets up inotify and both threads; lock held.  0 or -errno. */
static int start(struct srv_watch *w)
{
	int r;

	if (w->disabled)
		return -ENOSYS;
	w->by_wd = calloc(w->nbuckets, sizeof(*w->by_wd));
	w->by_id = calloc(w->nbuckets, sizeof(*w->by_id));
	w->gone = calloc(GONE_MAX, sizeof(*w->gone));
	if (!w->by_wd || !w->by_id || !w->gone) {
		r = -ENOMEM;
		goto out_free;
	}
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->ifd < 0) {
		r = -errno;
		goto out_free;
	}
	if (pipe2(w->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
		r = -errno;
		goto out_close_ifd;
	}
	r = qft_thread_start(&w->reader, reader_main, w);
	if (r < 0)
		goto out_close_wake;
	r = qft_thread_start(&w->sender, sender_main, w);
	if (r < 0) {
		/* The reader waits for the lock we hold; let it see stop. */
		w->stop = true;
		(void)!write(w->wake[1], "x", 1);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->reader, NULL);
		pthread_mutex_lock(&w->lock);
		w->stop = false;
		goto out_close_wake;
	}
	return 0;

out_close_wake:
	close(w->wake[0]);
	close(w->wake[1]);
	w->wake[0] = w->wake[1] = -1;
out_close_ifd:
	close(w->ifd);
	w->ifd = -1;
out_free:
	free(w->by_wd);
	free(w->by_id);
	free(w->gone);
	w->by_wd = w->by_id = NULL;
	w->gone = NULL;
	return r;
}

void srv_watch_free(struct srv_watch *w)
{
	bool threads;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	threads = w->ifd >= 0;
	w->stop = true;
	w->bulk_chan = w->meta_chan = NULL;
	pthread_cond_broadcast(&w->cond);
	/* A sender blocked on a client that reads nothing. */
	if (w->sending)
		qft_chan_shutdown(w->sending);
	pthread_mutex_unlock(&w->lock);
	if (threads) {
		(void)!write(w->wake[1], "x", 1);
		pthread_join(w->reader, NULL);
		pthread_join(w->sender, NULL);
		close(w->wake[0]);
		close(w->wake[1]);
		close(w->ifd);
	}
	while (w->lru_head)
		watch_free(w, w->lru_head);
	while (w->ex_head)
		expect_unlink(w, w->ex_head);
	free(w->by_wd);
	free(w->by_id);
	free(w->gone);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

bool srv_watch_grant(struct srv_watch *w, struct qft_chan *chan, bool meta)
{
	bool ok;
	int r;

	if (!w)
		return false;
	pthread_mutex_lock(&w->lock);
	if (!w->tried) {
		w->tried = true;
		/* Watches are added through /proc/self/fd (procfs.h). */
		r = srv_procfs_ok() ? start(w) : -EOPNOTSUPP;
		if (r < 0)
			qft_info("change notification is not available "
				 "(inotify: %s): not offered to the client",
				 strerror(-r));
		else
			w->active = true;
	}
	ok = w->active;
	if (ok && meta)
		w->meta_chan = chan;
	else if (ok)
		w->bulk_chan = chan;
	pthread_mutex_unlock(&w->lock);
	return ok;
}

bool srv_watch_on(struct srv_watch *w)
{
	bool on;

	if (!w)
		return false;
	pthread_mutex_lock(&w->lock);
	on = w->active;
	pthread_mutex_unlock(&w->lock);
	return on;
}

void srv_watch_detach(struct srv_watch *w, struct qft_chan *chan)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	lose_chan(w, chan);
	if (w->sending == chan) {
		qft_chan_shutdown(chan);
		while (w->sending == chan)
			pthread_cond_wait(&w->cond, &w->lock);
	}
	pthread_mutex_unlock(&w->lock);
}

bool srv_watch_lost_take(struct srv_watch *w)
{
	bool lost;

	if (!w)
		return false;
	pthread_mutex_lock(&w->lock);
	lost = w->lost;
	w->lost = false;
	pthread_mutex_unlock(&w->lock);
	return lost;
}

void srv_watch_reattach(struct srv_watch *w, struct qft_chan *chan,
			bool meta)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->active) {
		if (meta)
			w->meta_chan = chan;
		else
			w->bulk_chan = chan;
		/* Lost after the RESUME reply said nothing was: the client
		 * learns it as it would after a move to the other lane. */
		if (w->lost) {
			w->lost = false;
			set_all(w);
		}
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
}

/*
 * File systems whose changes inotify does not see all of: those made on
 * other hosts (network file systems) or behind the kernel's back (FUSE,
 * whose daemon may serve anything).  A watch there would promise what it
 * cannot keep, so there is none: READDIR answers without WATCHED and the
 * client caches as it would without the feature.
 */
static bool fs_is_remote(long type)
{
	switch ((unsigned long)type & 0xffffffffu) {
	case 0x00006969u: /* NFS */
	case 0x0000517bu: /* SMB */
	case 0xff534d42u: /* CIFS */
	case 0xfe534d42u: /* SMB2 */
	case 0x65735546u: /* FUSE (sshfs, qftfs, ...) */
	case 0x01021997u: /* 9P */
	case 0x00c36400u: /* Ceph */
	case 0x5346414fu: /* AFS */
	case 0x6b414653u: /* kAFS */
	case 0x73757245u: /* Coda */
	case 0x47504653u: /* GPFS */
	case 0x0bd00bd0u: /* Lustre */
	case 0x013111a8u: /* IBRIX */
	case 0x564c:      /* NCP */
		return true;
	default:
		return false;
	}
}

/* Ends the least recently listed watch, with GONE; lock held. */
static void evict(struct srv_watch *w)
{
	if (w->lru_tail)
		end_watch(w, w->lru_tail, true);
}

int srv_watch_add(struct srv_watch *w, int fd, struct srv_watch_key *key)
{
	char proc[SRV_PROC_FD_MAX];
	struct watch *wt;
	struct statfs sf;
	struct stat st;
	int wd, r = 0;

	if (!w || !srv_procfs_ok())
		return -EOPNOTSUPP;
	if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (fs_is_remote((long)sf.f_type))
		return -EREMOTE;
	key->dev = (uint64_t)st.st_dev;
	key->ino = (uint64_t)st.st_ino;
	(void)srv_path_proc_fd(proc, fd);   /* procfs checked above */
	pthread_mutex_lock(&w->lock);
	if (!w->active) {
		r = -EOPNOTSUPP;
		goto out_unlock;
	}
	wt = by_id(w, key->dev, key->ino);
	if (wt)
		goto out_touch;
	if (w->count >= w->max)
		evict(w);
	/* Under the lock: the reader must know the wd before its first
	 * event is read. */
	wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
	if (wd < 0 && errno == ENOSPC && w->count > 0) {
		/* The user's inotify limit (max_user_watches) is below
		 * ours: make room the same way. */
		evict(w);
		wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
	}
	if (wd < 0) {
		r = -errno;
		goto out_unlock;
	}
	wt = by_wd(w, wd);
	if (wt) {
		/* The same directory under another (dev, ino): keep one. */
		*key = (struct srv_watch_key){ wt->dev, wt->ino };
		goto out_touch;
	}
	wt = calloc(1, sizeof(*wt));
	if (!wt) {
		(void)inotify_rm_watch(w->ifd, wd);
		r = -ENOMEM;
		goto out_unlock;
	}
	wt->wd = wd;
	wt->dev = key->dev;
	wt->ino = key->ino;
	wt->wd_next = w->by_wd[bucket(w, (uint64_t)(unsigned)wd)];
	w->by_wd[bucket(w, (uint64_t)(unsigned)wd)] = wt;
	wt->id_next = w->by_id[bucket(w, wt->ino)];
	w->by_id[bucket(w, wt->ino)] = wt;
	w->count++;
	lru_push(w, wt);
	goto out_unlock;
out_touch:
	lru_unlink(w, wt);
	lru_push(w, wt);
out_unlock:
	pthread_mutex_unlock(&w->lock);
	return r;
}

bool srv_watch_holds(struct srv_watch *w, const struct srv_watch_key *key)
{
	bool held;

	if (!w)
		return false;
	pthread_mutex_lock(&w->lock);
	held = w->active && by_id(w, key->dev, key->ino);
	pthread_mutex_unlock(&w->lock);
	return held;
}

void srv_watch_remove(struct srv_watch *w, uint64_t ino)
{
	struct watch *wt, *next;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->active) {
		for (wt = w->by_id[bucket(w, ino)]; wt; wt = next) {
			next = wt->id_next;
			if (srv_path_ino(wt->dev, wt->ino) != ino)
				continue;
			(void)inotify_rm_watch(w->ifd, wt->wd);
			watch_free(w, wt);
		}
	}
	pthread_mutex_unlock(&w->lock);
}

void srv_watch_begin(struct srv_watch *w, struct srv_watch_op *op)
{
	op->id = 0;
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->active && w->count)
		op->id = ++w->next_op;
	pthread_mutex_unlock(&w->lock);
}

/* Records an expectation when (dev, ino) is watched; lock held. */
static void expect_add(struct srv_watch *w, const struct srv_watch_op *op,
		       uint64_t dev, uint64_t ino, const char *name,
		       unsigned kinds)
{
	struct expect *e;

	if (!by_id(w, dev, ino))
		return;
	e = expect_new(w, dev, ino, name, strlen(name), kinds);
	if (e)
		e->op = op->id;
}

void srv_watch_expect(struct srv_watch *w, struct srv_watch_op *op, int dfd,
		      const char *name, unsigned kinds)
{
	struct stat st;

	if (!w || !op->id || fstat(dfd, &st) < 0)
		return;
	pthread_mutex_lock(&w->lock);
	expect_add(w, op, (uint64_t)st.st_dev, (uint64_t)st.st_ino, name,
		   kinds);
	pthread_mutex_unlock(&w->lock);
}

void srv_watch_expect_self(struct srv_watch *w, struct srv_watch_op *op,
			   int dfd, const char *name, unsigned kinds)
{
	struct stat st;

	if (!w || !op->id ||
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode))
		return;
	pthread_mutex_lock(&w->lock);
	expect_add(w, op, (uint64_t)st.st_dev, (uint64_t)st.st_ino, "",
		   kinds);
	pthread_mutex_unlock(&w->lock);
}

void srv_watch_expect_fd(struct srv_watch *w, struct srv_watch_op *op,
			 int fd, unsigned kinds)
{
	struct stat st;

	if (!w || !op->id || fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	pthread_mutex_lock(&w->lock);
	expect_add(w, op, (uint64_t)st.st_dev, (uint64_t)st.st_ino, "",
		   kinds);
	pthread_mutex_unlock(&w->lock);
}

static struct expect *find_writer(struct srv_watch *w, uint32_t writer)
{
	for (struct expect *e = w->ex_head; e; e = e->next)
		if (e->writer == writer)
			return e;
	return NULL;
}

void srv_watch_expect_writer(struct srv_watch *w, struct srv_watch_op *op,
			     uint32_t writer, unsigned kinds)
{
	struct expect *e;

	if (!w || !op->id || !writer)
		return;
	pthread_mutex_lock(&w->lock);
	e = find_writer(w, writer);
	if (e) {
		char name[QFT_MAX_NAME + 1];

		memcpy(name, e->name, e->namelen);
		name[e->namelen] = '\0';
		expect_add(w, op, e->dev, e->ino, name, kinds);
	}
	pthread_mutex_unlock(&w->lock);
}

/* Marks the end of what `e` waits for; lock held. */
static void mark_done(struct srv_watch *w, struct expect *e)
{
	if (!e->done)
		w->ndone++;
	e->done = true;
	e->done_seq = ++w->seq;
	/* A reader asleep for good would let it linger until the next
	 * event, when it could take a foreign one for the client's. */
	if (w->reader_idle) {
		w->reader_idle = false;
		(void)!write(w->wake[1], "x", 1);
	}
}

void srv_watch_done(struct srv_watch *w, struct srv_watch_op *op)
{
	if (!w || !op->id)
		return;
	pthread_mutex_lock(&w->lock);
	for (struct expect *e = w->ex_head; e; e = e->next)
		if (e->op == op->id)
			mark_done(w, e);
	pthread_mutex_unlock(&w->lock);
	op->id = 0;
}

uint32_t srv_watch_writer_open(struct srv_watch *w, int dfd,
			       const char *name)
{
	size_t namelen = strlen(name);
	struct expect *e;
	struct stat st;
	uint32_t id = 0;

	if (!w || namelen > QFT_MAX_NAME)
		return 0;
	pthread_mutex_lock(&w->lock);
	if (!w->active) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	pthread_mutex_unlock(&w->lock);
	if (fstat(dfd, &st) < 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	for (e = w->ex_head; e; e = e->next)
		if (e->writer && e->dev == (uint64_t)st.st_dev &&
		    e->ino == (uint64_t)st.st_ino && e->namelen == namelen &&
		    memcmp(e->name, name, namelen) == 0)
			break;
	if (e) {
		/* Another handle of the same name: one registration. */
		e->refs++;
		if (e->done)
			w->ndone--;
		e->done = false;
		id = e->writer;
		goto out_unlock;
	}
	e = expect_new(w, (uint64_t)st.st_dev, (uint64_t)st.st_ino, name,
		       namelen, SRV_WATCH_MODIFY);
	if (!e)
		goto out_unlock;
	if (++w->next_writer == 0)
		++w->next_writer;
	e->writer = id = w->next_writer;
	e->refs = 1;
out_unlock:
	pthread_mutex_unlock(&w->lock);
	return id;
}

void srv_watch_writer_close(struct srv_watch *w, uint32_t writer)
{
	struct expect *e;

	if (!w || !writer)
		return;
	pthread_mutex_lock(&w->lock);
	e = find_writer(w, writer);
	if (e && e->refs && --e->refs == 0)
		mark_done(w, e);
	pthread_mutex_unlock(&w->lock);
}

/*
 * A writer registration about to take a new name: events of its writes
 * still in inotify's queue carry the old one.  An expectation under the
 * old name, done at once, covers them until the reader has read past
 * this point.  Lock held.
 */
static void trail_old_name(struct srv_watch *w, const struct expect *e)
{
	struct expect *old;

	old = expect_new(w, e->dev, e->ino, e->name, e->namelen, e->kinds);
	if (old)
		mark_done(w, old);
}

void srv_watch_renamed(struct srv_watch *w, int dfd1, const char *name1,
		       int dfd2, const char *name2, bool exchange)
{
	size_t n1 = strlen(name1), n2 = strlen(name2);
	struct stat s1, s2;
	struct {
		uint64_t dev, ino;
		const char *name;
		size_t len;
	} a, b;

	if (!w || n1 > QFT_MAX_NAME || n2 > QFT_MAX_NAME ||
	    fstat(dfd1, &s1) < 0 || fstat(dfd2, &s2) < 0)
		return;
	a.dev = (uint64_t)s1.st_dev;
	a.ino = (uint64_t)s1.st_ino;
	a.name = name1;
	a.len = n1;
	b.dev = (uint64_t)s2.st_dev;
	b.ino = (uint64_t)s2.st_ino;
	b.name = name2;
	b.len = n2;
	pthread_mutex_lock(&w->lock);
	for (struct expect *e = w->ex_head; e; e = e->next) {
		bool is_a, is_b;

		if (!e->writer)
			continue;
		is_a = e->dev == a.dev && e->ino == a.ino &&
		       e->namelen == a.len && !memcmp(e->name, a.name, a.len);
		is_b = e->dev == b.dev && e->ino == b.ino &&
		       e->namelen == b.len && !memcmp(e->name, b.name, b.len);
		if (is_a || (is_b && exchange))
			trail_old_name(w, e);
		if (is_a) {
			e->dev = b.dev;
			e->ino = b.ino;
			memcpy(e->name, b.name, b.len);
			e->namelen = b.len;
		} else if (is_b && exchange) {
			e->dev = a.dev;
			e->ino = a.ino;
			memcpy(e->name, a.name, a.len);
			e->namelen = a.len;
		}
	}
	pthread_mutex_unlock(&w->lock);
}
