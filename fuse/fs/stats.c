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

/* One PING on the live link, timed: the round trip as the user's next
 * request would see it (behind what is queued already). */
static void probe_rtt(struct qc_stats *st, struct qc_conn *conn)
{
	struct qc_reply rep;
	struct qft_msg m;
	int64_t t0;

	if (qc_conn_lost(conn))
		return;
	qft_msg_init(&m, QFT_OP_PING, 0);
	t0 = mono_us();
	if (qc_call(conn, &m, &rep) == 0) {
		uint64_t us = (uint64_t)(mono_us() - t0);

		qc_reply_free(&rep);
		atomic_store(&st->rtt_us, us ? us : 1);
	}
	atomic_fetch_add(&st->probes, 1);
}

size_t qc_stats_format(struct qc_stats *st, struct qc_conn *conn,
		       char *buf, size_t size)
{
	struct qc_conn_counts cc = { 0 };
	struct qc_stats_live live = { 0 };
	uint64_t probes, errors = 0;
	struct out o = { .buf = buf, .size = size };

	/*
	 * The round trip is measured when the length is asked for (size 0),
	 * the getxattr's first step, so that the text then written has the
	 * length announced.
	 */
	if (conn && !size)
		probe_rtt(st, conn);
	probes = atomic_load(&st->probes);

	if (conn)
		qc_conn_counts(conn, &cc);
	/* Our own earlier probes were not the application's. */
	put(&o, "requests_waited",
	    cc.waited > probes ? cc.waited - probes : 0);
	put(&o, "requests_async", cc.async);
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
