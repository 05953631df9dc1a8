// SPDX-License-Identifier: MIT
/* Line-oriented logging to stderr or syslog (see log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "log.h"

static const char *log_ident = "qftfs";
static enum qft_log_level log_max = QFT_LOG_INFO;
static bool log_syslog;
static const char *log_tag;

void qft_log_init(const char *ident, enum qft_log_level max)
{
	log_ident = ident;
	log_max = max;
}

void qft_log_set_level(enum qft_log_level max)
{
	log_max = max;
}

enum qft_log_level qft_log_level(void)
{
	return log_max;
}

void qft_log_to_syslog(bool on)
{
	if (on && !log_syslog)
		openlog(log_ident, LOG_PID, LOG_DAEMON);
	log_syslog = on;
}

void qft_log_set_tag(const char *tag)
{
	log_tag = tag;
}

void qft_log(enum qft_log_level lvl, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[1024];
	va_list ap;

	if (lvl > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_syslog && log_tag)
		syslog(prio[lvl], "%s: %s", log_tag, line);
	else if (log_syslog)
		syslog(prio[lvl], "%s", line);
	else
		/* One fprintf per line keeps lines from threads whole. */
		fprintf(stderr, "%s: %s\n", log_ident, line);
}
