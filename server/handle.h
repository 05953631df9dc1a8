/* SPDX-License-Identifier: MIT */
/*
 * Open files and directories, indexed by the handle number the client
 * chose (1..QFT_MAX_HANDLES).  The table grows on demand up to the highest
 * handle in use, so memory stays proportional to what the client opened
 * and is bounded by QFT_MAX_HANDLES entries.
 *
 * Using a handle that is not open, or that is open as the other kind, is
 * EBADF; so is opening a handle number that is already open.
 * Error convention: 0 or a negative errno.
 */
#ifndef SRV_HANDLE_H
#define SRV_HANDLE_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum srv_handle_kind {
	SRV_H_FREE = 0,
	SRV_H_FILE,
	SRV_H_DIR,
	SRV_H_ANY,      /* lookups only: either open kind */
};

struct srv_scan;
struct srv_cred;

struct srv_handle {
	enum srv_handle_kind kind;
	int fd;         /* the file, or dirfd(dir) */
	DIR *dir;       /* SRV_H_DIR: the stream READDIR walks */
	bool dirty;     /* file: written since the last successful sync */
	int err;        /* file: first failed write's -errno, until FLUSH */
	long dir_pos;   /* dir: cookie the stream stands at, 0 = start */
	struct srv_scan *scan; /* dir: the SCAN in progress (scan.h), or NULL */
	/* file, set at open: READ and WRITE of a regular file go through
	 * the I/O engine (xfer.c), which must order them against other
	 * handles of the same file (dev, ino) and keep O_APPEND writes in
	 * sequence. */
	bool regular;
	bool append;
	uint64_t dev, ino;  /* of a directory too: its entries' device */
	/* file, regular: write-out behind a sequential stream of WRITEs
	 * (xfer.c): bytes [wb_start, wb_end) were written by it but their
	 * write-out not started, and below wb_waited it has completed.
	 * wb_off: sync_file_range refused, or failed, on this file. */
	uint64_t wb_start, wb_end, wb_waited;
	bool wb_off;
	/* file, set at open (QFT_O_LAZY): nobody waits for its data to be
	 * durable at close, so there is no write-out behind its WRITEs */
	bool lazy;
	/* file, regular: the same file opened again with O_DIRECT for large
	 * aligned READs and WRITEs (xfer.c), or -1; dio_tried once that was
	 * decided; the alignment statx gave (0: none, or no direct I/O). */
	int dfd;
	bool dio_tried;
	/* READs at [dio_rd_from, dio_rd_until) go direct when dio_rd: the
	 * window's cache state as last probed */
	bool dio_rd;
	uint64_t dio_rd_from, dio_rd_until;
	uint32_t dio_mem_align, dio_off_align;
	/* file opened for writing: its registration with the session's
	 * change notification (srv_watch_writer_open), 0 if none */
	uint32_t watch_writer;
	/* either kind, on a connection that acts as its callers: who opened
	 * it, whom requests on it without a caller act as (cred.h); a
	 * counted reference, dropped when the handle closes */
	struct srv_cred *cred;
};

/*
 * Open directory handles at most.  Each holds a libc directory stream
 * with a 32 KiB buffer, so without a cap a client could make the server
 * take 2 GiB by opening QFT_MAX_HANDLES directories; past it OPENDIR fails
 * with EMFILE.  Far above what tools keep open (one per level of a tree
 * walk).
 */
#define SRV_MAX_DIRS 1024u

struct srv_handles {
	struct srv_handle *tab;  /* tab[h] for h < cap; tab[0] unused */
	size_t cap;
	unsigned ndirs;          /* SRV_H_DIR entries */
	size_t scan_mem;         /* bytes the scans of its handles hold */
};

void srv_handle_init(struct srv_handles *t);
/* Closes every open handle and frees the table. */
void srv_handle_destroy(struct srv_handles *t);

/* The open handle `h` of `kind` (or either kind for SRV_H_ANY). */
int srv_handle_get(struct srv_handles *t, uint64_t h,
		   enum srv_handle_kind kind, struct srv_handle **out);
/*
 * Checks that `h` is free and makes room for it, without opening it: the
 * caller then opens the object and calls srv_handle_set_*().  The pointer
 * stays valid until the next srv_handle_reserve().
 */
int srv_handle_reserve(struct srv_handles *t, uint64_t h,
		       struct srv_handle **out);
void srv_handle_set_file(struct srv_handle *e, int fd);
/* The caller checked t->ndirs < SRV_MAX_DIRS before opening `dir`. */
void srv_handle_set_dir(struct srv_handles *t, struct srv_handle *e,
			DIR *dir);
/* Closes handle `h` (either kind); the slot is freed even on error. */
int srv_handle_close(struct srv_handles *t, uint64_t h);

#endif /* SRV_HANDLE_H */
