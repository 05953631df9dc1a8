// SPDX-License-Identifier: MIT
/* The remote server's stderr in our log (see serverlog.h). */
#include <string.h>

#include "log.h"
#include "login/serverlog.h"

void qc_serverlog_line(const char *host, char *line, size_t n)
{
	const char *p = line;

	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n'))
		n--;
	line[n] = '\0';
	/* The server names itself; we say where it runs instead. */
	if (strncmp(p, "qftfs-server: ", 14) == 0)
		p += 14;
	if (*p)
		qft_log(QFT_LOG_WARN, "qftfs-server@%s: %s", host, p);
}
