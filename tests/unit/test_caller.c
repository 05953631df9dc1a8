// SPDX-License-Identifier: MIT
/*
 * Unit test of who a request acts for on a shared mount (QFT_FEAT_CRED):
 * the caller's ids and groups as /proc/TID/status tells them
 * (fuse/ops/caller.c, qc_caller_parse_status) -- the file system ids,
 * every group, and a refusal rather than fewer groups past the protocol's
 * limit -- and the caller as the server must know it, through the mount's
 * idmap (fuse/fs/idmap.c, qc_idmap_caller): the mounting user becomes the
 * server's under idmap=user, idmap=file maps each id, and with
 * nomap=error an unmapped user or group acts as nobody and an unmapped
 * supplementary group is dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fs/idmap.h"
#include "msg.h"
#include "ops/internal.h"

static const char status_sample[] =
	"Name:\tcat\nUmask:\t0022\nState:\tR (running)\nTgid:\t4242\n"
	"Ngid:\t0\nPid:\t4242\nPPid:\t1\nTracerPid:\t0\n"
	"Uid:\t1000\t1001\t1002\t1003\n"
	"Gid:\t2000\t2001\t2002\t2003\n"
	"FDSize:\t256\n"
	"Groups:\t4 24 27 4294967294 \n"
	"NStgid:\t4242\n";

static int parse(const char *text, uint32_t *u, uint32_t *g,
		 struct qft_cred *c)
{
	memset(c, 0, sizeof(*c));
	return qc_caller_parse_status(text, u, g, c);
}

static void test_parse(void)
{
	struct qft_cred c;
	uint32_t u, g;
	char buf[4096];
	size_t n;

	check_ctx("sample");
	CHECK_EQ(parse(status_sample, &u, &g, &c), 0);
	/* The file system ids, the fourth of each line. */
	CHECK_EQ(u, 1003);
	CHECK_EQ(g, 2003);
	CHECK_EQ(c.ngroups, 4);
	CHECK(c.groups[0] == 4 && c.groups[1] == 24 && c.groups[2] == 27 &&
	      c.groups[3] == 4294967294u);

	check_ctx("no groups");
	CHECK_EQ(parse("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n",
		       &u, &g, &c), 0);
	CHECK(u == 0 && g == 0 && c.ngroups == 0);

	/* Exactly the limit, then one more: refused, not cut. */
	for (unsigned extra = 0; extra < 2; extra++) {
		check_ctx("%u groups", QFT_MAX_GROUPS + extra);
		n = (size_t)snprintf(buf, sizeof(buf),
				     "Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\n"
				     "Groups:\t");
		for (unsigned i = 0; i < QFT_MAX_GROUPS + extra; i++)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
					      "%u ", 1000000000u + i);
		snprintf(buf + n, sizeof(buf) - n, "\nNStgid:\t1\n");
		CHECK_EQ(parse(buf, &u, &g, &c), extra ? -E2BIG : 0);
		if (!extra)
			CHECK_EQ(c.groups[QFT_MAX_GROUPS - 1],
				 1000000000u + QFT_MAX_GROUPS - 1);
	}
	/* A Groups line the read cut off: it may hold more than was read. */
	check_ctx("groups cut");
	CHECK_EQ(parse("Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t1 2 3",
		       &u, &g, &c), -E2BIG);

	static const char *const bad[] = {
		"",
		"Gid:\t6\t6\t6\t6\nGroups:\t\n",                  /* no Uid */
		"Uid:\t5\t5\t5\t5\nGroups:\t\n",                  /* no Gid */
		"Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\n",           /* no Groups */
		"Uid:\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t\n",   /* 3 ids */
		"Uid:\t5\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t\n",
		"Uid:\t5\t5\t5\tx\nGid:\t6\t6\t6\t6\nGroups:\t\n",
		"Uid:\t5\t5\t5\t-5\nGid:\t6\t6\t6\t6\nGroups:\t\n",
		"Uid:\t5\t5\t5\t4294967295\nGid:\t6\t6\t6\t6\nGroups:\t\n",
		"Uid:\t5\t5\t5\t99999999999\nGid:\t6\t6\t6\t6\nGroups:\t\n",
		"Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t1 x\n",
		"XUid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check_ctx("bad status #%zu", i);
		CHECK_EQ(parse(bad[i], &u, &g, &c), -EINVAL);
	}

	/* This very process, as the kernel writes it. */
	check_ctx("/proc/self/status");
	{
		int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
		ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		gid_t groups[QFT_MAX_GROUPS];
		int ng = getgroups(QFT_MAX_GROUPS, groups);

		if (fd >= 0)
			close(fd);
		CHECK(len > 0);
		if (len > 0) {
			buf[len] = '\0';
			CHECK_EQ(parse(buf, &u, &g, &c), ng < 0 ? -E2BIG : 0);
			CHECK_EQ(u, (uint32_t)geteuid());
			CHECK_EQ(g, (uint32_t)getegid());
			if (ng >= 0)
				CHECK_EQ(c.ngroups, (uint32_t)ng);
		}
	}
	check_ctx("%s", "");
}

