// SPDX-License-Identifier: MIT
/*
 * The command line of a mount (options.h): libfuse's option parser fills
 * struct qc_cmdline from the table below, then each check turns a string
 * into the setting of the layer that owns it.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <fuse_lowlevel.h>

#include "cli/compat.h"
#include "cli/options.h"
#include "config.h"
#include "fs/dircache.h"
#include "fs/fs.h"
#include "fs/idmap.h"
#include "fs/walk.h"
#include "login/bootstrap.h"
#include "login/install.h"
#include "login/ssh.h"
#include "lz4chunk.h"
#include "net/conn.h"
#include "protocol.h"
#include "tcpcc.h"

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_SINGLE,
	KEY_FSNAME,
	KEY_SUBTYPE,
	KEY_IDENTITY,
	KEY_SSH_OPTION,
};

#define OPT(t, field) { t, offsetof(struct qc_cmdline, field), 0 }

static const struct fuse_opt cmdline_opts[] = {
	OPT("server=%s", server),
	OPT("entry_timeout=%s", entry_timeout),
	OPT("attr_timeout=%s", attr_timeout),
	OPT("negative_timeout=%s", negative_timeout),
	OPT("dircache=%s", dircache),
	OPT("commit=%s", commit),
	OPT("locks=%s", locks),
	OPT("-p %s", port),
	OPT("port=%s", port),
	OPT("-F %s", config_file),
	OPT("UserKnownHostsFile=%s", known_hosts),
	OPT("StrictHostKeyChecking=%s", strict),
	OPT("cipher=%s", cipher),
	OPT("transport=%s", transport),
	OPT("congestion=%s", congestion),
	OPT("streams=%s", streams),
	OPT("window=%s", window),
	OPT("readahead=%s", readahead),
	OPT("walkahead=%s", walkahead),
	OPT("compress=%s", compress),
	OPT("timeout=%s", timeout),
	OPT("keepalive=%s", keepalive),
	OPT("resume=%s", resume),
	OPT("reconnect=%s", reconnect),
	OPT("install=%s", install),
	OPT("server_binaries=%s", server_binaries),
	OPT("User=%s", ssh_user),
	OPT("ssh_command=%s", ssh_command),
	FUSE_OPT_KEY("ssh_option=", KEY_SSH_OPTION),
	OPT("BatchMode=%s", batch),
	OPT("IdentitiesOnly=%s", identities_only),
	OPT("subdir=%s", subdir),
	OPT("idmap=%s", idmap),
	OPT("uidfile=%s", uidfile),
	OPT("gidfile=%s", gidfile),
	OPT("nomap=%s", nomap),
	OPT("uid=%s", uid),
	OPT("gid=%s", gid),
	OPT("umask=%s", umask),
	{ "password_stdin", offsetof(struct qc_cmdline, password_stdin), 1 },
	{ "follow_symlinks", offsetof(struct qc_cmdline, follow_symlinks), 1 },
	FUSE_OPT_KEY("IdentityFile=", KEY_IDENTITY),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("--debug", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("fsname=", KEY_FSNAME),
	FUSE_OPT_KEY("subtype=", KEY_SUBTYPE),
	FUSE_OPT_END
};

void qc_cmdline_usage(void)
{
	printf(
"usage: qftfs [options] SOURCE MOUNTPOINT\n"
"       qftfs --sync MOUNTPOINT   wait until everything written to the mount\n"
"                                 is on the server's disk; report failures\n"
"       qftfs --stats [--json | --watch] MOUNTPOINT\n"
"                                 what the mount did and is doing (--watch:\n"
"                                 refreshed every second, with the files in\n"
"                                 transfer); SIGUSR1 logs the same\n"
"\n"
"SOURCE is a local directory (./dir, /srv/data), or [user@]host:[dir] for a\n"
"directory on another machine, reached with ssh (dir defaults to the remote\n"
"home; relative paths start there).  Unmount with: fusermount3 -u MOUNTPOINT\n"
"\n"
"options:\n"
"    -h, --help             print this help and exit\n"
"    -V, --version          print version information and exit\n"
"    -f                     stay in the foreground\n"
"    -d                     print debugging output (implies -f)\n"
"    -s                     handle one request at a time\n"
"    -p PORT                ssh port (default: from ~/.ssh/config, else 22)\n"
"    -F FILE                ssh config file (default: ~/.ssh/config)\n"
"    -o OPT[,OPT...]        options:\n"
"\n"
"qftfs options:\n"
"    -o server=CMD          server command, split on blanks (local: no shell,\n"
"                           default qftfs-server beside qftfs, else PATH;\n"
"                           remote: each word quoted for the remote shell,\n"
"                           default qftfs-server from the remote PATH)\n"
"    -o install=yes|no      without -o server=, upload this qftfs's server\n"
"                           to the remote host's cache when it has none of\n"
"                           this protocol (default yes)\n"
"    -o server_binaries=DIR where to find servers for other architectures\n"
"                           (DIR/ARCH/qftfs-server)\n"
"    -o entry_timeout=SECS  cache names for SECS seconds (default: 1)\n"
"    -o attr_timeout=SECS   cache attributes for SECS seconds (default: 1)\n"
"    -o negative_timeout=SECS\n"
"                           cache missing names for SECS seconds (default: 0)\n"
"    -o dircache=N          keep listings of at most N directory entries to\n"
"                           answer lookups and listings locally (default:\n"
"                           200000; 0: off)\n"
"    -o commit=close|none|async\n"
"                           close() of a written file waits until the server\n"
"                           has fdatasync'd it (close, default), or only until\n"
"                           it has written it (none); async: close() returns\n"
"                           at once, errors come from `qftfs --sync` and the\n"
"                           unmount\n"
"    -o locks=server|local  fcntl and flock locks are taken on the server,\n"
"                           where they meet other clients' (server, the\n"
"                           default, where the server can), or kept among\n"
"                           this mount's processes (local)\n"
"    -o window=SIZE         unacknowledged write data per open file\n"
"                           (K/M/G suffixes; default: twice the measured\n"
"                           bandwidth-delay product, 4M to 1/64 of memory\n"
"                           or 256M, 16M until measured; 0: synchronous)\n"
"    -o readahead=SIZE      read-ahead per sequentially read file\n"
"                           (default: measured like the window)\n"
"    -o walkahead=SIZE      contents of small files fetched ahead of a\n"
"                           process reading a directory's files in turn\n"
"                           (cp -r, tar, rsync, grep -r; default 4M, 0: off)\n"
"    -o compress=none|lz4|auto\n"
"                           lz4 on file data, each chunk sent as it is when\n"
"                           it does not shrink (default none; auto stops\n"
"                           trying on data that does not compress)\n"
"    -o timeout=SECS        a request unanswered for SECS seconds (or a\n"
"                           server silent that long) ends the connection:\n"
"                           operations fail with EIO (default 30)\n"
"    -o keepalive=SECS      probe a quiet connection every SECS seconds\n"
"                           (default 10, 0: off)\n"
"    -o resume=SECS         after a lost link, take the session up again\n"
"                           where it stopped for up to SECS seconds, with\n"
"                           operations waiting meanwhile (default 120, at\n"
"                           most 3600; 0: off, a lost link fails them)\n"
"    -o reconnect=yes|no    after losing the server, connect again in the\n"
"                           background (yes, default); with no, every\n"
"                           operation fails with EIO until unmounted\n"
"\n"
"remote sources:\n"
"    -o IdentityFile=FILE   private key to log in with (repeatable); tried\n"
"                           after ssh-agent, before ~/.ssh/id_{ed25519,ecdsa,rsa}\n"
"    -o StrictHostKeyChecking=yes|accept-new\n"
"                           refuse hosts missing from known_hosts (yes, the\n"
"                           default), or add them (accept-new); a changed\n"
"                           host key is always refused\n"
"    -o UserKnownHostsFile=FILE  (default: ~/.ssh/known_hosts)\n"
"    -o password_stdin      read the password from stdin\n"
"    -o cipher=aes256-gcm|chacha20|none\n"
"                           data-plane encryption (default aes256-gcm; none\n"
"                           still authenticates every record)\n"
"    -o transport=auto|direct|ssh\n"
"                           direct TCP to the server, falling back to the\n"
"                           ssh channel (auto, default), direct only, or\n"
"                           the ssh channel only\n"
"    -o congestion=auto|system|NAME\n"
"                           TCP congestion control of the direct\n"
"                           connections, each side for what it sends: bbr\n"
"                           where the user may choose it, which keeps the\n"
"                           rate on lossy links (auto, default), the hosts'\n"
"                           default (system), or the algorithm NAME\n"
"    -o streams=auto|N      TCP connections carrying file data: on a far\n"
"                           link where a side cannot send with bbr, 4\n"
"                           (auto, default); N from 1 (one) to 8\n"
"    -o port=PORT           same as -p\n"
"    -o User=NAME           remote user when SOURCE names none\n"
"    -o BatchMode=yes       never ask for a password or passphrase\n"
"    -o ssh_command=CMD     log in with the OpenSSH client CMD (e.g. ssh)\n"
"                           instead of libssh2; automatic with ProxyJump,\n"
"                           ProxyCommand, CertificateFile, and RSA or FIDO\n"
"                           keys libssh2 cannot sign with\n"
"    -o ProxyJump=HOST, -o ProxyCommand=CMD, -o CertificateFile=FILE\n"
"                           as in ssh_config(5), through the OpenSSH client\n"
"\n"
"owners and modes (as with sshfs):\n"
"    -o idmap=none|user|file\n"
"                           user: the remote user (and group) the server\n"
"                           runs as appear as you; file: as listed in\n"
"                           uidfile=/gidfile= (name:remote_id lines)\n"
"    -o uidfile=FILE, -o gidfile=FILE\n"
"    -o nomap=ignore|error  idmap=file: ids without a line are shown as\n"
"                           they are (ignore) or as nobody, and chown to\n"
"                           them fails (error, default)\n"
"    -o uid=N, -o gid=N     show every file as owned by N\n"
"    -o umask=M             show every file with mode 0777 & ~M\n"
"    -o subdir=DIR          mount DIR below SOURCE's directory\n"
"\n"
"symlinks:\n"
"    -o follow_symlinks     the server follows symlinks (as sshfs's option):\n"
"                           each shows as what it leads to, resolved on the\n"
"                           server (\"/\" is the server's root), so paths may\n"
"                           leave SOURCE's directory; dangling links and\n"
"                           loops stay symlinks.  Default: symlinks show as\n"
"                           symlinks and no path leaves the directory\n"
"\n"
"FUSE options (passed to the kernel):\n"
"    -o allow_other         allow access by all users (non-root users need\n"
"                           user_allow_other in /etc/fuse.conf)\n"
"    -o allow_root          allow access by root\n"
"    -o default_permissions let the kernel check permissions from the\n"
"                           mode bits shown\n"
"    -o auto_unmount        unmount when qftfs ends, even killed\n"
"    -o ro, -o rw           read-only or read-write mount\n"
"    -o nosuid, suid, nodev, dev, noexec, exec, noatime, atime, sync,\n"
"       async, dirsync      as in mount(8)\n"
"    -o fsname=NAME         source shown in /proc/mounts (default SOURCE)\n"
"    -o subtype=NAME        type shown as fuse.NAME (default qftfs)\n"
"\n");
	qc_compat_help();
}

static int cmdline_proc(void *data, const char *arg, int key,
			struct fuse_args *outargs)
{
	struct qc_cmdline *cl = data;
	int r;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (!cl->source)
			return (cl->source = strdup(arg)) ? 0 : -1;
		if (!cl->mountpoint)
			return (cl->mountpoint = strdup(arg)) ? 0 : -1;
		fprintf(stderr, "qftfs: unexpected argument '%s'\n", arg);
		return -1;
	case FUSE_OPT_KEY_OPT:
		/* An sshfs or ssh spelling, or an fstab word? */
		r = qc_compat_option(&cl->compat, arg);
		if (r < 0)
			return -1;
		if (r == QC_COMPAT_DONE)
			return 0;
		if (arg[0] == '-') {
			fprintf(stderr, "qftfs: unknown option '%s'\n", arg);
			return -1;
		}
		if (strcmp(arg, "allow_other") == 0)
			cl->allow_other = 1;
		if (strcmp(arg, "default_permissions") == 0)
			cl->default_permissions = 1;
		/* The last of these words wins, as in mount(8). */
		if (strcmp(arg, "noatime") == 0)
			cl->noatime = 1;
		else if (strcmp(arg, "atime") == 0)
			cl->noatime = 0;
		/* A mount option: fuse_session_new knows it or refuses it. */
		return 1;
	case KEY_HELP:
		cl->help = 1;
		return 0;
	case KEY_VERSION:
		cl->version = 1;
		return 0;
	case KEY_FOREGROUND:
		cl->foreground = 1;
		return 0;
	case KEY_DEBUG:
		/* Kept: libfuse then traces every request too. */
		cl->debug = 1;
		cl->foreground = 1;
		return 1;
	case KEY_SINGLE:
		cl->single = 1;
		return 0;
	case KEY_FSNAME:
		cl->fsname_given = 1;
		return 1;
	case KEY_SUBTYPE:
		cl->subtype_given = 1;
		return 1;
	case KEY_SSH_OPTION:
		if (cl->n_ssh_extra == QC_CMDLINE_MAX_IDENTITY) {
			fprintf(stderr, "qftfs: too many ssh options\n");
			return -1;
		}
		cl->ssh_extra[cl->n_ssh_extra] =
			strdup(arg + strlen("ssh_option="));
		return cl->ssh_extra[cl->n_ssh_extra++] ? 0 : -1;
	case KEY_IDENTITY:
		if (cl->n_identity == QC_CMDLINE_MAX_IDENTITY) {
			fprintf(stderr, "qftfs: at most %d IdentityFile options\n",
				QC_CMDLINE_MAX_IDENTITY);
			return -1;
		}
		arg += strlen("IdentityFile=");
		if (!*arg) {
			fprintf(stderr, "qftfs: empty IdentityFile\n");
			return -1;
		}
		cl->identity[cl->n_identity] = strdup(arg);
		return cl->identity[cl->n_identity++] ? 0 : -1;
	}
	return 1;
}

