/* SPDX-License-Identifier: MIT */
/*
 * File data I/O for READ, WRITE, FLUSH and FSYNC with pread/pwrite: the
 * posix backend of the engine (uring.h) and the path for handles that are
 * not regular files.
 *
 * In a build with -Dfault_injection=true this is also where test faults
 * enter: srv_io_fault_init() reads QFTFS_FAULT once, and every read, write
 * and sync of a regular file, through these functions or through the
 * io_uring backend (which asks srv_io_fault() before it starts an
 * operation), fails with EIO when the fault covers it.  Without the option
 * none of that is compiled.
 *
 * Error convention: a byte count or a negative errno.
 */
#ifndef SRV_IO_H
#define SRV_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Reads up to `len` bytes at `off`.  The count is short only at end of
 * file; an error after some bytes arrived is still an error, so a caller
 * never mistakes a failing disk for a short file.
 */
ssize_t srv_io_read(int fd, void *buf, size_t len, uint64_t off);
/* Writes all `len` bytes at `off`; returns `len` or a negative errno. */
ssize_t srv_io_write(int fd, const void *buf, size_t len, uint64_t off);
/*
 * One pread or pwrite (retried on EINTR only), for a direct descriptor:
 * what it leaves undone continues elsewhere, because O_DIRECT takes only
 * aligned offsets.  Subject to the same injected faults as the two above.
 */
ssize_t srv_io_read_once(int fd, void *buf, size_t len, uint64_t off);
ssize_t srv_io_write_once(int fd, const void *buf, size_t len, uint64_t off);
/* fsync, or fdatasync when `datasync`; 0 or a negative errno. */
int srv_io_sync(int fd, bool datasync);

#ifdef QFT_FAULT_INJECTION
/* The environment variable, and what --version says about it. */
#define SRV_IO_FAULT_ENV  "QFTFS_FAULT"
#define SRV_IO_FAULT_HELP \
	"read_eio_at=OFFSET,write_eio_at=OFFSET,fsync_eio,name_eio=NAME"

enum srv_io_fault_kind {
	SRV_IO_FAULT_READ,
	SRV_IO_FAULT_WRITE,
	SRV_IO_FAULT_SYNC,
};

/*
 * Parses QFTFS_FAULT (comma-separated read_eio_at=N, write_eio_at=N,
 * fsync_eio, name_eio=NAME) and logs what it armed.  -EINVAL on anything
 * else, logged.
 */
int srv_io_fault_init(void);
/*
 * -EIO when an operation of `kind` on `fd` covering [off, off + len)
 * must fail (a sync covers everything), else 0.  Only regular files fail.
 */
int srv_io_fault(int fd, enum srv_io_fault_kind kind, uint64_t off,
		 size_t len);
/* -EIO when a RENAME onto, a SETATTR by path of, or an OPEN of an entry
 * called `name` must fail (name_eio=NAME), else 0. */
int srv_io_fault_name(const char *name);
#else
static inline int srv_io_fault_name(const char *name)
{
	(void)name;
	return 0;
}
#endif

#endif /* SRV_IO_H */
