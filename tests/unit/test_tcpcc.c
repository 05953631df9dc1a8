// SPDX-License-Identifier: MIT
/*
 * Unit test of common/tcpcc.c: parsing -o congestion= values, and the
 * policy applied to real TCP sockets on loopback -- the host's default
 * kept, a named algorithm taken, one the host lacks refused with
 * -ENOENT, and, in a child that gave up root, one the host does not
 * allow refused with -EPERM while `auto` quietly keeps the default.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tcpcc.h"

#define NOBODY 65534

static void test_parse(void)
{
	static const struct {
		const char *in;
		int r;
		enum qft_tcpcc_mode mode;
		const char *str;
	} cases[] = {
		{ NULL, 0, QFT_TCPCC_AUTO, "auto" },
		{ "", 0, QFT_TCPCC_AUTO, "auto" },
		{ "auto", 0, QFT_TCPCC_AUTO, "auto" },
		{ "system", 0, QFT_TCPCC_SYSTEM, "system" },
		{ "bbr", 0, QFT_TCPCC_NAMED, "bbr" },
		{ "cubic", 0, QFT_TCPCC_NAMED, "cubic" },
		{ "dctcp_2", 0, QFT_TCPCC_NAMED, "dctcp_2" },
		/* 15 bytes fit the kernel's name; 16 do not */
		{ "abcdefghijklmno", 0, QFT_TCPCC_NAMED, "abcdefghijklmno" },
		{ "abcdefghijklmnop", -EINVAL, 0, NULL },
		{ "BBR", -EINVAL, 0, NULL },
		{ "bb r", -EINVAL, 0, NULL },
		{ "bbr,cubic", -EINVAL, 0, NULL },
		{ "../x", -EINVAL, 0, NULL },
		{ "bbr\n", -EINVAL, 0, NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct qft_tcpcc p = { .mode = QFT_TCPCC_SYSTEM,
				       .name = "untouched" };
		int r;

		check_ctx("parse \"%s\"", cases[i].in ? cases[i].in : "(null)");
		r = qft_tcpcc_parse(cases[i].in, &p);
		CHECK_EQ(r, cases[i].r);
		if (r < 0) {
			/* a bad value leaves the policy as it was */
			CHECK_EQ(p.mode, QFT_TCPCC_SYSTEM);
			CHECK(strcmp(p.name, "untouched") == 0);
			continue;
		}
		CHECK_EQ(p.mode, cases[i].mode);
		CHECK(strcmp(qft_tcpcc_str(&p), cases[i].str) == 0);
	}
	check_ctx("%s", "");
}

/* Whether `name` is a word of the sysctl file. */
static bool listed(const char *file, const char *name)
{
	char buf[512], path[128], *save = NULL;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", file);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (char *w = strtok_r(buf, " \n", &save); w;
	     w = strtok_r(NULL, " \n", &save))
		if (strcmp(w, name) == 0)
			return true;
	return false;
}

