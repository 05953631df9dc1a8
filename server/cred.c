// SPDX-License-Identifier: MIT
/* Acting as the caller, per thread (see cred.h). */
#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#include "cred.h"
#include "log.h"
#include "srv.h"

/*
 * The 32-bit forms where the architecture has both (i386, 32-bit ARM):
 * there the plain numbers take 16-bit ids.  glibc's setfsuid() and
 * setgroups() are not used: the latter changes every thread.
 */
#ifdef SYS_setfsuid32
#define SYS_SETFSUID  SYS_setfsuid32
#define SYS_SETFSGID  SYS_setfsgid32
#define SYS_SETGROUPS SYS_setgroups32
#else
#define SYS_SETFSUID  SYS_setfsuid
#define SYS_SETFSGID  SYS_setfsgid
#define SYS_SETGROUPS SYS_setgroups
#endif

/* One shared identity of a connection's handles (cred.h). */
struct srv_cred {
	unsigned refs;
	struct srv_cred *prev, *next;
	struct srv_creds *owner;
	struct qft_cred c;
};

/* Distinct identities a connection's open handles may hold at once. */
#define MAX_CREDS 1024u

/*
 * What a thread runs with, kept step by step so that a switch makes only
 * the system calls whose value changes (each costs a few microseconds:
 * the kernel copies the thread's credentials every time).  `kind`: the
 * server's own identity, a caller's (`c`), or not known (before the
 * first switch, after a failed one), when every step is made.
 */
enum kind { AS_UNKNOWN = 0, AS_SERVER, AS_CALLER };

/*
 * The thread's effective capabilities: all it may have (the server, a
 * caller who is root), or only CAP_SETUID and CAP_SETGID, which no file
 * system check looks at and the next switch needs; STALE: those two and
 * an unknown part of the others (setfsuid raises or drops the file
 * system ones when the fsuid crosses 0).
 */
enum caps { CAPS_UNKNOWN = 0, CAPS_ALL, CAPS_SETID, CAPS_STALE };

struct ident {
	enum kind kind;
	struct qft_cred c;      /* the ids; groups: AS_CALLER only */
};

/* Set once by srv_cred_setup, before any thread; read-only after. */
static bool available;
static uid_t self_uid;
static gid_t self_gid;
static gid_t *self_groups;
static int self_ngroups;
static struct __user_cap_data_struct self_caps[_LINUX_CAPABILITY_U32S_3];

static __thread struct ident applied;
static __thread enum caps caps_now;
static __thread struct ident saved;     /* srv_cred_begin_server */

static const struct qft_cred nobody = {
	.uid = SRV_CRED_NOBODY, .gid = SRV_CRED_NOBODY, .ngroups = 0,
};

static bool groups_same(const struct qft_cred *a, const struct qft_cred *b)
{
	return a->ngroups == b->ngroups &&
	       memcmp(a->groups, b->groups,
		      a->ngroups * sizeof(a->groups[0])) == 0;
}

static bool cred_same(const struct qft_cred *a, const struct qft_cred *b)
{
	return a->uid == b->uid && a->gid == b->gid && groups_same(a, b);
}

