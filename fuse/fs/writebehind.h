/* SPDX-License-Identifier: MIT */
/*
 * Write-behind of an open file (qc_wb_): a WRITE is answered to the
 * kernel as soon as it is sent; wb.bytes counts what the server has not
 * acknowledged yet, bounded by the window (qc_wb_window).  Each WRITE is a
 * change in flight of the handle base (handle.h), where the first failed
 * one's error stays sticky and is returned by every later write, fsync
 * and flush until a flush reports it.
 *
 * The decisions (qc_wb_must_wait, qc_wb_account, qc_wb_complete) change
 * only the file's window and its changes in flight, send nothing and
 * never wait, with the file's lock held: tests/unit/test_stream.c drives
 * them without a connection.  qc_wb_write sends and waits, and takes the
 * locks itself; its completion, on the connection's reader thread, takes
 * only the file's lock, which nobody holds while sending or waiting.
 */
#ifndef QC_WRITEBEHIND_H
#define QC_WRITEBEHIND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct qc_fs;
struct qc_file;

/* A file's write-behind window; every field: the file's lock.  The
 * WRITEs' count and sticky error are the handle base's changes in flight
 * (handle.h). */
struct qc_wb {
	uint64_t bytes;         /* WRITE bytes sent, not answered */
};

/* Whether no WRITE data is unanswered (the file's lock held). */
static inline bool qc_wb_idle(const struct qc_wb *wb)
{
	return wb->bytes == 0;
}

/* The write-behind window in force now. */
uint64_t qc_wb_window(struct qc_fs *fs);

/* Write-behind decisions: the file's lock held. */
/* Whether a WRITE of `len` bytes must wait for room in the window (not
 * after an error: the write then fails at once). */
bool qc_wb_must_wait(const struct qc_file *f, uint64_t window, uint32_t len);
/* Counts a WRITE of `len` about to be sent as a change in flight, or
 * returns the sticky error that forbids it. */
int qc_wb_account(struct qc_file *f, uint32_t len);
/* Counts a WRITE of `len` as answered with `err` (0 or -errno). */
void qc_wb_complete(struct qc_file *f, uint32_t len, int err);

/*
 * Sends a WRITE of buf[0..len) at `off` behind the window (waiting for
 * room), or waits for its answer when the window is 0.  0, or the -errno
 * to answer the kernel's write with (a sticky error of an earlier WRITE).
 */
int qc_wb_write(struct qc_fs *fs, struct qc_file *f, const char *buf,
		uint32_t len, off_t off);
#endif /* QC_WRITEBEHIND_H */