static void host_default(char *buf, size_t size)
{
	int fd = open("/proc/sys/net/ipv4/tcp_congestion_control", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* A connected TCP socket on loopback (the accepted end is closed). */
static int tcp_socket(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l, c, s;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0)
		return -1;
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	s = accept(l, NULL, NULL);
	close(l);
	if (s >= 0)
		close(s);
	return c;
}

static void test_not_tcp(void)
{
	struct qft_tcpcc p = { .mode = QFT_TCPCC_AUTO };
	char used[QFT_TCPCC_NAME_MAX] = "x";
	bool refused = true;
	int sv[2], pv[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK_EQ(qft_tcpcc_apply(sv[0], &p, used, &refused), -ENOPROTOOPT);
	CHECK(used[0] == '\0');
	CHECK(!refused);
	close(sv[0]);
	close(sv[1]);
	CHECK(pipe(pv) == 0);
	CHECK_EQ(qft_tcpcc_apply(pv[1], &p, used, NULL), -ENOPROTOOPT);
	close(pv[0]);
	close(pv[1]);
}

static void test_apply(void)
{
	char def[QFT_TCPCC_NAME_MAX * 2], used[QFT_TCPCC_NAME_MAX];
	struct qft_tcpcc p;
	bool refused;
	int fd;

	host_default(def, sizeof(def));
	fd = tcp_socket();
	CHECK(fd >= 0);
	if (fd < 0)
		return;

	CHECK(qft_tcpcc_parse("system", &p) == 0);
	CHECK_EQ(qft_tcpcc_apply(fd, &p, used, &refused), 0);
	check_ctx("system: %s, default %s", used, def);
	CHECK(strcmp(used, def) == 0);
	CHECK(!refused);

	/* reno is built into every kernel and always allowed */
	CHECK(qft_tcpcc_parse("reno", &p) == 0);
	CHECK_EQ(qft_tcpcc_apply(fd, &p, used, NULL), 0);
	check_ctx("reno: %s", used);
	CHECK(strcmp(used, "reno") == 0);

	CHECK(qft_tcpcc_parse("nonesuch", &p) == 0);
	CHECK_EQ(qft_tcpcc_apply(fd, &p, used, NULL), -ENOENT);

	if (listed("tcp_available_congestion_control", "bbr") &&
	    (geteuid() == 0 ||
	     listed("tcp_allowed_congestion_control", "bbr"))) {
		CHECK(qft_tcpcc_parse("auto", &p) == 0);
		CHECK_EQ(qft_tcpcc_apply(fd, &p, used, &refused), 0);
		check_ctx("auto: %s", used);
		CHECK(strcmp(used, "bbr") == 0);
		CHECK(!refused);
	} else {
		printf("no bbr for this process here: auto's choice of it "
		       "not checked\n");
	}
	check_ctx("%s", "");
	close(fd);
}

/*
 * As a user without CAP_NET_ADMIN: an available algorithm outside the
 * allowed list is refused with -EPERM, and its message names the list;
 * `auto`, when bbr is such a one, keeps the default and says so.
 */
static int unprivileged_child(void)
{
	static const char *const names[] = { "cubic", "bbr", "reno", "htcp",
					     "vegas", "westwood" };
	char def[QFT_TCPCC_NAME_MAX * 2], used[QFT_TCPCC_NAME_MAX];
	char msg[512];
	struct qft_tcpcc p;
	bool refused, tried = false;
	int fd;

	if (setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) < 0)
		return 2;
	host_default(def, sizeof(def));
	fd = tcp_socket();
	CHECK(fd >= 0);
	if (fd < 0)
		return check_exit("test_tcpcc (unprivileged)");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!listed("tcp_available_congestion_control", names[i]) ||
		    listed("tcp_allowed_congestion_control", names[i]) ||
		    strcmp(names[i], def) == 0)
			continue;
		tried = true;
		check_ctx("unprivileged %s", names[i]);
		CHECK(qft_tcpcc_parse(names[i], &p) == 0);
		CHECK_EQ(qft_tcpcc_apply(fd, &p, used, NULL), -EPERM);
		qft_tcpcc_refusal(names[i], -EPERM, msg, sizeof(msg));
		CHECK(strstr(msg, names[i]) != NULL);
		CHECK(strstr(msg, "not allowed") != NULL);
		CHECK(strstr(msg, "allowed: ") != NULL);
		if (strcmp(names[i], QFT_TCPCC_PREFERRED) == 0) {
			CHECK(qft_tcpcc_parse("auto", &p) == 0);
			CHECK_EQ(qft_tcpcc_apply(fd, &p, used, &refused), 0);
			CHECK(refused);
			CHECK(strcmp(used, def) == 0);
		}
	}
	check_ctx("%s", "");
	if (!tried)
		printf("every available algorithm is allowed here: the "
		       "refusal is not checked\n");
	close(fd);
	return check_exit("test_tcpcc (unprivileged)");
}

static void test_unprivileged(void)
{
	int st = 0;
	pid_t pid;

	if (geteuid() != 0) {
		printf("not root: the unprivileged child is not run\n");
		return;
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(unprivileged_child());
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_refusal_text(void)
{
	char msg[512];

	qft_tcpcc_refusal("nonesuch", -ENOENT, msg, sizeof(msg));
	CHECK(strstr(msg, "\"nonesuch\" is not available") != NULL);
	CHECK(strstr(msg, "available: ") != NULL);
	CHECK(strstr(msg, "tcp_nonesuch") != NULL);
	/* a short buffer is cut, never overrun */
	qft_tcpcc_refusal("nonesuch", -ENOENT, msg, 8);
	CHECK_EQ(strlen(msg), 7);
	qft_tcpcc_refusal("x", -EIO, msg, sizeof(msg));
	CHECK(strstr(msg, strerror(EIO)) != NULL);
}

int main(void)
{
	test_parse();
	test_not_tcp();
	test_apply();
	test_unprivileged();
	test_refusal_text();
	return check_exit("test_tcpcc");
}
