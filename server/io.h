/* SPDX-License-Identifier: MIT */
/*
 * File data I/O for READ, WRITE, FLUSH and FSYNC.  All of it goes through
 * these functions so that the io_uring backend (batched reads ahead of the
 * socket, a queue of writes behind it) can replace them in one place,
 * keeping pread/pwrite as the fallback when io_uring is unavailable.
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
/* fsync, or fdatasync when `datasync`; 0 or a negative errno. */
int srv_io_sync(int fd, bool datasync);

#endif /* SRV_IO_H */
