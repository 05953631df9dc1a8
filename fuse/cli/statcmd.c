// SPDX-License-Identifier: MIT
/*
 * qftfs --stats (see statcmd.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/xattr.h>

#include "cli/statcmd.h"
#include "fs/stats.h"
#include "net/conn.h"

#define MAX_COUNTERS 256
#define MAX_XFERS    64

struct counter {
	char name[48];
	uint64_t v;
};

struct xfer {
	uint64_t rd, wr, age_ms;
	int open;
	char path[512];
};

struct snap {
	struct counter c[MAX_COUNTERS];
	size_t n;
	struct xfer x[MAX_XFERS];
	size_t nx;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The value of one of the mount root's own attributes, NUL-terminated
 * (malloc'd), or NULL with the reason printed. */
static char *read_attr(const char *mnt, const char *name)
{
	for (size_t size = 4096; size <= (1u << 20); size *= 4) {
		char *buf = malloc(size);
		ssize_t n;

		if (!buf)
			return NULL;
		n = getxattr(mnt, name, buf, size - 1);
		if (n >= 0) {
			buf[n] = '\0';
			return buf;
		}
		free(buf);
		if (errno == ERANGE)
			continue;
		fprintf(stderr, "qftfs: --stats %s: %s%s\n", mnt,
			strerror(errno),
			errno == ENODATA || errno == ENOTSUP ?
			" (not the root of a qftfs mount?)" :
			errno == EACCES ? " (the statistics are the mounting "
			"user's)" : "");
		return NULL;
	}
	return NULL;
}

static int take(const char *mnt, struct snap *s)
{
	char *text = read_attr(mnt, QC_STATS_XATTR), *line, *save = NULL;

	memset(s, 0, sizeof(*s));
	if (!text)
		return -1;
	for (line = strtok_r(text, "\n", &save); line && s->n < MAX_COUNTERS;
	     line = strtok_r(NULL, "\n", &save)) {
		struct counter *c = &s->c[s->n];
		unsigned long long v;

		if (sscanf(line, "%47s %llu", c->name, &v) == 2) {
			c->v = v;
			s->n++;
		}
	}
	free(text);
	text = read_attr(mnt, QC_TRANSFERS_XATTR);
	if (!text)
		return -1;
	save = NULL;
	for (line = strtok_r(text, "\n", &save); line && s->nx < MAX_XFERS;
	     line = strtok_r(NULL, "\n", &save)) {
		struct xfer *x = &s->x[s->nx];
		unsigned long long rd, wr, age;
		int off = 0;

		if (sscanf(line, "%llu %llu %llu %d %n", &rd, &wr, &age,
			   &x->open, &off) >= 4 && off > 0) {
			x->rd = rd;
			x->wr = wr;
			x->age_ms = age;
			snprintf(x->path, sizeof(x->path), "%s", line + off);
			s->nx++;
		}
	}
	free(text);
	return 0;
}

static uint64_t get(const struct snap *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->c[i].name, name) == 0)
			return s->c[i].v;
	return 0;
}

/* 1536 -> "1.5 KiB" */
static const char *human(uint64_t v, char *buf, size_t size)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 " B", v);
	else
		snprintf(buf, size, "%.1f %s", d, unit[u]);
	return buf;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void print_json(const char *mnt, const struct snap *s)
{
	uint64_t sent = get(s, "payload_sent"), wire = get(s, "wire_sent");
	bool first = true;

	printf("{\"mountpoint\": ");
	json_str(stdout, mnt);
	for (size_t i = 0; i < s->n; i++) {
		/* Said below in their own shape. */
		if (strncmp(s->c[i].name, "errors", 6) == 0 ||
		    strcmp(s->c[i].name, "transfers") == 0)
			continue;
		printf(", \"%s\": %" PRIu64, s->c[i].name, s->c[i].v);
	}
	printf(", \"rtt_ms\": %.3f", (double)get(s, "rtt_us") / 1000.0);
	if (sent)
		printf(", \"compression_ratio\": %.3f",
		       (double)wire / (double)sent);
	else
		printf(", \"compression_ratio\": null");
	printf(", \"errors_total\": %" PRIu64 ", \"errors\": {",
	       get(s, "errors"));
	for (size_t i = 0; i < s->n; i++) {
		if (strncmp(s->c[i].name, "errors_", 7) != 0)
			continue;
		printf("%s\"%s\": %" PRIu64, first ? "" : ", ",
		       s->c[i].name + 7, s->c[i].v);
		first = false;
	}
	printf("}, \"transfers\": [");
	for (size_t i = 0; i < s->nx; i++) {
		printf("%s{\"path\": ", i ? ", " : "");
		json_str(stdout, s->x[i].path);
		printf(", \"bytes_read\": %" PRIu64 ", \"bytes_written\": %"
		       PRIu64 ", \"age_ms\": %" PRIu64 ", \"open\": %s}",
		       s->x[i].rd, s->x[i].wr, s->x[i].age_ms,
		       s->x[i].open ? "true" : "false");
	}
	printf("]}\n");
}

