// SPDX-License-Identifier: MIT
/*
 * The mount's counters as text (see stats.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "msg.h"
#include "protocol.h"
#include "fs/stats.h"

static const char *const stat_names[QC_STAT__COUNT] = {
	[QC_STAT_LOOKUP_LOCAL]  = "lookups_local",
	[QC_STAT_GETATTR_LOCAL] = "getattrs_local",
	[QC_STAT_CREATE_ASYNC]  = "creates_pipelined",
	[QC_STAT_SETATTR_ASYNC] = "setattrs_pipelined",
	[QC_STAT_RENAME_ASYNC]  = "renames_pipelined",
	[QC_STAT_OPEN_ASYNC]    = "opens_pipelined",
	[QC_STAT_CLOSE_WAIT]    = "closes_waited",
	[QC_STAT_PIPE_ERROR]    = "pipelined_errors",
	[QC_STAT_STAT_WAIT]     = "stats_waited_for_create",
	[QC_STAT_BYTES_READ]    = "bytes_read",
	[QC_STAT_BYTES_WRITTEN] = "bytes_written",
	[QC_STAT_READS]         = "reads",
	[QC_STAT_WRITES]        = "writes",
	[QC_STAT_FILES_READ]    = "files_read",
	[QC_STAT_FILES_WRITTEN] = "files_written",
	[QC_STAT_FILES_CREATED] = "files_created",
	[QC_STAT_REQUESTS]      = "requests",
	[QC_STAT_COPIES]        = "copies_on_server",
	[QC_STAT_COPIED]        = "bytes_copied_on_server",
	[QC_STAT_SEEKS]         = "seeks_on_server",
	[QC_STAT_SEEKS_LOCAL]   = "seeks_local",
	[QC_STAT_GETXATTR_LOCAL] = "getxattrs_local",
	[QC_STAT_WALK_FILES]    = "walk_files",
	[QC_STAT_WALK_BYTES]    = "walk_bytes",
	[QC_STAT_WALK_FETCHED]  = "walk_fetched_bytes",
	[QC_STAT_WALK_WASTE]    = "walk_waste_bytes",
	[QC_STAT_WALK_WAITS]    = "walk_waits",
};

/*
 * Appends one line.  `len` keeps counting past `size` so the caller can
 * learn the full length; `used` is what went into buf: whole lines only,
 * so that a text that grew between measuring and writing (a counter
 * gained a digit) loses its last lines, never half of one.
 */
struct out {
	char *buf;
	size_t size, len, used;
	bool full;
};

static void put(struct out *o, const char *name, uint64_t v)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "%s %llu\n", name,
			 (unsigned long long)v);

	if (!o->full && o->used + (size_t)n <= o->size) {
		memcpy(o->buf + o->used, line, (size_t)n);
		o->used += (size_t)n;
	} else {
		o->full = true;
	}
	o->len += (size_t)n;
}

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void probe_done(void *ctx, int err, struct qc_reply *rep)
{
	struct qc_stats *st = ctx;
	uint64_t sent = atomic_exchange(&st->probe_sent_us, 0);
	uint64_t us;

	(void)rep;
	if (err < 0 || sent == 0)
		return;
	us = (uint64_t)mono_us() - sent;
	atomic_store(&st->rtt_us, us ? us : 1);
}

void qc_stats_probe(struct qc_stats *st, struct qc_conn *conn)
{
	uint64_t gen, idle = 0;
	struct qft_msg m;

	/*
	 * Sending on a link that is being resumed waits for it (conn.h):
	 * none goes out while the connection knows it is down.  One that
	 * dies between this look and the send holds this caller until the
	 * resume or its grace ends -- a window of a lock's length.
	 */
	gen = conn ? qc_conn_gen(conn) : 0;
	if (!gen || qc_conn_lost(conn) ||
	    !atomic_compare_exchange_strong(&st->probe_sent_us, &idle,
					    (uint64_t)mono_us()))
		return;
	atomic_fetch_add(&st->probes, 1);
	qft_msg_init(&m, QFT_OP_PING, 0);
	/* A failure to send has run the callback, which cleared it. */
	(void)qc_call_async(conn, gen, &m, probe_done, st);
}

