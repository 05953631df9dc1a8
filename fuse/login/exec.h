/* SPDX-License-Identifier: MIT */
/*
 * The last step of every child the client forks (the local server, the
 * OpenSSH client): a leaf below both the login layer's ssh and the net
 * layer's local endpoint, so neither reaches into the other for it.
 */
#ifndef QC_EXEC_H
#define QC_EXEC_H

/*
 * In a child about to become `argv`: unblocks every signal, closes every
 * descriptor from `first` on, executes it, and when that fails writes BEFORE argv[0] BETWEEN the
 * reason AFTER to stderr and exits 127.  Never returns.
 */
void qc_exec(char **argv, int first, const char *before,
	     const char *between, const char *after)
	__attribute__((noreturn));

#endif /* QC_EXEC_H */
