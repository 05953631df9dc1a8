// SPDX-License-Identifier: MIT
/*
 * Unit test of fuse/login/sshconf.c, the part of ssh_config(5) a mount
 * honours: Host patterns (wildcards, negation), the first value winning,
 * lists that accumulate, Include, Match, quoting and comments, the lines
 * it refuses, a missing file, and the expansion of %-tokens and ~.  It
 * checks what the parser does today; the logins that use it are
 * tests/test_ssh.py and tests/test_login.py.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "check.h"
#include "login/sshconf.h"

/* A fake home: its .ssh/ is where a relative Include is looked up. */
static char home[] = "/tmp/qftfs-test-sshconf-XXXXXX";

static void write_file(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", home, rel);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

/* Reads `text` as ~/.ssh/config for `host` into a fresh `cfg`. */
static int read_text(struct qc_sshconf *cfg, const char *text,
		     const char *host)
{
	char path[PATH_MAX];

	write_file(".ssh/config", text);
	snprintf(path, sizeof(path), "%s/.ssh/config", home);
	qc_sshconf_init(cfg);
	return qc_sshconf_read(cfg, path, host, home, true);
}

static bool str_is(const char *got, const char *want)
{
	if (!got || !want)
		return got == want;
	return strcmp(got, want) == 0;
}

static void test_pattern(void)
{
	static const struct {
		const char *pat, *s;
		bool want;
	} cases[] = {
		{ "*", "anything", true },
		{ "*", "", true },
		{ "", "", true },
		{ "", "a", false },
		{ "host", "host", true },
		{ "HoSt", "hOsT", true },          /* ASCII case ignored */
		{ "host", "host2", false },
		{ "host?", "host2", true },
		{ "host?", "host", false },
		{ "?", "", false },
		{ "*.example.com", "a.example.com", true },
		{ "*.example.com", "a.b.example.com", true },
		{ "*.example.com", "example.com", false },
		{ "a*b*c", "aXbYbZc", true },      /* backtracks to the last * */
		{ "a*b*c", "aXbYbZ", false },
		{ "a**", "a", true },
		{ "*a", "bab", false },
		{ "10.0.0.*", "10.0.0.7", true },
		{ "10.0.0.*", "10.0.1.7", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_ctx("'%s' ~ '%s'", cases[i].pat, cases[i].s);
		CHECK(qc_sshconf_pattern(cases[i].pat, cases[i].s) ==
		      cases[i].want);
	}
	check_ctx("%s", "");
}

static void test_patterns(void)
{
	char big[1100];

	/* Blanks and commas separate. */
	CHECK(qc_sshconf_patterns("a b,c", "c"));
	CHECK(qc_sshconf_patterns("a, b ,c", "b"));
	CHECK(!qc_sshconf_patterns("a b,c", "d"));
	/* A negated match wins over any other, in either order. */
	CHECK(!qc_sshconf_patterns("* !bad", "bad"));
	CHECK(!qc_sshconf_patterns("!bad *", "bad"));
	CHECK(qc_sshconf_patterns("!bad *", "good"));
	/* Negation alone matches nothing. */
	CHECK(!qc_sshconf_patterns("!bad", "good"));
	CHECK(!qc_sshconf_patterns("", "x"));
	CHECK(!qc_sshconf_patterns(" , ", "x"));
	/* A pattern too long for the parser's buffer is skipped. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(!qc_sshconf_patterns(big, big));
	memcpy(big + sizeof(big) - 3, " *", 3);
	CHECK(qc_sshconf_patterns(big, "y"));
}

static void test_hosts(void)
{
	struct qc_sshconf cfg;
	int r;

	r = read_text(&cfg,
		"# the user's file\n"
		"\n"
		"   # an indented comment\n"
		"Host other\n"
		"    HostName wrong.example.com\n"
		"    User wrong\n"
		"Host my*  !mybad\n"
		"    HostName real.example.com\n"
		"    User alice\n"
		"    Port 2222\n"
		"    IdentityFile ~/.ssh/id_my\n"
		"Host *\n"
		"    HostName fallback.example.com\n"
		"    User bob\n"
		"    Port 22\n"
		"    IdentityFile ~/.ssh/id_all\n"
		"    StrictHostKeyChecking accept-new\n"
		"    IdentitiesOnly yes\n"
		"    Compression yes\n"
		"    ForwardAgent yes\n", "myhost");
	CHECK_EQ(r, 0);
	/* The first value obtained wins: specific blocks before Host *. */
	CHECK(str_is(cfg.hostname, "real.example.com"));
	CHECK(str_is(cfg.user, "alice"));
	CHECK_EQ(cfg.port, 2222);
	/* IdentityFile accumulates, in order, as written (unexpanded). */
	CHECK_EQ(cfg.n_identity, 2);
	if (cfg.n_identity == 2) {
		CHECK(str_is(cfg.identity[0], "~/.ssh/id_my"));
		CHECK(str_is(cfg.identity[1], "~/.ssh/id_all"));
	}
	CHECK(str_is(cfg.strict, "accept-new"));
	CHECK(str_is(cfg.identities_only, "yes"));
	CHECK(!cfg.known_hosts_set);
	CHECK(!cfg.proxy_jump && !cfg.proxy_command && !cfg.certificate);
	qc_sshconf_free(&cfg);
	CHECK(cfg.hostname == NULL && cfg.n_identity == 0);

	/* The negated pattern keeps mybad out of the first block. */
	r = read_text(&cfg,
		"Host my*  !mybad\n"
		"    User alice\n"
		"Host *\n"
		"    User bob\n", "mybad");
	CHECK_EQ(r, 0);
	CHECK(str_is(cfg.user, "bob"));
	CHECK(cfg.hostname == NULL);
	CHECK_EQ(cfg.port, 0);
	qc_sshconf_free(&cfg);

	/* Host patterns match the alias ignoring case; no block, nothing. */
	r = read_text(&cfg,
		"Host MYHOST\n"
		"    User upper\n", "myhost");
	CHECK_EQ(r, 0);
	CHECK(str_is(cfg.user, "upper"));
	qc_sshconf_free(&cfg);
	r = read_text(&cfg,
		"Host !myhost\n"
		"    User negated_only\n"
		"Host a,myhost\n"
		"    User comma\n", "myhost");
	CHECK_EQ(r, 0);
	/* A Host line's patterns are words: a comma is part of one. */
	CHECK(cfg.user == NULL);
	qc_sshconf_free(&cfg);

	/* The top of the file applies to every host, like Host *. */
	r = read_text(&cfg,
		"User top\n"
		"Host myhost\n"
		"    User later\n", "myhost");
	CHECK_EQ(r, 0);
	CHECK(str_is(cfg.user, "top"));
	qc_sshconf_free(&cfg);
}

static void test_forms(void)
{
	struct qc_sshconf cfg;
	int r;

	/* Key=Value, Key = Value, Key Value; keywords in any case. */
	r = read_text(&cfg,
		"hostname=eq.example.com\n"
		"USER = spaced\n"
		"Port\t=\t2200\r\n"
		"identityfile \"~/.ssh/my key\"\n"
		"IdentityFile '~/.ssh/single quoted'\n"
		"IdentityFile ~/.ssh/back\\ slash\n"
		"IdentityFile \"in\\\"side\"\n"
		"IdentityFile ~/.ssh/hash#inside # a comment\n"
		"IdentityFile none\n"
		"StrictHostKeyChecking=no # trailing comment\n", "h");
	CHECK_EQ(r, 0);
	CHECK(str_is(cfg.hostname, "eq.example.com"));
	CHECK(str_is(cfg.user, "spaced"));
	CHECK_EQ(cfg.port, 2200);
	/* "none" is no file. */
	CHECK_EQ(cfg.n_identity, 5);
	if (cfg.n_identity == 5) {
		CHECK(str_is(cfg.identity[0], "~/.ssh/my key"));
		CHECK(str_is(cfg.identity[1], "~/.ssh/single quoted"));
		CHECK(str_is(cfg.identity[2], "~/.ssh/back slash"));
		CHECK(str_is(cfg.identity[3], "in\"side"));
		/* '#' starts a comment only at the start of a word. */
		CHECK(str_is(cfg.identity[4], "~/.ssh/hash#inside"));
	}
	CHECK(str_is(cfg.strict, "no"));
	qc_sshconf_free(&cfg);
}

static void test_lists(void)
{
	struct qc_sshconf cfg;
	int r;
	char text[4096];
	size_t n = 0;

	/* UserKnownHostsFile: a list on one line; only the first line
	 * counts; "none" in it is no file. */
	r = read_text(&cfg,
		"UserKnownHostsFile ~/.ssh/kh1 none /etc/kh2\n"
		"UserKnownHostsFile ~/.ssh/ignored\n", "h");
	CHECK_EQ(r, 0);
	CHECK(cfg.known_hosts_set);
	CHECK_EQ(cfg.n_known_hosts, 2);
	if (cfg.n_known_hosts == 2) {
		CHECK(str_is(cfg.known_hosts[0], "~/.ssh/kh1"));
		CHECK(str_is(cfg.known_hosts[1], "/etc/kh2"));
	}
	qc_sshconf_free(&cfg);
	CHECK_EQ(read_text(&cfg, "UserKnownHostsFile none\n", "h"), 0);
	CHECK(cfg.known_hosts_set);
	CHECK_EQ(cfg.n_known_hosts, 0);
	qc_sshconf_free(&cfg);

	/* Past QC_SSHCONF_MAX_FILES entries the rest is ignored (with a
	 * warning), not an error. */
	for (int i = 0; i < QC_SSHCONF_MAX_FILES + 3; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      "IdentityFile ~/.ssh/k%d\n", i);
	CHECK_EQ(read_text(&cfg, text, "h"), 0);
	CHECK_EQ(cfg.n_identity, QC_SSHCONF_MAX_FILES);
	CHECK(str_is(cfg.identity[QC_SSHCONF_MAX_FILES - 1], "~/.ssh/k31"));
	qc_sshconf_free(&cfg);
}

static void test_openssh(void)
{
	struct qc_sshconf cfg;
	int r;

	/* Kept as written, words joined by one blank; the first wins. */
	r = read_text(&cfg,
		"Host h\n"
		"    ProxyJump jump1,jump2\n"
		"    ProxyCommand ssh  -W %h:%p   bastion\n"
		"    CertificateFile ~/.ssh/id-cert.pub\n"
		"Host *\n"
		"    ProxyJump other\n"
		"    CertificateFile ~/.ssh/other-cert.pub\n", "h");
	CHECK_EQ(r, 0);
	CHECK(str_is(cfg.proxy_jump, "jump1,jump2"));
	CHECK(str_is(cfg.proxy_command, "ssh -W %h:%p bastion"));
	CHECK(str_is(cfg.certificate, "~/.ssh/id-cert.pub"));
	qc_sshconf_free(&cfg);

	/* "none" switches a proxy off: set, but empty, and it stays so. */
	r = read_text(&cfg,
		"Host h\n"
		"    ProxyJump none\n"
		"    ProxyCommand NONE\n"
		"Host *\n"
		"    ProxyJump later\n", "h");
	CHECK_EQ(r, 0);
	CHECK(str_is(cfg.proxy_jump, ""));
	CHECK(str_is(cfg.proxy_command, ""));
	qc_sshconf_free(&cfg);

	CHECK_EQ(read_text(&cfg, "ProxyJump\n", "h"), -EINVAL);
	qc_sshconf_free(&cfg);
}

static void test_bad_lines(void)
{
	static const char *const bad[] = {
		"Port 0\n",
		"Port 65536\n",
		"Port 22x\n",
		"Port\n",
		"HostName a b\n",
		"User\n",
		"IdentityFile a b\n",
		"StrictHostKeyChecking\n",
		"IdentitiesOnly yes no\n",
		"User \"unterminated\n",
		"User 'unterminated\n",
		"CertificateFile\n",
		/* Quotes are checked before the block is: even where nothing
		 * applies. */
		"Host nomatch\n    Compression \"yes\n",
	};
	struct qc_sshconf cfg;
	char text[8192];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check_ctx("%s", bad[i]);
		CHECK_EQ(read_text(&cfg, bad[i], "h"), -EINVAL);
		qc_sshconf_free(&cfg);
	}
	check_ctx("%s", "");

	/* Values read before the bad line stay; the caller frees them. */
	CHECK_EQ(read_text(&cfg, "User first\nPort nope\nHostName x\n", "h"),
		 -EINVAL);
	CHECK(str_is(cfg.user, "first"));
	CHECK(cfg.hostname == NULL);
	qc_sshconf_free(&cfg);

	/* A wrong count of arguments in a block that does not apply is not
	 * looked at. */
	CHECK_EQ(read_text(&cfg, "Host nomatch\n    HostName a b\n", "h"), 0);
	CHECK(cfg.hostname == NULL);
	qc_sshconf_free(&cfg);

	/* An unknown keyword takes any number of words, up to the limit
	 * of 64 words after the keyword. */
	n = (size_t)snprintf(text, sizeof(text), "SendEnv");
	for (int i = 0; i < 64; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, " V%d", i);
	snprintf(text + n, sizeof(text) - n, "\n");
	CHECK_EQ(read_text(&cfg, text, "h"), 0);
	qc_sshconf_free(&cfg);
	snprintf(text + n, sizeof(text) - n, " one_more\n");
	CHECK_EQ(read_text(&cfg, text, "h"), -EINVAL);
	qc_sshconf_free(&cfg);

	/* A line has no length limit. */
	memcpy(text, "HostName ", 9);
	memset(text + 9, 'h', 6000);
	memcpy(text + 9 + 6000, "\nUser u\n", 9);
	CHECK_EQ(read_text(&cfg, text, "h"), 0);
	CHECK(cfg.hostname && strlen(cfg.hostname) == 6000);
	CHECK(str_is(cfg.user, "u"));
	qc_sshconf_free(&cfg);

	/* Lines without a keyword are skipped. */
	CHECK_EQ(read_text(&cfg, "=value\n \t \nUser u\n", "h"), 0);
	CHECK(str_is(cfg.user, "u"));
	qc_sshconf_free(&cfg);
}

static void test_files(void)
{
	struct qc_sshconf cfg;
	char path[PATH_MAX], sys[PATH_MAX];

	/* A missing file: -ENOENT, whether it must exist or not. */
	snprintf(path, sizeof(path), "%s/.ssh/nonexistent", home);
	qc_sshconf_init(&cfg);
	CHECK_EQ(qc_sshconf_read(&cfg, path, "h", home, false), -ENOENT);
	CHECK_EQ(qc_sshconf_read(&cfg, path, "h", home, true), -ENOENT);
	CHECK(cfg.user == NULL);
	/* A directory cannot be read as a config. */
	snprintf(path, sizeof(path), "%s/.ssh", home);
	CHECK(qc_sshconf_read(&cfg, path, "h", home, false) < 0);
	qc_sshconf_free(&cfg);

	/* A second file keeps what the first set and adds to the lists. */
	write_file(".ssh/config",
		   "User mine\nIdentityFile ~/.ssh/a\n");
	write_file("system_config",
		   "User theirs\nPort 2022\nIdentityFile ~/.ssh/b\n"
		   "IdentityFile ~/.ssh/a\n");
	snprintf(path, sizeof(path), "%s/.ssh/config", home);
	snprintf(sys, sizeof(sys), "%s/system_config", home);
	qc_sshconf_init(&cfg);
	CHECK_EQ(qc_sshconf_read(&cfg, path, "h", home, false), 0);
	CHECK_EQ(qc_sshconf_read(&cfg, sys, "h", home, false), 0);
	CHECK(str_is(cfg.user, "mine"));
	CHECK_EQ(cfg.port, 2022);
	/* Duplicates are the caller's to drop. */
	CHECK_EQ(cfg.n_identity, 3);
	qc_sshconf_free(&cfg);
}

static void test_include(void)
{
	struct qc_sshconf cfg;
	char text[PATH_MAX + 64];

	snprintf(text, sizeof(text), "%s/.ssh/conf.d", home);
	CHECK_EQ(mkdir(text, 0700), 0);
	write_file(".ssh/conf.d/b.conf", "IdentityFile ~/.ssh/from_b\n");
	write_file(".ssh/conf.d/a.conf",
		   "IdentityFile ~/.ssh/from_a\n"
		   "Host nomatch\n"
		   "    User not_this\n");
	write_file(".ssh/conf.d/skip.txt", "User not_a_conf\n");
	write_file("abs.conf", "Port 2345\n");
	write_file(".ssh/tilde.conf", "StrictHostKeyChecking yes\n");

	/* Relative to ~/.ssh, globbed in order; a Host line inside an
	 * included file ends at its end: the block around the Include goes
	 * on applying. */
	snprintf(text, sizeof(text),
		 "Host h\n"
		 "    Include conf.d/*.conf\n"
		 "    User after_include\n"
		 "    Include %s/abs.conf\n"
		 "    Include ~/.ssh/tilde.conf\n"
		 "    Include no/such/*.conf nothing_here\n"
		 "Host other\n"
		 "    Include conf.d/skip.txt\n", home);
	CHECK_EQ(read_text(&cfg, text, "h"), 0);
	CHECK_EQ(cfg.n_identity, 2);
	if (cfg.n_identity == 2) {
		CHECK(str_is(cfg.identity[0], "~/.ssh/from_a"));
		CHECK(str_is(cfg.identity[1], "~/.ssh/from_b"));
	}
	CHECK(str_is(cfg.user, "after_include"));
	CHECK_EQ(cfg.port, 2345);
	CHECK(str_is(cfg.strict, "yes"));
	qc_sshconf_free(&cfg);

	/* A bad line in an included file fails the whole read. */
	write_file(".ssh/conf.d/bad.inc", "Port none\n");
	CHECK_EQ(read_text(&cfg, "Include conf.d/bad.inc\n", "h"), -EINVAL);
	qc_sshconf_free(&cfg);

	/* A file that includes itself stops at ssh's depth limit. */
	write_file(".ssh/loop.conf", "Include loop.conf\n");
	CHECK_EQ(read_text(&cfg, "Include loop.conf\n", "h"), -ELOOP);
	qc_sshconf_free(&cfg);
}

static void test_match(void)
{
	struct qc_sshconf cfg;
	int r;

	/* host: the name after HostName; originalhost: the alias. */
	r = read_text(&cfg,
		"Host alias\n"
		"    HostName real.example.com\n"
		"Match host alias\n"
		"    User by_alias_as_host\n"
		"Match host *.example.com\n"
		"    User by_host\n", "alias");
	CHECK_EQ(r, 0);
	CHECK(str_is(cfg.user, "by_host"));
	qc_sshconf_free(&cfg);

	r = read_text(&cfg,
		"Match originalhost real.example.com\n"
		"    User wrong\n"
		"Match originalhost al*,x\n"
		"    IdentityFile ~/.ssh/orig\n"
		"Match !originalhost alias\n"
		"    Port 1111\n"
		"Match !host nope host alias\n"
		"    Port 2222\n"
		"Match all\n"
		"    StrictHostKeyChecking ask\n", "alias");
	CHECK_EQ(r, 0);
	CHECK(cfg.user == NULL);
	CHECK_EQ(cfg.n_identity, 1);
	CHECK_EQ(cfg.port, 2222);
	CHECK(str_is(cfg.strict, "ask"));
	qc_sshconf_free(&cfg);

	/* Criteria qftfs cannot judge, or a missing argument: the block is
	 * skipped, not an error; the next Host or Match starts afresh. */
	r = read_text(&cfg,
		"Match exec true\n"
		"    User exec\n"
		"Match host alias user bob\n"
		"    User user_criterion\n"
		"Match host\n"
		"    User no_argument\n"
		"Match all host alias\n"
		"    User all_and_more\n"
		"Host *\n"
		"    Port 3333\n", "alias");
	CHECK_EQ(r, 0);
	CHECK(cfg.user == NULL);
	CHECK_EQ(cfg.port, 3333);
	qc_sshconf_free(&cfg);
}

static void test_expand(void)
{
	const struct qc_sshconf_tokens t = {
		.home = "/home/me",
		.local_user = "me",
		.host = "real.example.com",
		.alias = "alias",
		.user = "remote",
		.port = 2222,
	};
	const struct qc_sshconf_tokens empty = { .port = 22 };
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "", "" },
		{ "plain", "plain" },
		{ "~", "/home/me" },
		{ "~/.ssh/id_%h", "/home/me/.ssh/id_real.example.com" },
		{ "%d/x", "/home/me/x" },
		{ "%u", "me" },
		{ "%r@%h:%p", "remote@real.example.com:2222" },
		{ "%n", "alias" },
		{ "100%%", "100%" },
		{ "%%h", "%h" },
		{ "a~b", "a~b" },          /* ~ only at the start */
		{ "/x/~/y", "/x/~/y" },
	};
	static const char *const bad[] = {
		"%x", "abc%", "%", "%H", "~no-such-user-qftfs/x",
	};
	struct passwd *pw = getpwuid(0);
	char in[PATH_MAX], want[PATH_MAX], longname[400];
	char *got;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_ctx("'%s'", cases[i].in);
		got = qc_sshconf_expand(cases[i].in, &t);
		CHECK(str_is(got, cases[i].want));
		free(got);
	}
	check_ctx("%s", "");

	/* Tokens without a value expand to nothing. */
	got = qc_sshconf_expand("[%r][%h][%u]%p~", &empty);
	CHECK(str_is(got, "[][][]22~"));
	free(got);
	got = qc_sshconf_expand("~/k", &empty);
	CHECK(str_is(got, "/k"));
	free(got);

	/* ~user: that user's home. */
	if (pw) {
		snprintf(in, sizeof(in), "~%s/.ssh/k", pw->pw_name);
		snprintf(want, sizeof(want), "%s/.ssh/k", pw->pw_dir);
		got = qc_sshconf_expand(in, &t);
		CHECK(str_is(got, want));
		free(got);
	}

	/* Unknown tokens, a lone '%' and unknown users: EINVAL. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check_ctx("'%s'", bad[i]);
		errno = 0;
		got = qc_sshconf_expand(bad[i], &t);
		CHECK(got == NULL);
		CHECK_EQ(errno, EINVAL);
		free(got);
	}
	check_ctx("%s", "");
	/* A ~user name longer than the parser's buffer. */
	longname[0] = '~';
	memset(longname + 1, 'u', sizeof(longname) - 2);
	longname[sizeof(longname) - 1] = '\0';
	errno = 0;
	got = qc_sshconf_expand(longname, &t);
	CHECK(got == NULL);
	CHECK_EQ(errno, EINVAL);
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

int main(void)
{
	char dir[PATH_MAX];

	if (!mkdtemp(home)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/.ssh", home);
	if (mkdir(dir, 0700) < 0) {
		perror(dir);
		return 1;
	}
	test_pattern();
	test_patterns();
	test_hosts();
	test_forms();
	test_lists();
	test_openssh();
	test_bad_lines();
	test_files();
	test_include();
	test_match();
	test_expand();
	nftw(home, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return check_exit("sshconf");
}
