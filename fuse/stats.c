// SPDX-License-Identifier: MIT
/*
 * The mount's counters as text (see stats.h).
 */
#include <stdio.h>

#include "stats.h"

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
};

/* Appends one line; `len` keeps counting past `size` so the caller can
 * learn the full length. */
static void put(char *buf, size_t size, size_t *len, const char *name,
		uint64_t v)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%s %llu\n", name,
			 (unsigned long long)v);

	for (int i = 0; i < n; i++, (*len)++)
		if (*len < size)
			buf[*len] = line[i];
}

size_t qc_stats_format(const struct qc_stats *st, struct qc_conn *conn,
		       char *buf, size_t size)
{
	struct qc_conn_counts cc = { 0 };
	size_t len = 0;

	if (conn)
		qc_conn_counts(conn, &cc);
	put(buf, size, &len, "requests_waited", cc.waited);
	put(buf, size, &len, "requests_async", cc.async);
	put(buf, size, &len, "requests_noreply", cc.noreply);
	for (int i = 0; i < QC_STAT__COUNT; i++)
		put(buf, size, &len, stat_names[i],
		    atomic_load_explicit(&st->v[i], memory_order_relaxed));
	return len;
}