static struct qft_cred cred(uint32_t uid, uint32_t gid, uint32_t n,
			    const uint32_t *groups)
{
	struct qft_cred c = { .uid = uid, .gid = gid, .ngroups = n };

	memcpy(c.groups, groups, n * sizeof(groups[0]));
	return c;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_idmap(void)
{
	static const uint32_t g3[] = { 0, 65534, 7 };
	char dir[] = "/tmp/qftfs-test-caller-XXXXXX", uf[64], gf[64];
	struct qc_idmap m;
	struct qft_cred c;

	check_ctx("idmap=none");
	memset(&m, 0, sizeof(m));
	CHECK_EQ(qc_idmap_setup(&m, &(struct qc_idmap_opts){ 0 }), 0);
	c = cred(1000, 100, 3, g3);
	qc_idmap_caller(&m, &c);
	CHECK(c.uid == 1000 && c.gid == 100 && c.ngroups == 3 &&
	      c.groups[2] == 7);
	qc_idmap_free(&m);

	/* The mounting user acts as the server's user (root here). */
	check_ctx("idmap=user");
	memset(&m, 0, sizeof(m));
	CHECK_EQ(qc_idmap_setup(&m, &(struct qc_idmap_opts){ .idmap = "user" }),
		 0);
	qc_idmap_set_remote(&m, 0, 0);
	c = cred(m.local_uid, m.local_gid, 1, &m.local_gid);
	qc_idmap_caller(&m, &c);
	CHECK(c.uid == 0 && c.gid == 0 && c.ngroups == 1 && c.groups[0] == 0);
	if (m.local_uid != 4321) {
		c = cred(4321, 4321, 1, g3 + 2);
		qc_idmap_caller(&m, &c);
		CHECK(c.uid == 4321 && c.gid == 4321 && c.groups[0] == 7);
	}
	qc_idmap_free(&m);

	CHECK(mkdtemp(dir) != NULL);
	snprintf(uf, sizeof(uf), "%s/uid", dir);
	snprintf(gf, sizeof(gf), "%s/gid", dir);
	write_file(uf, "root:1000\n");
	write_file(gf, "root:3000\n");
	for (int ignore = 0; ignore < 2; ignore++) {
		check_ctx("idmap=file nomap=%s", ignore ? "ignore" : "error");
		memset(&m, 0, sizeof(m));
		CHECK_EQ(qc_idmap_setup(&m, &(struct qc_idmap_opts){
			.idmap = "file", .uidfile = uf, .gidfile = gf,
			.nomap = ignore ? "ignore" : "error" }), 0);
		/* Mapped: root becomes 1000:3000, its group 0 too. */
		c = cred(0, 0, 3, g3);
		qc_idmap_caller(&m, &c);
		CHECK(c.uid == 1000 && c.gid == 3000);
		if (ignore)
			CHECK(c.ngroups == 3 && c.groups[0] == 3000 &&
			      c.groups[1] == 65534 && c.groups[2] == 7);
		else
			CHECK(c.ngroups == 1 && c.groups[0] == 3000);
		/* Unmapped: as it is, or nobody with no groups. */
		c = cred(4321, 4322, 2, g3 + 1);
		qc_idmap_caller(&m, &c);
		if (ignore)
			CHECK(c.uid == 4321 && c.gid == 4322 &&
			      c.ngroups == 2);
		else
			CHECK(c.uid == 65534 && c.gid == 65534 &&
			      c.ngroups == 0);
		qc_idmap_free(&m);
	}
	unlink(uf);
	unlink(gf);
	rmdir(dir);
	check_ctx("%s", "");
}

int main(void)
{
	test_parse();
	test_idmap();
	return check_exit("test_caller");
}