size_t qc_stats_format(struct qc_stats *st, struct qc_conn *conn,
		       char *buf, size_t size)
{
	struct qc_conn_counts cc = { 0 };
	struct qc_stats_live live = { 0 };
	uint64_t probes, errors = 0;
	struct out o = { .buf = buf, .size = size };

	probes = atomic_load(&st->probes);

	if (conn)
		qc_conn_counts(conn, &cc);
	put(&o, "requests_waited", cc.waited);
	/* Our own probes were not the application's. */
	put(&o, "requests_async", cc.async > probes ? cc.async - probes : 0);
	put(&o, "requests_noreply", cc.noreply);
	for (int i = 0; i < QC_STAT__COUNT; i++)
		put(&o, stat_names[i],
		    atomic_load_explicit(&st->v[i], memory_order_relaxed));
	if (st->live)
		st->live(&live);
	put(&o, "in_flight", live.in_flight);
	put(&o, "oldest_ms", live.oldest_ms);
	put(&o, "read_rate", live.read_rate);
	put(&o, "write_rate", live.write_rate);
	put(&o, "transfers", live.transfers);
	put(&o, "transfers_closed", live.transfers_closed);
	put(&o, "server_in_flight", cc.pending);
	put(&o, "server_oldest_ms", cc.oldest_ms);
	put(&o, "writes_unacked", cc.writes_pending);
	put(&o, "async_backlog",
	    st->backlog ? st->backlog(st) : 0);
	put(&o, "rtt_us", atomic_load(&st->rtt_us));
	put(&o, "reconnects", cc.links > 1 ? cc.links - 1 : 0);
	put(&o, "connected", conn && !qc_conn_lost(conn));
	/* QC_LINK_UP 0, QC_LINK_RESUMING 1, QC_LINK_DOWN 2 (net/conn.h). */
	put(&o, "link_state", conn ? cc.state : QC_LINK_DOWN);
	put(&o, "resume_left_ms", cc.resume_left_ms);
	put(&o, "resumes", cc.resumes);
	put(&o, "resume_kept", cc.kept);
	put(&o, "resume_kept_bytes", cc.kept_bytes);
	put(&o, "payload_sent", cc.tx_bytes);
	put(&o, "wire_sent", cc.tx_wire);
	put(&o, "payload_received", cc.rx_bytes);
	put(&o, "wire_received", cc.rx_wire);
	put(&o, "streams", cc.streams ? cc.streams : 1);
	put(&o, "streams_up", cc.streams_up ? cc.streams_up : 1);
	put(&o, "streams_down", cc.streams_down ? cc.streams_down : 1);
	/* Names as keys, so that the format stays "key number": which TCP
	 * congestion control file data goes with each way, when TCP. */
	if (cc.cc_up[0]) {
		char key[48];

		snprintf(key, sizeof(key), "congestion_up_%s", cc.cc_up);
		put(&o, key, 1);
	}
	if (cc.cc_down[0]) {
		char key[48];

		snprintf(key, sizeof(key), "congestion_down_%s", cc.cc_down);
		put(&o, key, 1);
	}
	for (int e = 1; e <= QC_STATS_ERRNO_MAX; e++)
		errors += atomic_load_explicit(&st->err[e],
					       memory_order_relaxed);
	put(&o, "errors", errors);
	for (int e = 1; e <= QC_STATS_ERRNO_MAX; e++) {
		uint64_t n = atomic_load_explicit(&st->err[e],
						  memory_order_relaxed);
		const char *name = strerrorname_np(e);
		char key[48];

		if (!n)
			continue;
		if (name)
			snprintf(key, sizeof(key), "errors_%s", name);
		else
			snprintf(key, sizeof(key), "errors_%d", e);
		put(&o, key, n);
	}
	return size ? o.used : o.len;
}