/* The name a "congestion_up_NAME 1" key carries, or NULL. */
static const char *congestion(const struct snap *s, const char *prefix)
{
	size_t n = strlen(prefix);

	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->c[i].name, prefix, n) == 0 && s->c[i].v)
			return s->c[i].name + n;
	return NULL;
}

static void print_congestion(const struct snap *s)
{
	const char *up = congestion(s, "congestion_up_");
	const char *down = congestion(s, "congestion_down_");

	if (up || down)
		printf(", TCP %s up, %s down", up ? up : "?",
		       down ? down : "?");
	if (get(s, "streams") > 1)
		printf(", striped over %" PRIu64 " connections (%" PRIu64
		       " up, %" PRIu64 " down)", get(s, "streams"),
		       get(s, "streams_up"), get(s, "streams_down"));
}

static void print_text(const char *mnt, const struct snap *s)
{
	char a[32], b[32], c[32];
	uint64_t sent = get(s, "payload_sent"), wire = get(s, "wire_sent");
	bool any = false;

	printf("qftfs %s\n", mnt);
	printf("  read      %s in %" PRIu64 " files, %s/s now\n",
	       human(get(s, "bytes_read"), a, sizeof(a)), get(s, "files_read"),
	       human(get(s, "read_rate"), b, sizeof(b)));
	printf("  written   %s in %" PRIu64 " files (%" PRIu64
	       " created), %s/s now\n",
	       human(get(s, "bytes_written"), a, sizeof(a)),
	       get(s, "files_written"), get(s, "files_created"),
	       human(get(s, "write_rate"), c, sizeof(c)));
	printf("  requests  %" PRIu64 " answered, %" PRIu64
	       " in flight (oldest %" PRIu64 " ms); %" PRIu64
	       " waited for the server, %" PRIu64 " pipelined\n",
	       get(s, "requests"), get(s, "in_flight"), get(s, "oldest_ms"),
	       get(s, "requests_waited"), get(s, "requests_async"));
	if (get(s, "link_state") == QC_LINK_RESUMING)
		printf("  link      RESUMING (%.0f s left, %" PRIu64
		       " requests kept, %s)",
		       (double)get(s, "resume_left_ms") / 1000.0,
		       get(s, "resume_kept"),
		       human(get(s, "resume_kept_bytes"), a, sizeof(a)));
	else
		printf("  link      %s, round trip %.2f ms",
		       get(s, "connected") ? "connected" : "DOWN",
		       (double)get(s, "rtt_us") / 1000.0);
	printf(", %" PRIu64 " reconnects, %" PRIu64 " resumes",
	       get(s, "reconnects"), get(s, "resumes"));
	print_congestion(s);
	if (sent && wire != sent)
		printf(", lz4 sent %s as %s (%.0f%%)",
		       human(sent, a, sizeof(a)), human(wire, b, sizeof(b)),
		       100.0 * (double)wire / (double)sent);
	printf("\n  server    %" PRIu64 " requests unanswered (oldest %" PRIu64
	       " ms), %" PRIu64 " of them writes behind\n",
	       get(s, "server_in_flight"), get(s, "server_oldest_ms"),
	       get(s, "writes_unacked"));
	printf("  walkahead %" PRIu64 " files (%s) opened from prefetch; %s "
	       "fetched, %s never read\n", get(s, "walk_files"),
	       human(get(s, "walk_bytes"), a, sizeof(a)),
	       human(get(s, "walk_fetched_bytes"), b, sizeof(b)),
	       human(get(s, "walk_waste_bytes"), c, sizeof(c)));
	printf("  backlog   %" PRIu64 " files queued (commit=async), %"
	       PRIu64 " files in transfer\n", get(s, "async_backlog"),
	       get(s, "transfers"));
	printf("  errors    ");
	for (size_t i = 0; i < s->n; i++) {
		if (strncmp(s->c[i].name, "errors_", 7) != 0)
			continue;
		printf("%s%s %" PRIu64, any ? ", " : "", s->c[i].name + 7,
		       s->c[i].v);
		any = true;
	}
	printf("%s\n", any ? "" : "none");
}

