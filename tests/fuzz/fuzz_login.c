// SPDX-License-Identifier: MIT
/*
 * Fuzz target: what the client reads while it sets a mount up -- the
 * remote install script's lines (fuse/login/install.c), the server's
 * greeting (fuse/login/bootstrap.c), the user's ssh_config
 * (fuse/login/sshconf.c, with Include and token expansion) and the
 * idmap= files and options (fuse/fs/idmap.c).
 *
 * Input: one byte of mode, then its subject.
 *   mode 0  the install exchange: the rest is what the remote script
 *           writes on the exec channel (QFTFS-ARCH ..., QFTFS-SEND ...),
 *           answered by qc_install_run with fake server binaries of
 *           every architecture (-o server_binaries=)
 *   mode 1  the greeting line (the rest, up to a NUL)
 *   mode 2  an ssh_config file: byte 1 picks the host alias looked up,
 *           the rest is the file.  It is read inside a directory of its
 *           own (a chroot of the reading thread, when allowed) whose
 *           ~/.ssh holds two files to Include, so Include reaches
 *           nothing else of the machine; without root, Include lines are
 *           blanked.  Every value read is then expanded as ssh.c does.
 *   mode 3  idmap: byte 1 chooses nomap= and which options are given,
 *           the rest is NUL-separated: the uidfile, the gidfile, uid=,
 *           gid=, umask=
 *
 * Oracles besides the sanitizers:
 *  - mode 0: the exchange returns 0 only after a RUN or INSTALLED line,
 *    a failure is a negative errno, and whatever came the client never
 *    sends more than one answer line and, after SEND, one binary;
 *  - mode 1: a greeting is accepted exactly when printing the two
 *    numbers back as "QFTFS %u %u" gives the line (no lost digits, no
 *    sign, no blank), with a port that fits 16 bits;
 *  - mode 2: values read are NUL-free strings, lists within their caps;
 *  - mode 3: a setup that succeeded maps every id through its tables
 *    both ways without failing other than with EPERM.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "fs/idmap.h"
#include "fuzz.h"
#include "log.h"
#include "login/bootstrap.h"
#include "login/install.h"
#include "login/sshconf.h"

static const char *const archs[] = { "x86_64", "aarch64", "armhf", "armel" };

static struct {
	bool ready;
	bool chroot_ok;
	char dir[64];        /* private directory of this process */
	char bins[96];       /* -o server_binaries= */
	char jail[96];       /* mode 2's root */
	char uidfile[96], gidfile[96];
} g;

static void put(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, p, n) == (ssize_t)n);
	close(fd);
}

static void rm_rf(const char *path)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	(void)!system(cmd);
}

static void cleanup(void)
{
	rm_rf(g.dir);
}

static void setup(void)
{
	char path[192];

	signal(SIGPIPE, SIG_IGN);
	/* Left by runs that ended without atexit (fuzz.h). */
	fuzz_remove_stale("qftfs-fuzzlogin-", rm_rf);
	qft_log_init("fuzz_login", getenv("QFTFS_FUZZ_DEBUG") ?
		     QFT_LOG_DEBUG : QFT_LOG_ERR);
	snprintf(g.dir, sizeof(g.dir), "/tmp/qftfs-fuzzlogin-%ld-XXXXXX",
		 (long)getpid());
	FUZZ_CHECK(mkdtemp(g.dir) != NULL);
	atexit(cleanup);
	snprintf(g.bins, sizeof(g.bins), "%s/bins", g.dir);
	FUZZ_CHECK(mkdir(g.bins, 0755) == 0);
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
		char body[64];

		snprintf(path, sizeof(path), "%s/%s", g.bins, archs[i]);
		FUZZ_CHECK(mkdir(path, 0755) == 0);
		snprintf(path, sizeof(path), "%s/%s/qftfs-server", g.bins,
			 archs[i]);
		snprintf(body, sizeof(body), "#!/bin/false %s server\n",
			 archs[i]);
		put(path, body, strlen(body));
	}
	snprintf(g.jail, sizeof(g.jail), "%s/jail", g.dir);
	FUZZ_CHECK(mkdir(g.jail, 0755) == 0);
	snprintf(path, sizeof(path), "%s/h", g.jail);
	FUZZ_CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/h/.ssh", g.jail);
	FUZZ_CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/h/.ssh/inc1", g.jail);
	put(path, "Host *\n  User included\n  IdentityFile ~/.ssh/k%h\n", 46);
	snprintf(path, sizeof(path), "%s/h/.ssh/inc2", g.jail);
	put(path, "Include inc1\nHostName %h.example\n", 33);
	snprintf(g.uidfile, sizeof(g.uidfile), "%s/uids", g.dir);
	snprintf(g.gidfile, sizeof(g.gidfile), "%s/gids", g.dir);
	/* A thread of ours may chroot without touching the others. */
	g.chroot_ok = geteuid() == 0;
	g.ready = true;
}

/* ---- mode 0: the install exchange ---- */