static int caps_set(enum caps want)
{
	const uint32_t setid = (1u << CAP_SETUID) | (1u << CAP_SETGID);
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (caps_now == want)
		return 0;
	memcpy(d, self_caps, sizeof(d));
	for (size_t i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		d[i].effective = want == CAPS_ALL ? d[i].permitted :
				 i == 0 ? d[i].permitted & setid : 0;
	if (syscall(SYS_capset, &h, d) < 0) {
		caps_now = CAPS_UNKNOWN;
		return -errno;
	}
	caps_now = want;
	return 0;
}

/* setfsuid/setfsgid report no error: the id is read back instead (an
 * invalid id, -1, changes nothing and returns the current one). */
static int set_fsgid(gid_t gid)
{
	syscall(SYS_SETFSGID, (long)gid);
	return (gid_t)syscall(SYS_SETFSGID, (long)(gid_t)-1) == gid ? 0 :
	       -EPERM;
}

static int set_fsuid(uid_t uid)
{
	syscall(SYS_SETFSUID, (long)uid);
	return (uid_t)syscall(SYS_SETFSUID, (long)(uid_t)-1) == uid ? 0 :
	       -EPERM;
}

/*
 * Switches this thread to `to` (kind and ids); with `privileged` (the
 * server itself, or a caller who is root) it keeps all its capabilities,
 * else only the two the next switch needs.  Steps whose value is already
 * in place are skipped.
 */
static int switch_to(const struct ident *to, bool privileged)
{
	bool known = applied.kind != AS_UNKNOWN;
	int r;

	if (caps_now == CAPS_UNKNOWN && (r = caps_set(CAPS_ALL)) < 0)
		goto fail;
	if (!known || to->kind != applied.kind || (to->kind == AS_CALLER &&
						   !groups_same(&to->c,
								&applied.c))) {
		if (to->kind == AS_SERVER) {
			r = syscall(SYS_SETGROUPS, (long)self_ngroups,
				    self_groups);
		} else {
			gid_t g[QFT_MAX_GROUPS];

			for (uint32_t i = 0; i < to->c.ngroups; i++)
				g[i] = (gid_t)to->c.groups[i];
			r = syscall(SYS_SETGROUPS, (long)to->c.ngroups, g);
		}
		if (r < 0) {
			r = -errno;
			goto fail;
		}
	}
	if ((!known || to->c.gid != applied.c.gid) &&
	    (r = set_fsgid((gid_t)to->c.gid)) < 0)
		goto fail;
	if (!known || to->c.uid != applied.c.uid) {
		if ((r = set_fsuid((uid_t)to->c.uid)) < 0)
			goto fail;
		if (!known || (to->c.uid == 0) != (applied.c.uid == 0))
			caps_now = CAPS_STALE;
	}
	if ((r = caps_set(privileged ? CAPS_ALL : CAPS_SETID)) < 0)
		goto fail;
	applied = *to;
	return 0;
fail:
	applied.kind = AS_UNKNOWN;
	return r;
}

static int apply_server(void)
{
	struct ident to = { .kind = AS_SERVER };
	int r;

	if (applied.kind == AS_SERVER)
		return 0;
	to.c.uid = (uint32_t)self_uid;
	to.c.gid = (uint32_t)self_gid;
	r = switch_to(&to, true);
	if (r < 0) {
		qft_err("cannot act as the server's own user again: %s",
			strerror(-r));
		return -EPERM;
	}
	return 0;
}

static int apply_caller(const struct qft_cred *c)
{
	struct ident to = { .kind = AS_CALLER };
	int r;

	if (applied.kind == AS_CALLER && cred_same(&applied.c, c))
		return 0;
	to.c.uid = c->uid;
	to.c.gid = c->gid;
	to.c.ngroups = c->ngroups;
	memcpy(to.c.groups, c->groups, c->ngroups * sizeof(c->groups[0]));
	r = switch_to(&to, c->uid == 0);
	if (r < 0) {
		qft_err("cannot act as uid %u gid %u: %s", c->uid, c->gid,
			strerror(-r));
		return -EPERM;
	}
	return 0;
}

void srv_cred_setup(bool off)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0,
	};
	const uint32_t need = (1u << CAP_SETUID) | (1u << CAP_SETGID);
	int n;

	available = false;
	if (off) {
		qft_debug("acting as each caller: off (%s=off)", SRV_CRED_ENV);
		return;
	}
	if (geteuid() != 0) {
		qft_debug("acting as each caller: no, not running as root");
		return;
	}
	if (syscall(SYS_capget, &h, self_caps) < 0 ||
	    (self_caps[0].permitted & need) != need) {
		qft_debug("acting as each caller: no, CAP_SETUID or CAP_SETGID "
			  "is missing");
		return;
	}
	self_uid = geteuid();
	self_gid = getegid();
	n = getgroups(0, NULL);
	if (n < 0 || !(self_groups = calloc((size_t)n + 1,
					    sizeof(*self_groups))) ||
	    (n = getgroups(n, self_groups)) < 0) {
		qft_debug("acting as each caller: no, cannot read the server's "
			  "groups");
		return;
	}
	self_ngroups = n;
	/* Tried once and undone: a user namespace without these ids, a
	 * seccomp filter, or capabilities the bounding set took away all
	 * show here, not at the first request. */
	if (apply_caller(&nobody) < 0 || apply_server() < 0) {
		qft_warn("cannot act as other users here (setfsuid/setgroups "
			 "refused): a mount other users share is refused");
		(void)apply_server();
		return;
	}
	available = true;
	qft_debug("acting as each caller: possible");
}

