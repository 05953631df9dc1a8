/* SPDX-License-Identifier: MIT */
/*
 * Directory listings read ahead of the kernel.
 *
 * The kernel lists a directory a page at a time; asking the server for a
 * page each time cost `ls -l` of 1,000 entries about ten round trips.
 * The client asks for QFT_MAX_READDIR instead and serves the kernel's next
 * pages from what is left of that reply while it reads on from where it
 * stopped.  The entries of a READDIR PLUS reply become nodes (one kernel
 * lookup each) as they are handed to the kernel, with their attributes
 * and xattr hints.
 *
 * State is per open directory (struct qc_dir_ahead in struct qc_file).
 * The kernel does not run two readdirs of one open directory at once (its
 * file position lock), so only qc_dir_readdir touches it, one call at a
 * time, and without the file's lock.
 */
#ifndef QC_DIRCACHE_H
#define QC_DIRCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

#include "conn.h"

struct qc_fs;
struct qc_file;

/* The rest of a directory's last READDIR reply. */
struct qc_dir_ahead {
	struct qc_reply rep;    /* owns the entries */
	bool valid;
	bool plus;              /* READDIR PLUS: entries carry attributes */
	bool eof;               /* the reply ended the directory */
	size_t pos;             /* first unserved byte of rep.msg.data */
	uint64_t next;          /* the cookie the kernel asks for next */
	uint64_t until;         /* CLOCK_MONOTONIC ns: attributes trusted */
	uint64_t xgen;          /* xattr_gen before the READDIR was sent */
};

/*
 * Answers the kernel's READDIR (or with `plus` READDIRPLUS) of `size`
 * bytes at cookie `off` on open directory f of node `ino`: from what was
 * read ahead when it continues that listing, else with a new READDIR.
 * Replies to req exactly once.
 */
void qc_dir_readdir(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		    fuse_ino_t ino, size_t size, off_t off, bool plus);

/* Frees what was read ahead (the directory is released). */
void qc_dir_ahead_drop(struct qc_dir_ahead *a);

#endif /* QC_DIRCACHE_H */