struct sink {
	int fd;
	size_t lines;          /* newlines before the binary */
	size_t bytes;
};

static void *sink_main(void *arg)
{
	struct sink *k = arg;
	char buf[4096];
	ssize_t n;

	while ((n = read(k->fd, buf, sizeof(buf))) > 0) {
		k->bytes += (size_t)n;
		for (ssize_t i = 0; i < n; i++)
			k->lines += buf[i] == '\n';
	}
	return NULL;
}

static void install(const uint8_t *data, size_t size)
{
	struct qc_install_opts o = { .enabled = true,
				     .server_binaries = g.bins };
	struct sink k = { 0 };
	char ran[256];
	pthread_t t;
	int sv[2], r;

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
			      sv) == 0);
	k.fd = sv[1];
	/* The input fits the socket buffer (the size is capped). */
	FUZZ_CHECK(write(sv[1], data, size) == (ssize_t)size || size == 0);
	shutdown(sv[1], SHUT_WR);
	FUZZ_CHECK(pthread_create(&t, NULL, sink_main, &k) == 0);
	r = qc_install_run(sv[0], "fuzzhost", &o, ran, sizeof(ran));
	FUZZ_CHECK(r < 0 || strlen(ran) < sizeof(ran));
	shutdown(sv[0], SHUT_RDWR);
	FUZZ_CHECK(pthread_join(t, NULL) == 0);
	close(sv[0]);
	close(sv[1]);
	FUZZ_CHECK(r <= 0 && r >= -4095);
	if (r == 0)
		FUZZ_CHECK(memmem(data, size, "QFTFS-RUN ", 10) ||
			   memmem(data, size, "QFTFS-INSTALLED ", 16));
	/* One answer line; the fake binaries are one line each. */
	FUZZ_CHECK(k.lines <= 2);
	FUZZ_CHECK(k.bytes < 200);
}

/* ---- mode 1: the greeting ---- */

static void greeting(const uint8_t *data, size_t size)
{
	char line[128], back[160], id[QFT_ATTACH_ID_HEX + 1];
	unsigned v = 0, p = 0;
	size_t n = strnlen((const char *)data, size);

	if (n >= sizeof(line))
		return;
	memcpy(line, data, n);
	line[n] = '\0';
	if (qc_boot_parse_greeting(line, &v, &p, id) < 0)
		return;
	FUZZ_CHECK(strlen(id) == 0 || strlen(id) == QFT_ATTACH_ID_HEX);
	snprintf(back, sizeof(back), id[0] ? "QFTFS %u %u %s" : "QFTFS %u %u%s",
		 v, p, id);
	/* Leading zeros are the one thing printing back does not keep. */
	if (strcmp(back, line) != 0) {
		unsigned long long a, b;
		char tail;

		FUZZ_CHECK(sscanf(line, "QFTFS %llu %llu%c", &a, &b,
				  &tail) == 2 || (id[0] && tail == ' '));
		FUZZ_CHECK(a == v && b == p);
		FUZZ_CHECK(line[6] >= '0' && line[6] <= '9');
	}
	FUZZ_CHECK(p <= 65535);
}

/* ---- mode 2: ssh_config ---- */

struct conf_job {
	const uint8_t *data;
	size_t size;
	const char *host;
};

static void check_str(const char *s)
{
	if (s)
		FUZZ_CHECK(strlen(s) < 1u << 20);
}

static void expand_all(const struct qc_sshconf *c, const char *host)
{
	const struct qc_sshconf_tokens t = {
		.home = "/h", .local_user = "me",
		.host = c->hostname ? c->hostname : host, .alias = host,
		.user = c->user ? c->user : "me", .port = c->port ? c->port : 22,
	};
	const char *v[4 + 2 * QC_SSHCONF_MAX_FILES];
	size_t n = 0;

	v[n++] = c->hostname;
	v[n++] = c->proxy_command;
	v[n++] = c->certificate;
	v[n++] = c->proxy_jump;
	for (size_t i = 0; i < c->n_identity; i++)
		v[n++] = c->identity[i];
	for (size_t i = 0; i < c->n_known_hosts; i++)
		v[n++] = c->known_hosts[i];
	for (size_t i = 0; i < n; i++) {
		char *e;

		if (!v[i])
			continue;
		errno = 0;
		e = qc_sshconf_expand(v[i], &t);
		FUZZ_CHECK(e || errno == EINVAL || errno == ENOMEM);
		free(e);
	}
}

