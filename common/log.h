/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per event, to stderr while in the foreground and to
 * syslog once daemonized.  Messages never contain secrets.
 */
#ifndef QFT_LOG_H
#define QFT_LOG_H

#include <stdbool.h>

enum qft_log_level { QFT_LOG_ERR, QFT_LOG_WARN, QFT_LOG_INFO, QFT_LOG_DEBUG };

/* `ident` prefixes every line ("qftfs", "qftfs-server"). */
void qft_log_init(const char *ident, enum qft_log_level max);
void qft_log_set_level(enum qft_log_level max);
enum qft_log_level qft_log_level(void);
/* Switch from stderr to syslog (after daemonizing). */
void qft_log_to_syslog(bool on);
/* Starts every syslog line with "tag: " (the client's mount point, so
 * that the lines of several mounts can be told apart); NULL: none.  The
 * string must outlive the logging. */
void qft_log_set_tag(const char *tag);

void qft_log(enum qft_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define qft_err(...)   qft_log(QFT_LOG_ERR, __VA_ARGS__)
#define qft_warn(...)  qft_log(QFT_LOG_WARN, __VA_ARGS__)
#define qft_info(...)  qft_log(QFT_LOG_INFO, __VA_ARGS__)
#define qft_debug(...)                                              \
	do {                                                        \
		if (qft_log_level() >= QFT_LOG_DEBUG)               \
			qft_log(QFT_LOG_DEBUG, __VA_ARGS__);        \
	} while (0)

#endif /* QFT_LOG_H */