/*
 * The qftfs options that sshfs and ssh options were mapped to (compat.h)
 * go through the same table as the user's own, after them.
 */
static int apply_compat(struct qc_cmdline *cl)
{
	struct fuse_args nargs = FUSE_ARGS_INIT(0, NULL);
	int r;

	r = qc_compat_finish(&cl->compat);
	if (r < 0 || cl->compat.n_native == 0)
		return r;
	r = fuse_opt_add_arg(&nargs, "qftfs");
	for (size_t i = 0; r == 0 && i < cl->compat.n_native; i++) {
		char *opt = NULL;

		/* A comma in a path must not split the option. */
		r = fuse_opt_add_opt_escaped(&opt, cl->compat.native[i]);
		if (r == 0)
			r = fuse_opt_add_arg(&nargs, "-o");
		if (r == 0)
			r = fuse_opt_add_arg(&nargs, opt);
		free(opt);
	}
	if (r == 0 && fuse_opt_parse(&nargs, cl, cmdline_opts,
				     cmdline_proc) == -1)
		r = -EINVAL;
	fuse_opt_free_args(&nargs);
	return r < 0 ? -EINVAL : 0;
}

/* A local source logs in nowhere: ssh options given for it say so once
 * rather than being dropped without a word. */
static void note_ssh_options(const struct qc_cmdline *cl)
{
	const struct {
		bool given;
		const char *name;
	} opts[] = {
		{ cl->port, "port" }, { cl->config_file, "-F" },
		{ cl->n_identity, "IdentityFile" },
		{ cl->known_hosts, "UserKnownHostsFile" },
		{ cl->strict, "StrictHostKeyChecking" },
		{ cl->password_stdin, "password_stdin" },
		{ cl->ssh_user, "User" }, { cl->batch, "BatchMode" },
		{ cl->identities_only, "IdentitiesOnly" },
		{ cl->ssh_command, "ssh_command" },
		{ cl->n_ssh_extra, "ProxyJump/ProxyCommand/CertificateFile" },
		{ cl->cipher, "cipher" }, { cl->transport, "transport" },
		{ cl->congestion, "congestion" }, { cl->streams, "streams" },
	};
	char list[256] = "";
	size_t n = 0;

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (opts[i].given && n < sizeof(list))
			n += (size_t)snprintf(list + n, sizeof(list) - n,
					      "%s%s", n ? ", " : "",
					      opts[i].name);
	if (n)
		fprintf(stderr, "qftfs: note: %s: ignored: the source is a "
			"local directory, reached without ssh\n", list);
}