bool srv_cred_available(void)
{
	return available;
}

/* Who a request runs as, by what it names (cred.h). */
enum who { WHO_SERVER, WHO_HANDLE, WHO_CALLER };

static enum who who_for(const struct qft_msg *req)
{
	switch (req->op) {
	case QFT_OP_HELLO: case QFT_OP_RESUME: case QFT_OP_PING:
	case QFT_OP_SYNCFS: case QFT_OP_UNWATCH: case QFT_OP_BYE:
		return WHO_SERVER;
	case QFT_OP_FSTAT: case QFT_OP_READ: case QFT_OP_WRITE:
	case QFT_OP_FLUSH: case QFT_OP_FSYNC: case QFT_OP_CLOSE:
	case QFT_OP_FALLOCATE: case QFT_OP_READDIR: case QFT_OP_SCAN:
		return WHO_HANDLE;
	case QFT_OP_SETATTR:
		return req->handle ? WHO_HANDLE : WHO_CALLER;
	default:
		return WHO_CALLER;
	}
}

int srv_cred_enter(struct srv *s, const struct qft_msg *req,
		   const struct srv_cred *opener)
{
	if (!s->cred_on)
		return 0;
	switch (who_for(req)) {
	case WHO_SERVER:
		return apply_server();
	case WHO_HANDLE:
		if (req->flags & QFT_F_CRED)
			return apply_caller(&req->cred);
		if (opener)
			return apply_caller(&opener->c);
		/* No such handle: the handler says EBADF, as nobody. */
		return apply_caller(&nobody);
	case WHO_CALLER:
		if (req->flags & QFT_F_CRED)
			return apply_caller(&req->cred);
		break;
	}
	return -EACCES;
}

struct srv_cred *srv_cred_hold(struct srv *s, int *err)
{
	struct srv_creds *t = &s->creds;
	struct srv_cred *c;

	*err = 0;
	if (!s->cred_on || applied.kind != AS_CALLER)
		return NULL;
	for (c = t->head; c; c = c->next) {
		if (cred_same(&c->c, &applied.c)) {
			c->refs++;
			return c;
		}
	}
	if (t->n >= MAX_CREDS || !(c = calloc(1, sizeof(*c)))) {
		qft_warn("cannot keep the identity of another open file "
			 "(%u distinct ones held)", t->n);
		*err = -ENOMEM;
		return NULL;
	}
	c->refs = 1;
	c->owner = t;
	c->c = applied.c;
	c->next = t->head;
	if (t->head)
		t->head->prev = c;
	t->head = c;
	t->n++;
	return c;
}

void srv_cred_put(struct srv_cred *c)
{
	if (!c || --c->refs)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		c->owner->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->owner->n--;
	free(c);
}

bool srv_cred_unprivileged(void)
{
	return applied.kind == AS_CALLER && applied.c.uid != 0;
}

int srv_cred_begin_server(void)
{
	saved = applied;
	return apply_server();
}

int srv_cred_end_server(void)
{
	if (saved.kind == AS_CALLER)
		return apply_caller(&saved.c);
	return apply_server();
}
