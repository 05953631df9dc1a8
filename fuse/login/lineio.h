/* SPDX-License-Identifier: MIT */
/*
 * Line I/O on the exec channel before the data plane: the install
 * exchange (install.c) and the server's greeting (bootstrap.c) read the
 * remote command's lines through it.  A leaf below both, so that neither
 * calls into the other for it.
 *
 * Error convention: a length or a negative errno, without a message (the
 * caller knows what it was waiting for).
 */
#ifndef QC_LINEIO_H
#define QC_LINEIO_H

#include <stddef.h>

/*
 * Reads one line from `fd` a byte at a time (nothing after the newline is
 * consumed: it belongs to the server).  Its length without the newline,
 * -EPIPE at end of stream (buf holds what came before it), -ETIMEDOUT, or
 * -EMSGSIZE when it does not fit.
 */
int qc_line_read(int fd, char *buf, size_t size, int timeout_ms);

#endif /* QC_LINEIO_H */
