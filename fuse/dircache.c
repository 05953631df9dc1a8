// SPDX-License-Identifier: MIT
/* Directory listings read ahead of the kernel (see dircache.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "conn.h"
#include "dircache.h"
#include "file.h"
#include "fs.h"
#include "hints.h"
#include "msg.h"
#include "node.h"
#include "protocol.h"

void qc_dir_ahead_drop(struct qc_dir_ahead *a)
{
	if (a->valid)
		qc_reply_free(&a->rep);
	memset(a, 0, sizeof(*a));
}

static bool is_dot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/*
 * Fills `buf` from a READDIR reply.  With `plus`, every entry handed to the
 * kernel with a node id counts one lookup, so nodes are made only for the
 * entries that fit, and "." and ".." get node id 0 (no dentry).  The
 * looked-up nodes are listed in `counted` so a lost reply can undo them.
 */
static size_t fill_dir(fuse_req_t req, struct qc_fs *fs, fuse_ino_t ino,
		       const struct qft_blob *data, bool plus, uint64_t xgen,
		       char *buf, size_t size, struct qn_node **counted,
		       size_t *ncounted, size_t *consumed, uint64_t *last_off)
{
	struct qft_dirent d;
	struct qcur c;
	size_t used = 0;

	*ncounted = 0;
	*consumed = 0;
	qcur_init(&c, data->p, data->len);
	while (c.left && qft_dirent_decode(&c, &d, plus) == 0) {
		size_t need;

		if (plus) {
			struct fuse_entry_param e;

			need = fuse_add_direntry_plus(req, NULL, 0, d.name.s,
						      NULL, 0);
			if (need > size - used)
				break;
			memset(&e, 0, sizeof(e));
			if (d.has_attr && !is_dot(d.name.s)) {
				struct qn_node *n;

				n = qn_lookup(&fs->nodes, qc_fs_node(fs, ino),
					      d.name.s, &d.attr);
				if (n) {
					counted[(*ncounted)++] = n;
					qc_hint_noxattr_note(fs, n, &d.attr, xgen);
					qc_fs_fill_entry(fs, &e, n, &d.attr);
				}
			}
			if (e.ino == 0) {
				e.attr.st_ino = d.ino;
				e.attr.st_mode = d.type;
			}
			fuse_add_direntry_plus(req, buf + used, size - used,
					       d.name.s, &e, (off_t)d.off);
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = d.ino;
			st.st_mode = d.type;
			need = fuse_add_direntry(req, buf + used, size - used,
						 d.name.s, &st, (off_t)d.off);
			if (need > size - used)
				break;
		}
		used += need;
		*consumed = data->len - c.left;
		*last_off = d.off;
	}
	return used;
}

/*
 * Whether the kernel's readdir at `off` continues the listing `a` holds,
 * with the same kind of entries and attributes still fresh enough.
 */
static bool ahead_usable(const struct qc_dir_ahead *a, uint64_t off, bool plus)
{
	return a->valid && a->plus == plus && a->next == off &&
	       qc_now_ns() < a->until &&
	       (a->pos < a->rep.msg.data.len || a->eof);
}

void qc_dir_readdir(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		    fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct qc_dir_ahead *a = &f->ahead;
	struct qn_node **counted = NULL;
	size_t used, ncounted = 0, consumed = 0;
	uint64_t last_off = (uint64_t)off;
	struct qft_blob rest;
	struct qft_msg m;
	char *buf = NULL;
	int r, n;

	if (size > QFT_MAX_READDIR)
		size = QFT_MAX_READDIR;
	if (!ahead_usable(a, (uint64_t)off, plus)) {
		if (a->valid)
			qc_reply_free(&a->rep);
		memset(a, 0, sizeof(*a));
		qft_msg_init(&m, QFT_OP_READDIR, 0);
		m.offset = (uint64_t)off;
		/*
		 * As much as a reply may carry, unless nothing may be kept
		 * (attr_timeout=0): then just what the kernel asked for.
		 */
		m.length = fs->attr_timeout > 0 ? QFT_MAX_READDIR : size;
		m.opflags = plus ? QFT_READDIR_PLUS : 0;
		a->xgen = qc_hint_xattr_gen(fs);
		a->until = qc_now_ns() + (uint64_t)(fs->attr_timeout * 1e9);
		/*
		 * A directory handle re-opened after a reconnect is a new
		 * stream: a listing in progress (a cookie other than 0)
		 * resumes only where the server's filesystem keeps cookies
		 * stable across opens, and may otherwise fail with EIO; a
		 * new listing starts clean.
		 */
		r = qc_file_call(fs, f, &m, &a->rep);
		if (r < 0)
			goto out_err;
		a->valid = true;
		n = qc_readdir_check(&a->rep.msg.data, plus);
		if (n < 0) {
			r = n;
			goto out_drop;
		}
		a->plus = plus;
		a->eof = (a->rep.msg.opflags & QFT_READDIR_EOF) != 0;
		a->next = (uint64_t)off;
	}
	rest.p = a->rep.msg.data.p + a->pos;
	rest.len = a->rep.msg.data.len - (uint32_t)a->pos;
	/* One lookup per entry at most; entries are at least 21 bytes. */
	n = (int)(rest.len / 21) + 1;
	buf = malloc(size ? size : 1);
	counted = calloc((size_t)n, sizeof(*counted));
	if (!buf || !counted) {
		r = -ENOMEM;
		goto out_drop;
	}
	used = fill_dir(req, fs, ino, &rest, plus, a->xgen, buf, size,
			counted, &ncounted, &consumed, &last_off);
	/*
	 * Done with `a` before replying: once the kernel has the reply it
	 * may release the directory, and `f` with it.  Should the reply not
	 * arrive, the kernel asks again at `off`, which no longer matches.
	 */
	a->pos += consumed;
	a->next = last_off;
	/* Drained and not the end: the next call asks the server. */
	if (a->pos >= a->rep.msg.data.len && !a->eof) {
		qc_reply_free(&a->rep);
		memset(a, 0, sizeof(*a));
	}
	if (fuse_reply_buf(req, buf, used) != 0) {
		/* The kernel never saw these entries: undo their lookups. */
		for (size_t i = 0; i < ncounted; i++)
			qn_forget(&fs->nodes, counted[i], 1);
	}
	free(counted);
	free(buf);
	return;

out_drop:
	free(counted);
	free(buf);
	qc_reply_free(&a->rep);
	memset(a, 0, sizeof(*a));
out_err:
	fuse_reply_err(req, -r);
}

/* The cache itself comes next; until then nothing is known. */
int qc_dir_lookup(struct qc_fs *fs, struct qn_node *parent, const char *name,
		  struct qft_attr *out)
{
	return -EAGAIN;
}

bool qc_dir_cached_attr(struct qc_fs *fs, struct qn_node *n,
			struct qft_attr *out)
{
	return false;
}

bool qc_dir_leased_absent(struct qc_fs *fs, struct qn_node *parent,
			  const char *name)
{
	return false;
}

void qc_dir_note_entry(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, const struct qft_attr *a)
{
}

void qc_dir_note_gone(struct qc_fs *fs, struct qn_node *parent,
		      const char *name)
{
}

void qc_dir_drop(struct qc_fs *fs, struct qn_node *parent)
{
}

void qc_dir_xattr_changed(struct qc_fs *fs, struct qn_node *n)
{
}