static void *conf_main(void *arg)
{
	struct conf_job *j = arg;
	struct qc_sshconf c;
	const char *home = "/h", *path = "/cfg";
	char full[192];
	uint8_t *copy;
	int r;

	if (g.chroot_ok) {
		/* This thread's root and cwd only. */
		FUZZ_CHECK(unshare(CLONE_FS) == 0);
		FUZZ_CHECK(chroot(g.jail) == 0 && chdir("/") == 0);
	} else {
		snprintf(full, sizeof(full), "%s/h", g.jail);
		home = full;
	}
	copy = malloc(j->size + 1);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, j->data, j->size);
	if (!g.chroot_ok) {
		/* No way to keep Include inside: blank the keyword. */
		for (size_t i = 0; i + 7 <= j->size; i++)
			if (strncasecmp((char *)copy + i, "include", 7) == 0)
				copy[i] = 'X';
		static char p2[192];

		snprintf(p2, sizeof(p2), "%s/cfg", g.jail);
		path = p2;
	}
	put(path, copy, j->size);
	free(copy);
	qc_sshconf_init(&c);
	r = qc_sshconf_read(&c, path, j->host, home, true);
	FUZZ_CHECK(r <= 0);
	FUZZ_CHECK(c.n_identity <= QC_SSHCONF_MAX_FILES);
	FUZZ_CHECK(c.n_known_hosts <= QC_SSHCONF_MAX_FILES);
	check_str(c.hostname);
	check_str(c.user);
	check_str(c.strict);
	check_str(c.identities_only);
	FUZZ_CHECK(c.port >= 0 && c.port <= 65535);
	expand_all(&c, j->host);
	qc_sshconf_free(&c);
	return NULL;
}

static void sshconf(const uint8_t *data, size_t size)
{
	static const char *const hosts[] = { "board", "a.example", "10.0.0.1",
					     "BOARD", "x" };
	struct conf_job j;
	pthread_t t;

	if (size < 1)
		return;
	j.host = hosts[data[0] % (sizeof(hosts) / sizeof(hosts[0]))];
	j.data = data + 1;
	j.size = size - 1;
	/* A thread of its own: its chroot goes with it. */
	FUZZ_CHECK(pthread_create(&t, NULL, conf_main, &j) == 0);
	FUZZ_CHECK(pthread_join(t, NULL) == 0);
}

/* ---- mode 3: idmap ---- */

/* The next NUL-terminated piece of [*p, end), or NULL past the end. */
static const char *piece(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *s = *p, *z;

	if (s >= end)
		return NULL;
	z = memchr(s, 0, (size_t)(end - s));
	*len = z ? (size_t)(z - s) : (size_t)(end - s);
	*p = z ? z + 1 : end;
	return (const char *)s;
}

static void idmap(const uint8_t *data, size_t size)
{
	const uint8_t *p, *end = data + size;
	char *opt[3] = { NULL };
	struct qc_idmap_opts o = { .idmap = "file" };
	struct qc_idmap m;
	const char *s;
	uint8_t sel;
	size_t len;
	int r;

	if (size < 1)
		return;
	sel = data[0];
	p = data + 1;
	memset(&m, 0, sizeof(m));
	s = piece(&p, end, &len);
	if (s && (sel & 1)) {
		put(g.uidfile, s, len);
		o.uidfile = g.uidfile;
	}
	s = piece(&p, end, &len);
	if (s && (sel & 2)) {
		put(g.gidfile, s, len);
		o.gidfile = g.gidfile;
	}
	for (int i = 0; i < 3; i++) {
		s = piece(&p, end, &len);
		if (!s || !(sel & (4 << i)))
			continue;
		/* Not strndup: the piece may end where the input does, and
		 * some sanitizers check one byte past `len` there. */
		opt[i] = malloc(len + 1);
		FUZZ_CHECK(opt[i] != NULL);
		memcpy(opt[i], s, len);
		opt[i][len] = '\0';
	}
	o.uid = opt[0];
	o.gid = opt[1];
	o.umask = opt[2];
	o.nomap = (sel & 0x20) ? "ignore" : (sel & 0x40) ? "error" : NULL;
	if (sel & 0x80)
		o.idmap = "user";
	r = qc_idmap_setup(&m, &o);
	if (r == 0) {
		static const uint32_t ids[] = { 0, 1, 1000, 65534, 4294967295u };

		qc_idmap_set_remote(&m, 1000, 1000);
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
			struct stat st = { .st_uid = ids[i], .st_gid = ids[i],
					   .st_mode = S_IFREG | 0644 };
			uint32_t u = ids[i], gg = ids[i];

			qc_idmap_to_local(&m, &st);
			r = qc_idmap_to_remote(&m, &u, &gg);
			FUZZ_CHECK(r == 0 || r == -EPERM);
			FUZZ_CHECK(S_ISREG(st.st_mode));
		}
	} else {
		FUZZ_CHECK(r < 0 && r >= -4095);
	}
	qc_idmap_free(&m);
	for (int i = 0; i < 3; i++)
		free(opt[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	if (!g.ready)
		setup();
	switch (data[0] % 4) {
	case 0:
		/* The remote script's lines are at most a few hundred bytes;
		 * the socket buffer holds this much unread. */
		if (size <= 16384)
			install(data + 1, size - 1);
		break;
	case 1:
		greeting(data + 1, size - 1);
		break;
	case 2:
		sshconf(data + 1, size - 1);
		break;
	default:
		idmap(data + 1, size - 1);
		break;
	}
	return 0;
}