/* sshfs's subdir=: DIR below the directory SOURCE names. */
static char *join_subdir(const char *dir, const char *sub)
{
	char *out;

	if (!sub)
		return strdup(dir);
	if (strcmp(dir, ".") == 0)
		return strdup(sub);
	if (asprintf(&out, "%s%s%s", dir,
		     dir[strlen(dir) - 1] == '/' ? "" : "/", sub) < 0)
		return NULL;
	return out;
}

/*
 * What the kernel or fusermount3 would refuse only after qftfs went to
 * the background (a regular file as the mount point mounts, and then
 * every access fails): said here, with exit 1.
 */
int qc_cmdline_check_mountpoint(const char *mnt)
{
	struct stat st;

	if (strncmp(mnt, "/dev/fd/", 8) == 0)
		return 0;
	if (stat(mnt, &st) < 0) {
		fprintf(stderr, "qftfs: bad mount point '%s': %s\n", mnt,
			strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "qftfs: bad mount point '%s': not a "
			"directory\n", mnt);
		return -ENOTDIR;
	}
	if (access(mnt, R_OK | W_OK | X_OK) < 0) {
		int e = errno;

		fprintf(stderr, "qftfs: bad mount point '%s': %s (you need "
			"write access to it)\n", mnt, strerror(e));
		return -e;
	}
	return 0;
}

