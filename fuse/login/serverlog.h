/* SPDX-License-Identifier: MIT */
/*
 * What the remote qftfs-server writes to its stderr, in our log: a leaf
 * below both ssh logins, libssh2's channel pump (ssh_pump.c) and the
 * OpenSSH client's stderr reader (sshproc.c), so neither reaches into the
 * other for it.
 */
#ifndef QC_SERVERLOG_H
#define QC_SERVERLOG_H

#include <stddef.h>

/* Logs one line (of `n` bytes; `line` has room for a NUL after them) the
 * remote command wrote to its stderr, as "qftfs-server@HOST: ...". */
void qc_serverlog_line(const char *host, char *line, size_t n);

#endif /* QC_SERVERLOG_H */
