// SPDX-License-Identifier: MIT
/* The xattr hints (see hints.h). */
#include <pthread.h>
#include <string.h>

#include "fs/file.h"
#include "fs/fs.h"
#include "fs/hints.h"
#include "fs/node.h"
#include "protocol.h"

#define XATTR_CAPS "security.capability"

uint64_t qc_hint_xattr_gen(struct qc_fs *fs)
{
	return atomic_load(&fs->hints.xattr_gen);
}

/*
 * Remembers the server's NOXATTR hint (protocol.h) for attr_timeout, as
 * long as it trusts the attributes that carried it, or forgets it when
 * they did not carry it.  `xgen` is xattr_gen as it was before the request
 * that returned `a` was sent.
 */
void qc_hint_noxattr_note(struct qc_fs *fs, struct qn_node *n,
			  const struct qft_attr *a, uint64_t xgen)
{
	uint64_t until = 0;

	if ((a->flags & QFT_ATTR_NOXATTR) && fs->attr_timeout > 0 &&
	    atomic_load(&fs->hints.xattr_gen) == xgen)
		until = qc_fs_attr_until(fs);
	qn_set_noxattr_until(&fs->nodes, n, until);
}

bool qc_hint_noxattr(struct qc_fs *fs, struct qn_node *n)
{
	uint64_t now = qc_now_ns();

	return now < qn_noxattr_until(&fs->nodes, n);
}

bool qc_hint_nodefacl(struct qc_fs *fs, struct qn_node *n)
{
	return qc_hint_noxattr(fs, n) ||
	       qc_now_ns() < qn_nodefacl_until(&fs->nodes, n);
}

void qc_hint_nodefacl_note(struct qc_fs *fs, struct qn_node *n,
			   uint64_t xgen)
{
	if (fs->attr_timeout > 0 &&
	    atomic_load(&fs->hints.xattr_gen) == xgen)
		qn_set_nodefacl_until(&fs->nodes, n, qc_now_ns() +
				      (uint64_t)QC_HINT_NODEFACL_S *
				      1000000000u);
}

bool qc_hint_is_caps(const char *name)
{
	return strcmp(name, XATTR_CAPS) == 0;
}

uint64_t qc_hint_caps_gen(struct qc_fs *fs)
{
	return atomic_load(&fs->hints.caps_gen);
}

/*
 * The kernel asks for XATTR_CAPS before every write(2) to a file (FUSE
 * mounts are not SB_NOSEC, so file_remove_privs checks each time), which
 * would make every write wait a round trip and undo write-behind.  The
 * server's "none" is remembered on the node's open files for attr_timeout
 * seconds, the trust the kernel already gives the cached mode bits when it
 * clears set-id bits on write, and forgotten as soon as the name is set or
 * removed through this mount.  attr_timeout=0 turns this off.
 */
struct nocap_known_ctx {
	uint64_t now;
	bool known;
};

/* Table lock held, then the file's: the one lock order. */
static bool nocap_known_one(struct qn_file *nf, void *ctx)
{
	struct nocap_known_ctx *k = ctx;
	struct qc_file *f = (struct qc_file *)nf;

	pthread_mutex_lock(&f->lock);
	k->known = k->now < f->hint.nocap_until;
	pthread_mutex_unlock(&f->lock);
	return k->known;
}

bool qc_hint_nocap(struct qc_fs *fs, struct qn_node *n)
{
	struct nocap_known_ctx k = { .now = qc_now_ns(), .known = false };

	qn_for_each_file(&fs->nodes, n, nocap_known_one, &k);
	return k.known;
}

static bool nocap_set_one(struct qn_file *nf, void *ctx)
{
	struct qc_file *f = (struct qc_file *)nf;

	pthread_mutex_lock(&f->lock);
	f->hint.nocap_until = *(const uint64_t *)ctx;
	pthread_mutex_unlock(&f->lock);
	return false;
}

/* Remembers (until > 0) or forgets (0) that n has no capability. */
static void nocap_set(struct qc_fs *fs, struct qn_node *n, uint64_t until)
{
	qn_for_each_file(&fs->nodes, n, nocap_set_one, &until);
}

void qc_hint_nocap_note(struct qc_fs *fs, struct qn_node *n, uint64_t gen,
			uint64_t start)
{
	if (fs->attr_timeout > 0 && atomic_load(&fs->hints.caps_gen) == gen)
		nocap_set(fs, n, start + (uint64_t)(fs->attr_timeout * 1e9));
}

bool qc_hint_xattr_begin(struct qc_fs *fs, const char *name)
{
	bool caps = qc_hint_is_caps(name);

	if (caps)
		atomic_fetch_add(&fs->hints.caps_gen, 1);
	atomic_fetch_add(&fs->hints.xattr_gen, 1);
	return caps;
}

void qc_hint_xattr_end(struct qc_fs *fs, struct qn_node *n, bool caps)
{
	qn_set_noxattr_until(&fs->nodes, n, 0);
	qn_set_nodefacl_until(&fs->nodes, n, 0);
	if (caps)
		nocap_set(fs, n, 0);
}