static int parse_seconds(const char *name, const char *s, double def,
			 double *out)
{
	char *end;
	double v;

	if (!s) {
		*out = def;
		return 0;
	}
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < 0) {
		fprintf(stderr, "qftfs: invalid %s '%s': expected a number "
			"of seconds >= 0\n", name, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/*
 * The ssh side of the command line, checked before anything connects so
 * that a typo is a usage error (exit 2).
 */
static int remote_opts(const struct qc_cmdline *cl,
		       struct qc_boot_source *rem, struct qc_boot_opts *bo)
{
	memset(bo, 0, sizeof(*bo));
	if (cl->port) {
		char *end;
		long p;

		errno = 0;
		p = strtol(cl->port, &end, 10);
		if (end == cl->port || *end || errno || p < 1 || p > 65535) {
			fprintf(stderr, "qftfs: invalid port '%s'\n", cl->port);
			return -EINVAL;
		}
		bo->ssh.port = (int)p;
	}
	bo->cipher = QFT_CIPHER_AES256GCM;
	if (cl->cipher && qc_boot_parse_cipher(cl->cipher, &bo->cipher) < 0) {
		fprintf(stderr, "qftfs: invalid cipher '%s': expected "
			"aes256-gcm, chacha20 or none\n", cl->cipher);
		return -EINVAL;
	}
	if (cl->transport &&
	    qc_boot_parse_transport(cl->transport, &bo->transport) < 0) {
		fprintf(stderr, "qftfs: invalid transport '%s': expected auto, "
			"direct or ssh\n", cl->transport);
		return -EINVAL;
	}
	if (qft_tcpcc_parse(cl->congestion, &bo->tcpcc) < 0) {
		fprintf(stderr, "qftfs: invalid congestion '%s': expected auto, "
			"system or an algorithm's name (see sysctl "
			"net.ipv4.tcp_available_congestion_control)\n",
			cl->congestion);
		return -EINVAL;
	}
	if (cl->strict && qc_ssh_parse_strict(cl->strict, &bo->ssh.strict) < 0) {
		fprintf(stderr, "qftfs: invalid StrictHostKeyChecking '%s': "
			"expected yes or accept-new\n", cl->strict);
		return -EINVAL;
	}
	if (!rem)
		return 0;
	bo->ssh.alias = rem->host;
	bo->ssh.user = rem->user;
	bo->ssh.config_file = cl->config_file;
	bo->ssh.identity = (const char *const *)cl->identity;
	bo->ssh.n_identity = (size_t)cl->n_identity;
	bo->ssh.known_hosts = cl->known_hosts;
	bo->ssh.password_stdin = cl->password_stdin;
	bo->ssh.identities_only = cl->identities_only &&
				  strcmp(cl->identities_only, "yes") == 0;
	bo->ssh.ssh_command = cl->ssh_command;
	bo->ssh.ssh_extra = (const char *const *)cl->ssh_extra;
	bo->ssh.n_ssh_extra = (size_t)cl->n_ssh_extra;
	bo->server = cl->server;
	bo->dir = rem->dir;
	bo->follow = cl->follow_symlinks;
	bo->install.enabled = true;
	if (cl->install && qc_install_parse(cl->install,
					    &bo->install.enabled) < 0) {
		fprintf(stderr, "qftfs: invalid install '%s': expected yes or "
			"no\n", cl->install);
		return -EINVAL;
	}
	bo->install.server_binaries = cl->server_binaries;
	return 0;
}

static char *mountpoint_path(const char *mnt)
{
	/* libfuse accepts an already open /dev/fuse as /dev/fd/N. */
	if (strncmp(mnt, "/dev/fd/", 8) == 0)
		return strdup(mnt);
	return realpath(mnt, NULL);
}

static int add_mount_opt(struct fuse_args *args, const char *key,
			 const char *value)
{
	char *opt = NULL, *kv;
	int r;

	if (asprintf(&kv, "%s=%s", key, value) < 0)
		return -1;
	/* Commas and backslashes in a path would split the option. */
	r = fuse_opt_add_opt_escaped(&opt, kv);
	free(kv);
	if (r == 0)
		r = fuse_opt_add_arg(args, "-o");
	if (r == 0)
		r = fuse_opt_add_arg(args, opt);
	free(opt);
	return r;
}

int qc_cmdline_parse(struct fuse_args *args, struct qc_cmdline *cl)
{
	qc_compat_init(&cl->compat);
	if (fuse_opt_parse(args, cl, cmdline_opts, cmdline_proc) == -1 ||
	    apply_compat(cl) < 0) {
		fprintf(stderr, "Try 'qftfs --help' for more information.\n");
		return -EINVAL;
	}
	return 0;
}

void qc_cmdline_version(void)
{
	printf("qftfs version %s\n", QFT_VERSION_STRING);
	printf("qftfs protocol version %u\n", QFT_VERSION);
	printf("FUSE library version %s\n", fuse_pkgversion());
	fflush(stdout);
	fuse_lowlevel_version();
}

/* BatchMode= and IdentitiesOnly= take yes or no; the first bad one is
 * named. */
static int check_yes_no(const struct qc_cmdline *cl)
{
	if ((cl->batch && strcmp(cl->batch, "yes") != 0 &&
	     strcmp(cl->batch, "no") != 0) ||
	    (cl->identities_only && strcmp(cl->identities_only, "yes") != 0 &&
	     strcmp(cl->identities_only, "no") != 0)) {
		fprintf(stderr, "qftfs: invalid %s '%s': expected yes or no\n",
			cl->batch && strcmp(cl->batch, "yes") &&
			strcmp(cl->batch, "no") ? "BatchMode" : "IdentitiesOnly",
			cl->batch && strcmp(cl->batch, "yes") &&
			strcmp(cl->batch, "no") ? cl->batch : cl->identities_only);
		return -EINVAL;
	}
	return 0;
}

/* -o streams=auto|N: 0 for auto, else 1 to QFT_MAX_STRIPES. */
static int parse_streams(const char *s, unsigned *out)
{
	char *end;
	long v;

	if (strcmp(s, "auto") == 0) {
		*out = 0;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 1 || v > QFT_MAX_STRIPES) {
		fprintf(stderr, "qftfs: invalid streams '%s': expected auto or "
			"a number of connections from 1 to %u\n", s,
			QFT_MAX_STRIPES);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/*
 * -o resume=SECS: whole seconds, 0 (off) up to QFT_RESUME_MAX_S, the cap
 * the server applies too; beyond it, a message that says so rather than
 * a grace the server would cut short in silence.
 */
static int parse_resume(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 0) {
		fprintf(stderr, "qftfs: invalid resume '%s': expected whole "
			"seconds, 0 (off) to %u\n", s, QFT_RESUME_MAX_S);
		return -EINVAL;
	}
	if (v > (long)QFT_RESUME_MAX_S) {
		fprintf(stderr, "qftfs: resume=%s is too long: a session is "
			"kept at most %u s (one hour) after its link is lost; "
			"use resume=%u or less\n", s, QFT_RESUME_MAX_S,
			QFT_RESUME_MAX_S);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

int qc_cmdline_settings(const struct qc_cmdline *cl, struct qc_fs *fs,
			size_t *dircache_max, struct qc_conn_opts *co)
{
	struct qc_idmap_opts io = {
		.idmap = cl->idmap, .uidfile = cl->uidfile,
		.gidfile = cl->gidfile, .nomap = cl->nomap,
		.uid = cl->uid, .gid = cl->gid, .umask = cl->umask,
	};

	if (!cl->source || !cl->mountpoint) {
		fprintf(stderr, "qftfs: %s\n"
			"usage: qftfs [options] SOURCE MOUNTPOINT\n"
			"Try 'qftfs --help' for more information.\n",
			cl->source ? "missing MOUNTPOINT" :
				     "missing SOURCE and MOUNTPOINT");
		return -EINVAL;
	}
	qc_compat_print_notes(&cl->compat);
	if (qc_idmap_setup(&fs->idmap, &io) < 0 || check_yes_no(cl) < 0)
		return -EINVAL;
	if (parse_seconds("entry_timeout", cl->entry_timeout, 1.0,
			  &fs->entry_timeout) < 0 ||
	    parse_seconds("attr_timeout", cl->attr_timeout, 1.0,
			  &fs->attr_timeout) < 0 ||
	    parse_seconds("negative_timeout", cl->negative_timeout, 0.0,
			  &fs->negative_timeout) < 0)
		return -EINVAL;
	if (cl->commit && strcmp(cl->commit, "close") != 0 &&
	    strcmp(cl->commit, "none") != 0 &&
	    strcmp(cl->commit, "async") != 0) {
		fprintf(stderr, "qftfs: invalid commit '%s': expected close, "
			"none or async\n", cl->commit);
		return -EINVAL;
	}
	fs->commit_none = cl->commit && strcmp(cl->commit, "none") == 0;
	if (cl->dircache && qc_dir_parse_max(cl->dircache, dircache_max) < 0)
		return -EINVAL;
	fs->commit.on = cl->commit && strcmp(cl->commit, "async") == 0;
	fs->multi_user = cl->allow_other;
	fs->follow = cl->follow_symlinks;
	fs->walkahead = QC_WALK_DEFAULT;
	if (qc_fs_set_sizes(fs, cl->window, cl->readahead) < 0 ||
	    qc_fs_parse_size("walkahead", cl->walkahead, &fs->walkahead) < 0)
		return -EINVAL;
	if (cl->server && !cl->server[strspn(cl->server, " \t")]) {
		fprintf(stderr, "qftfs: empty server command\n");
		return -EINVAL;
	}
	if ((cl->timeout &&
	     qc_conn_parse_seconds("timeout", cl->timeout, false,
				   &co->timeout_s) < 0) ||
	    (cl->keepalive &&
	     qc_conn_parse_seconds("keepalive", cl->keepalive, true,
				   &co->keepalive_s) < 0))
		return -EINVAL;
	if (cl->resume && parse_resume(cl->resume, &co->resume_s) < 0)
		return -EINVAL;
	if (cl->streams && parse_streams(cl->streams, &co->streams) < 0)
		return -EINVAL;
	if (cl->reconnect && strcmp(cl->reconnect, "yes") != 0 &&
	    strcmp(cl->reconnect, "no") != 0) {
		fprintf(stderr, "qftfs: invalid reconnect '%s': expected yes "
			"or no\n", cl->reconnect);
		return -EINVAL;
	}
	co->reconnect = !cl->reconnect || strcmp(cl->reconnect, "yes") == 0;
	if (cl->compress &&
	    qft_lz4_mode_parse(cl->compress, &co->compress) < 0) {
		fprintf(stderr, "qftfs: invalid compress '%s': expected none, "
			"lz4 or auto\n", cl->compress);
		return -EINVAL;
	}
	if (cl->locks && strcmp(cl->locks, "server") != 0 &&
	    strcmp(cl->locks, "local") != 0) {
		fprintf(stderr, "qftfs: invalid locks '%s': expected server or "
			"local\n", cl->locks);
		return -EINVAL;
	}
	co->want_locks = !cl->locks || strcmp(cl->locks, "server") == 0;
	co->want_follow = cl->follow_symlinks;
	/* A shared mount: the server must act as each user, or be refused
	 * if it would act as root for all of them (net/link.c). */
	co->want_cred = cl->allow_other;
	/* The kernel stops its own atime updates; the server's reads must
	 * not make them either. */
	co->want_noatime = cl->noatime;
	return 0;
}

int qc_cmdline_login(const struct qc_cmdline *cl, bool remote,
		     struct qc_boot_source *rem, struct qc_boot_opts *bo,
		     const struct qc_conn_opts *co)
{
	if (!remote)
		note_ssh_options(cl);
	if (remote && qc_boot_parse_source(cl->source, rem) < 0)
		return -EINVAL;
	if (remote && !rem->user && cl->ssh_user &&
	    !(rem->user = strdup(cl->ssh_user))) {
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	if (remote && cl->subdir) {
		char *d = join_subdir(rem->dir, cl->subdir);

		if (!d) {
			fprintf(stderr, "qftfs: out of memory\n");
			return -ENOMEM;
		}
		free(rem->dir);
		rem->dir = d;
	}
	if (remote_opts(cl, remote ? rem : NULL, bo) < 0)
		return -EINVAL;
	bo->ssh.batch = cl->batch && strcmp(cl->batch, "yes") == 0;
	bo->timeout_s = bo->ssh.timeout_s = co->timeout_s;
	bo->keepalive_s = bo->ssh.keepalive_s = co->keepalive_s;
	bo->resume_s = co->resume_s;
	return 0;
}

int qc_cmdline_root(const struct qc_cmdline *cl, char **root)
{
	char *src = join_subdir(cl->source, cl->subdir);
	struct stat st;

	*root = src ? realpath(src, NULL) : NULL;
	free(src);
	if (!*root) {
		fprintf(stderr, "qftfs: cannot use source '%s': %s\n",
			cl->source, strerror(errno));
		return -ENOENT;
	}
	if (stat(*root, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "qftfs: source '%s' is not a "
			"directory\n", cl->source);
		return -ENOTDIR;
	}
	return 0;
}

int qc_cmdline_mountpoint(const struct qc_cmdline *cl, char **mnt)
{
	*mnt = mountpoint_path(cl->mountpoint);
	if (!*mnt) {
		int e = errno;

		fprintf(stderr, "qftfs: bad mount point '%s': %s\n",
			cl->mountpoint, strerror(e));
		return -e;
	}
	return 0;
}

int qc_cmdline_shared_mount(struct qc_cmdline *cl, struct fuse_args *args,
			    uint32_t server_uid)
{
	if (!cl->allow_other || server_uid != 0 || cl->default_permissions)
		return 0;
	if (fuse_opt_add_arg(args, "-odefault_permissions") < 0) {
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	cl->default_permissions = 1;
	fprintf(stderr, "qftfs: note: allow_other with a server running as "
		"root: added default_permissions, so that this kernel checks "
		"each user too, beside the server acting as each of them\n");
	return 1;
}

int qc_cmdline_mount_opts(const struct qc_cmdline *cl,
			  struct fuse_args *args)
{
	if ((!cl->subtype_given &&
	     add_mount_opt(args, "subtype", "qftfs") < 0) ||
	    (!cl->fsname_given &&
	     add_mount_opt(args, "fsname", cl->source) < 0)) {
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	return 0;
}

void qc_cmdline_free(struct qc_cmdline *cl)
{
	free(cl->source);
	free(cl->mountpoint);
	free(cl->server);
	free(cl->install);
	free(cl->server_binaries);
	free(cl->entry_timeout);
	free(cl->attr_timeout);
	free(cl->negative_timeout);
	free(cl->dircache);
	free(cl->commit);
	free(cl->locks);
	free(cl->port);
	free(cl->config_file);
	for (int i = 0; i < cl->n_identity; i++)
		free(cl->identity[i]);
	free(cl->known_hosts);
	free(cl->strict);
	free(cl->cipher);
	free(cl->congestion);
	free(cl->streams);
	free(cl->transport);
	free(cl->window);
	free(cl->readahead);
	free(cl->walkahead);
	free(cl->compress);
	free(cl->timeout);
	free(cl->keepalive);
	free(cl->resume);
	free(cl->reconnect);
	free(cl->ssh_user);
	free(cl->ssh_command);
	for (int i = 0; i < cl->n_ssh_extra; i++)
		free(cl->ssh_extra[i]);
	free(cl->batch);
	free(cl->identities_only);
	free(cl->subdir);
	free(cl->idmap);
	free(cl->uidfile);
	free(cl->gidfile);
	free(cl->nomap);
	free(cl->uid);
	free(cl->gid);
	free(cl->umask);
	qc_compat_free(&cl->compat);
}
