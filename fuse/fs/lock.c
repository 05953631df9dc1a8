// SPDX-License-Identifier: MIT
/* The locks the server holds for the mount (see lock.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "fs/lock.h"

/* One (node, owner, file): few at a time, a list is enough. */
struct qc_lock_ent {
	struct qc_lock_ent *next;
	uint64_t ino, owner;
	const struct qc_file *f;
	unsigned kinds;         /* QC_LOCK_*: what it may hold */
	bool added;             /* kinds changed by the last note */
};

void qc_lock_init(struct qc_locks *t)
{
	pthread_mutex_init(&t->lock, NULL);
	t->head = NULL;
	t->gen = 0;
	t->waits = 0;
}

void qc_lock_destroy(struct qc_locks *t)
{
	while (t->head) {
		struct qc_lock_ent *e = t->head;

		t->head = e->next;
		free(e);
	}
	pthread_mutex_destroy(&t->lock);
}

int qc_lock_note(struct qc_locks *t, uint64_t ino, uint64_t owner,
		 const struct qc_file *f, unsigned kind, uint64_t *gen)
{
	struct qc_lock_ent *e;

	pthread_mutex_lock(&t->lock);
	for (e = t->head; e; e = e->next)
		if (e->ino == ino && e->owner == owner && e->f == f)
			break;
	if (!e && (e = calloc(1, sizeof(*e)))) {
		e->ino = ino;
		e->owner = owner;
		e->f = f;
		e->next = t->head;
		t->head = e;
	}
	if (e) {
		e->added = !(e->kinds & kind);
		e->kinds |= kind;
	}
	*gen = ++t->gen;
	pthread_mutex_unlock(&t->lock);
	return e ? 0 : -ENOMEM;
}

/* Lock held: frees the entries that may hold nothing. */
static void prune(struct qc_locks *t)
{
	struct qc_lock_ent **p, *e;

	for (p = &t->head; (e = *p);) {
		if (!e->kinds) {
			*p = e->next;
			free(e);
		} else {
			p = &e->next;
		}
	}
}

void qc_lock_undo(struct qc_locks *t, uint64_t ino, uint64_t owner,
		  const struct qc_file *f, unsigned kind, uint64_t gen)
{
	pthread_mutex_lock(&t->lock);
	for (struct qc_lock_ent *e = t->head; e; e = e->next)
		if (e->ino == ino && e->owner == owner && e->f == f &&
		    e->added && t->gen == gen)
			e->kinds &= ~kind;
	prune(t);
	pthread_mutex_unlock(&t->lock);
}

uint64_t qc_lock_gen(struct qc_locks *t)
{
	uint64_t gen;

	pthread_mutex_lock(&t->lock);
	gen = t->gen;
	pthread_mutex_unlock(&t->lock);
	return gen;
}

void qc_lock_forget(struct qc_locks *t, uint64_t ino, uint64_t owner,
		    unsigned kind, uint64_t gen)
{
	pthread_mutex_lock(&t->lock);
	/* A lock asked for since may have reached the server after the
	 * unlock: then it may be held. */
	if (t->gen == gen)
		for (struct qc_lock_ent *e = t->head; e; e = e->next)
			if (e->ino == ino && e->owner == owner)
				e->kinds &= ~kind;
	prune(t);
	pthread_mutex_unlock(&t->lock);
}

/* Removes the entries `match` says yes to; whether there was one. */
static bool drop(struct qc_locks *t, bool (*match)(const struct qc_lock_ent *,
						   const void *),
		 const void *arg)
{
	struct qc_lock_ent **p, *e;
	bool any = false;

	pthread_mutex_lock(&t->lock);
	for (p = &t->head; (e = *p);) {
		if (match(e, arg)) {
			*p = e->next;
			free(e);
			any = true;
		} else {
			p = &e->next;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return any;
}

struct key {
	uint64_t ino, owner;
};

static bool is_owner(const struct qc_lock_ent *e, const void *arg)
{
	const struct key *k = arg;

	return e->ino == k->ino && e->owner == k->owner;
}

static bool is_file(const struct qc_lock_ent *e, const void *arg)
{
	return e->f == arg;
}

bool qc_lock_take_owner(struct qc_locks *t, uint64_t ino, uint64_t owner)
{
	struct key k = { ino, owner };

	return drop(t, is_owner, &k);
}

void qc_lock_file_gone(struct qc_locks *t, const struct qc_file *f)
{
	(void)drop(t, is_file, f);
}

bool qc_lock_file_held(struct qc_locks *t, const struct qc_file *f)
{
	bool held = false;

	pthread_mutex_lock(&t->lock);
	for (struct qc_lock_ent *e = t->head; e && !held; e = e->next)
		held = e->f == f;
	pthread_mutex_unlock(&t->lock);
	return held;
}

bool qc_lock_wait_begin(struct qc_locks *t)
{
	bool ok;

	pthread_mutex_lock(&t->lock);
	ok = t->waits < QC_LOCK_MAX_WAITS;
	if (ok)
		t->waits++;
	pthread_mutex_unlock(&t->lock);
	return ok;
}

void qc_lock_wait_end(struct qc_locks *t)
{
	pthread_mutex_lock(&t->lock);
	t->waits--;
	pthread_mutex_unlock(&t->lock);
}
