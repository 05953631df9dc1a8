// SPDX-License-Identifier: MIT
/*
 * The callbacks of open directories: opendir, readdir, readdirplus and
 * releasedir (fsyncdir is fsync, files.c; see internal.h).  Listings
 * themselves are the directory cache's (fs/dircache.h).
 */
#include <errno.h>
#include <stdint.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "msg.h"
#include "fs/node.h"
#include "ops/internal.h"
#include "protocol.h"

void qc_ops_opendir(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qc_file *f;
	struct qft_msg m;
	uint64_t handle, gen;
	int r;

	r = qc_ops_node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	if (qc_dir_open_lazily(fs, qc_fs_node(fs, ino))) {
		/* A walk's directories cost no round trip each. */
		f = qc_file_new(fs, true, fi->flags);
		if (!f) {
			r = -ENOMEM;
			goto out_err;
		}
		qc_dir_ahead_lazy(f);
		/* A number of no link (f->gen is 0): nothing is sent for it
		 * and freeing it frees nobody's. */
		handle = 1;
		goto out_attach;
	}
	r = qc_file_begin(fs, true, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = handle;
	qc_set_str(&m.path, path);
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, handle);
		r = qc_file_open_error(fs, qc_fs_node(fs, ino), path, r);
		goto out_free_file;
	}
	qc_reply_free(&rep);
out_attach:
	qn_file_attach(&fs->nodes, qc_fs_node(fs, ino), &f->nf, handle);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) != 0)
		qc_file_release(fs, f);
	return;

out_free_file:
	qc_file_free(f);
out_err:
	fuse_reply_err(req, -r);
}

void qc_ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	qc_dir_readdir(req, fs_of(req), file_of(fi), ino, size, off, false);
}

void qc_ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			off_t off, struct fuse_file_info *fi)
{
	qc_dir_readdir(req, fs_of(req), file_of(fi), ino, size, off, true);
}

void qc_ops_releasedir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	qc_file_release(fs_of(req), file_of(fi));
	fuse_reply_err(req, 0);
}