/* The files in transfer, with their rate since the last refresh. */
static void print_xfers(const struct snap *s, const struct snap *prev,
			double secs)
{
	char a[32], b[32], r[32];

	printf("\n  %-10s %-10s %-12s %s\n", "READ", "WRITTEN", "RATE", "FILE");
	for (size_t i = 0; i < s->nx; i++) {
		const struct xfer *x = &s->x[i];
		uint64_t before = 0;

		for (size_t j = 0; prev && j < prev->nx; j++)
			if (strcmp(prev->x[j].path, x->path) == 0)
				before = prev->x[j].rd + prev->x[j].wr;
		snprintf(r, sizeof(r), "%s/s", human(secs > 0 &&
			 x->rd + x->wr >= before ? (uint64_t)(
			 (double)(x->rd + x->wr - before) / secs) : 0, a,
			 sizeof(a)));
		printf("  %-10s %-10s %-12s %s%s\n",
		       human(x->rd, a, sizeof(a)), human(x->wr, b, sizeof(b)),
		       r, x->path, x->open ? "" : " (closed)");
	}
	if (!s->nx)
		printf("  (no file in transfer)\n");
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int watch(const char *mnt, double interval)
{
	struct snap *s = calloc(2, sizeof(*s));
	double t_prev = 0;
	int cur = 0;

	if (!s)
		return 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!stop) {
		double t = mono_s();

		if (take(mnt, &s[cur]) < 0) {
			free(s);
			return 1;
		}
		/* Home and clear, as top does. */
		printf("\033[H\033[2J");
		print_text(mnt, &s[cur]);
		print_xfers(&s[cur], t_prev ? &s[!cur] : NULL, t - t_prev);
		printf("\n(refreshing every %.0f s; Ctrl-C to quit)\n",
		       interval);
		fflush(stdout);
		t_prev = t;
		cur = !cur;
		usleep((useconds_t)(interval * 1e6));
	}
	free(s);
	return 0;
}

int qc_statcmd_main(int argc, char *argv[])
{
	const char *mnt = NULL;
	char *abs = NULL;
	bool json = false, watching = false;
	struct snap *s;
	int r;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--watch") == 0)
			watching = true;
		else if (argv[i][0] != '-' && !mnt)
			mnt = argv[i];
		else
			goto out_usage;
	}
	if (!mnt || (json && watching))
		goto out_usage;
	/* Shown as the user would find it in /proc/mounts. */
	abs = realpath(mnt, NULL);
	if (abs)
		mnt = abs;
	if (watching) {
		r = watch(mnt, 1.0);
		free(abs);
		return r;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		free(abs);
		return 1;
	}
	r = take(mnt, s);
	if (r == 0) {
		if (json)
			print_json(mnt, s);
		else {
			print_text(mnt, s);
			if (s->nx)
				print_xfers(s, NULL, 0);
		}
	}
	free(s);
	free(abs);
	return r < 0 ? 1 : 0;

out_usage:
	fprintf(stderr, "usage: qftfs --stats [--json | --watch] "
		"MOUNTPOINT\n");
	return 2;
}
