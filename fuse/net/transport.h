/* SPDX-License-Identifier: MIT */
/*
 * Local transport: the client starts qftfs-server itself and talks to it
 * over a socketpair that is the server's stdin and stdout (and a second
 * one for the meta stream, QC_META_FD).  The connection does not call this
 * file: it takes each link from a struct qc_transport_ops (net/conn.h),
 * whose local endpoint is built on this file and whose remote one on the
 * ssh bootstrap (login/bootstrap.h, qc_boot_open), which provides the same
 * thing -- a connected descriptor, sealed there, and something to end when
 * the link closes -- by other means.
 *
 * The server's stderr is ours while we run in the foreground.  A client
 * that is going to daemonize gives it a pipe instead and relays its lines
 * to syslog: otherwise the server would hold the caller's stderr open for
 * as long as the mount lives, and a caller waiting for the end of qftfs's
 * output (a shell's $(...), a test harness) would wait until unmount.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_TRANSPORT_H
#define QC_TRANSPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

/* The descriptor the server finds its meta stream on (--meta-fd). */
#define QC_META_FD     3
#define QC_META_FD_STR "3"

struct qc_transport {
	int fd;          /* our end of the socketpair; the caller owns it */
	int meta_fd;     /* our end of the meta stream's; the caller owns it */
	int errfd;       /* read end of the server's stderr pipe, or -1 */
	pid_t pid;       /* the server process, or 0 once reaped */
	pid_t parent;    /* our pid when spawning: only it can reap `pid` */
	char *argv0;     /* the program we asked to run, for messages */

	pthread_t relay;
	bool relay_running;       /* owner thread only */
	pthread_mutex_t lock;
	pthread_cond_t cond;      /* lock: signalled when relay_done is set */
	bool relay_done;          /* lock */
};

/*
 * Starts `server_cmd` (split on blanks, no shell; NULL for the default:
 * qftfs-server next to our own binary if it is there, else from PATH) with
 * "--stdio --root ROOT --meta-fd 3" appended: a second socketpair is the
 * server's descriptor 3, for the meta stream (conn.h, "Two streams"); a
 * server that does not serve it closes it; `follow` appends
 * "--follow-symlinks" too (-o follow_symlinks).  With `capture_stderr` the
 * server's stderr is a pipe (t->errfd).  Any thread may call it (a
 * reconnect does): the child makes only async-signal-safe calls before
 * exec, apart from formatting the message when exec fails.  On success
 * t->fd and t->meta_fd are connected to the server.
 */
int qc_transport_spawn(struct qc_transport *t, const char *server_cmd,
		       const char *root, bool follow, bool capture_stderr);

/*
 * Copies what the server wrote to its stderr pipe to our stderr, until the
 * pipe's end or `timeout_ms` of silence.  For reporting a failed start
 * while still in the foreground.
 */
void qc_transport_copy_stderr(struct qc_transport *t, int timeout_ms);

/* Relays the server's stderr pipe line by line to our log (syslog once
 * daemonized) from a thread of its own; no-op without a pipe. */
int qc_transport_relay_start(struct qc_transport *t);

/*
 * Waits up to `timeout_ms` for the server to exit (after the caller ended
 * the connection), then kills it.  *status gets the waitpid status when
 * known.  Returns 0 when the server was reaped, -ECHILD when it is no
 * longer our child (we daemonized: init reaps it), or another -errno.
 */
int qc_transport_reap(struct qc_transport *t, int timeout_ms, int *status);

/*
 * The same after a fault (the connection timed out or broke): the server
 * gets `timeout_ms` to notice the end of its stream and exit, then SIGKILL
 * -- a stopped or stuck server would ignore anything milder, and one
 * whose client gave up has nothing left to finish.
 */
int qc_transport_kill(struct qc_transport *t, int timeout_ms, int *status);

/* Stops the relay (waiting up to `timeout_ms` for the pipe's end) and
 * frees what spawn allocated; does not close t->fd. */
void qc_transport_free(struct qc_transport *t, int timeout_ms);

/* Describes a waitpid status for a message ("exit status 127"). */
const char *qc_transport_status_str(int status, char *buf, size_t size);

#endif /* QC_TRANSPORT_H */
