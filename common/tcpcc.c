// SPDX-License-Identifier: MIT
/*
 * The TCP congestion control of a data connection (tcpcc.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcpcc.h"

#define SYSCTL_DIR "/proc/sys/net/ipv4/"

static bool name_valid(const char *s, size_t len)
{
	if (len == 0 || len >= QFT_TCPCC_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

int qft_tcpcc_parse(const char *s, struct qft_tcpcc *out)
{
	struct qft_tcpcc p = { .mode = QFT_TCPCC_AUTO };
	size_t len = s ? strlen(s) : 0;

	if (len == 0 || strcmp(s, "auto") == 0) {
		/* p is auto already */
	} else if (strcmp(s, "system") == 0) {
		p.mode = QFT_TCPCC_SYSTEM;
	} else if (name_valid(s, len)) {
		p.mode = QFT_TCPCC_NAMED;
		memcpy(p.name, s, len + 1);
	} else {
		return -EINVAL;
	}
	*out = p;
	return 0;
}

const char *qft_tcpcc_str(const struct qft_tcpcc *p)
{
	switch (p->mode) {
	case QFT_TCPCC_SYSTEM: return "system";
	case QFT_TCPCC_NAMED:  return p->name;
	case QFT_TCPCC_AUTO:   break;
	}
	return "auto";
}

int qft_tcpcc_get(int fd, char used[QFT_TCPCC_NAME_MAX])
{
	char buf[QFT_TCPCC_NAME_MAX] = "";
	socklen_t len = sizeof(buf) - 1;

	used[0] = '\0';
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &len) < 0)
		return errno == ENOTSOCK || errno == EOPNOTSUPP ||
		       errno == ENOPROTOOPT || errno == EBADF ? -ENOPROTOOPT :
		       -errno;
	buf[len < sizeof(buf) ? len : sizeof(buf) - 1] = '\0';
	memcpy(used, buf, sizeof(buf));
	return 0;
}

static int set_cc(int fd, const char *name)
{
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name,
		       (socklen_t)strlen(name)) < 0)
		return -errno;
	return 0;
}

int qft_tcpcc_apply(int fd, const struct qft_tcpcc *p,
		    char used[QFT_TCPCC_NAME_MAX], bool *refused)
{
	int r;

	if (refused)
		*refused = false;
	/* First, whether this is TCP at all: a socketpair or a pipe of
	 * local mode has no congestion control to choose. */
	r = qft_tcpcc_get(fd, used);
	if (r < 0)
		return r;
	switch (p->mode) {
	case QFT_TCPCC_SYSTEM:
		return 0;
	case QFT_TCPCC_NAMED:
		r = set_cc(fd, p->name);
		if (r < 0)
			return r;
		break;
	case QFT_TCPCC_AUTO:
		/* -EPERM (not allowed for us) or -ENOENT (not built, no
		 * module): the host's default stays, which is the answer. */
		if (set_cc(fd, QFT_TCPCC_PREFERRED) < 0 && refused)
			*refused = true;
		break;
	}
	return qft_tcpcc_get(fd, used);
}

/* One line of a sysctl file, without its newline; "" when unreadable. */
static void read_sysctl(const char *name, char *buf, size_t size)
{
	char path[128];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), SYSCTL_DIR "%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

void qft_tcpcc_refusal(const char *name, int err, char *buf, size_t size)
{
	char list[256];

	if (err == -EPERM) {
		read_sysctl("tcp_allowed_congestion_control", list,
			    sizeof(list));
		snprintf(buf, size,
			 "TCP congestion control \"%s\" is not allowed for "
			 "this user (allowed: %s); it needs CAP_NET_ADMIN, or "
			 "root adding it to net.ipv4.tcp_allowed_congestion_"
			 "control", name, list[0] ? list : "unknown");
	} else if (err == -ENOENT) {
		read_sysctl("tcp_available_congestion_control", list,
			    sizeof(list));
		snprintf(buf, size,
			 "TCP congestion control \"%s\" is not available on "
			 "this host (available: %s); its module (tcp_%s) may "
			 "be loaded with modprobe", name,
			 list[0] ? list : "unknown", name);
	} else {
		snprintf(buf, size, "cannot set TCP congestion control "
			 "\"%s\": %s", name, strerror(-err));
	}
}
