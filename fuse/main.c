// SPDX-License-Identifier: MIT
/*
 * qftfs: mounts a directory served by qftfs-server.
 *
 * Order matters: everything that can fail for a reason the user must see
 * (arguments, the source, starting the server, the version handshake, the
 * mount itself) happens in the foreground before fuse_daemonize(), so a
 * background mount either works or makes qftfs exit non-zero with the
 * reason.  Threads are started only after daemonizing, which forks; the
 * one exception, the ssh channel's pump, is paused around the fork.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <fuse_lowlevel.h>

#include "login/bootstrap.h"
#include "cli/compat.h"
#include "config.h"
#include "fs/commit.h"
#include "net/conn.h"
#include "fs/dircache.h"
#include "log.h"
#include "fs/node.h"
#include "ops/ops.h"
#include "fs/fs.h"
#include "fs/idmap.h"
#include "protocol.h"
#include "ops/reqlog.h"
#include "cli/statcmd.h"
#include "net/transport.h"

#define EXIT_USAGE        2
#define HELLO_TIMEOUT_S   30
#define SHUTDOWN_WAIT_MS  10000
#define REAP_WAIT_MS      5000
#define RELAY_WAIT_MS     2000
/* Worker threads, and so requests the kernel can have in flight. */
#define MAX_THREADS       32
#define MAX_IDENTITY      16

struct cmdline {
	char *source;
	char *mountpoint;
	char *server;
	char *entry_timeout;
	char *attr_timeout;
	char *negative_timeout;
	char *dircache;
	char *commit;
	/* Remote sources only. */
	char *port;
	char *config_file;
	char *identity[MAX_IDENTITY];
	int n_identity;
	char *known_hosts;
	char *strict;
	char *cipher;
	char *transport;
	char *window;
	char *readahead;
	char *compress;
	char *timeout;
	char *keepalive;
	char *reconnect;
	char *install;          /* -o install=yes|no (install.h) */
	char *server_binaries;  /* -o server_binaries=DIR */
	char *ssh_user;         /* -o User=, when SOURCE names none */
	char *ssh_command;      /* -o ssh_command=: the OpenSSH client */
	char *ssh_extra[MAX_IDENTITY]; /* -o ProxyJump=... for it */
	int n_ssh_extra;
	char *batch;            /* -o BatchMode=yes: never prompt */
	char *identities_only;  /* -o IdentitiesOnly=yes */
	char *subdir;           /* -o subdir=: below SOURCE's directory */
	/* Owner and mode mapping (idmap.h). */
	char *idmap;
	char *uidfile;
	char *gidfile;
	char *nomap;
	char *uid;
	char *gid;
	char *umask;
	/* sshfs and ssh options, mapped (compat.h). */
	struct qc_compat compat;
	int password_stdin;
	int follow_symlinks;    /* the server follows symlinks (as sshfs's) */
	int allow_other;        /* seen, and passed on to libfuse */
	int foreground;
	int debug;
	int single;
	int help;
	int version;
	int fsname_given;
	int subtype_given;
};

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

#define OPT(t, field) { t, offsetof(struct cmdline, field), 0 }

static const struct fuse_opt cmdline_opts[] = {
	OPT("server=%s", server),
	OPT("entry_timeout=%s", entry_timeout),
	OPT("attr_timeout=%s", attr_timeout),
	OPT("negative_timeout=%s", negative_timeout),
	OPT("dircache=%s", dircache),
	OPT("commit=%s", commit),
	OPT("-p %s", port),
	OPT("port=%s", port),
	OPT("-F %s", config_file),
	OPT("UserKnownHostsFile=%s", known_hosts),
	OPT("StrictHostKeyChecking=%s", strict),
	OPT("cipher=%s", cipher),
	OPT("transport=%s", transport),
	OPT("window=%s", window),
	OPT("readahead=%s", readahead),
	OPT("compress=%s", compress),
	OPT("timeout=%s", timeout),
	OPT("keepalive=%s", keepalive),
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
	{ "password_stdin", offsetof(struct cmdline, password_stdin), 1 },
	{ "follow_symlinks", offsetof(struct cmdline, follow_symlinks), 1 },
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

static void usage(void)
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
"    -o window=SIZE         unacknowledged write data per open file\n"
"                           (K/M/G suffixes; default: twice the measured\n"
"                           bandwidth-delay product, 4M to 1/64 of memory\n"
"                           or 256M, 16M until measured; 0: synchronous)\n"
"    -o readahead=SIZE      read-ahead per sequentially read file\n"
"                           (default: measured like the window)\n"
"    -o compress=none|lz4|auto\n"
"                           lz4 on file data, each chunk sent as it is when\n"
"                           it does not shrink (default none; auto stops\n"
"                           trying on data that does not compress)\n"
"    -o timeout=SECS        a request unanswered for SECS seconds (or a\n"
"                           server silent that long) ends the connection:\n"
"                           operations fail with EIO (default 30)\n"
"    -o keepalive=SECS      probe a quiet connection every SECS seconds\n"
"                           (default 10, 0: off)\n"
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
	struct cmdline *cl = data;
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
		if (cl->n_ssh_extra == MAX_IDENTITY) {
			fprintf(stderr, "qftfs: too many ssh options\n");
			return -1;
		}
		cl->ssh_extra[cl->n_ssh_extra] =
			strdup(arg + strlen("ssh_option="));
		return cl->ssh_extra[cl->n_ssh_extra++] ? 0 : -1;
	case KEY_IDENTITY:
		if (cl->n_identity == MAX_IDENTITY) {
			fprintf(stderr, "qftfs: at most %d IdentityFile options\n",
				MAX_IDENTITY);
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
static int apply_compat(struct cmdline *cl)
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
static void note_ssh_options(const struct cmdline *cl)
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
static int check_mountpoint(const char *mnt)
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
static int remote_opts(const struct cmdline *cl, struct qc_remote *rem,
		       struct qc_boot_opts *bo)
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

/* libfuse takes over descriptors 0-2 when daemonizing; ours must not be
 * among them just because the caller closed them. */
static void ensure_std_fds(void)
{
	int fd;

	do {
		fd = open("/dev/null", O_RDWR);
	} while (fd >= 0 && fd <= STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
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

static int run_loop(struct fuse_session *se, bool single)
{
	struct fuse_loop_config *cfg;
	int r;

	if (single)
		return fuse_session_loop(se);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_max_threads(cfg, MAX_THREADS);
	r = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return r;
}

/*
 * The server a local mount talks to, started for the first connection and
 * again for every reconnect (qc_transport_ops; ep->priv is a heap-allocated
 * struct qc_transport).
 */
struct local_tr {
	const char *server;        /* -o server=, or NULL for the default */
	const char *root;
	bool capture;              /* daemonized: relay its stderr to the log */
	bool follow;               /* -o follow_symlinks */
	struct qc_transport *first; /* the first one, until qc_conn_start */
};

static int local_open(void *ctx, struct qc_endpoint *ep)
{
	struct local_tr *lt = ctx;
	struct qc_transport *t;
	int r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	r = qc_transport_spawn(t, lt->server, lt->root, lt->follow,
			       lt->capture);
	if (r < 0) {
		qft_err("cannot start the server: %s", strerror(-r));
		qc_transport_free(t, 0);
		free(t);
		return r;
	}
	if (lt->capture && (r = qc_transport_relay_start(t)) < 0)
		qft_warn("cannot relay the server's messages: %s",
			 strerror(-r));
	ep->fd = t->fd;
	ep->sealed = false;
	ep->meta = true;
	ep->meta_fd = t->meta_fd;
	t->meta_fd = -1;
	ep->priv = t;
	return 0;
}

static void local_close(void *ctx, struct qc_endpoint *ep, int timeout_ms,
			bool clean)
{
	struct qc_transport *t = ep->priv;
	char desc[128];
	int status = 0;

	(void)ctx;
	if (!clean)
		qc_transport_kill(t, timeout_ms, NULL);
	else if (qc_transport_reap(t, timeout_ms, &status) == 0 && status)
		qft_warn("server %s",
			 qc_transport_status_str(status, desc, sizeof(desc)));
	qc_transport_free(t, RELAY_WAIT_MS);
	free(t);
}

static const struct qc_transport_ops local_ops = {
	.open = local_open,
	.close = local_close,
};

/* The same for a remote mount: the whole bootstrap each time (ep->priv is
 * a heap-allocated struct qc_boot). */
struct remote_tr {
	struct qc_boot_opts bo;    /* batch (no prompts) once mounted */
	struct qc_boot *first;     /* the first one, until qc_conn_start */
};

/* Hands the data plane of a finished bootstrap to an endpoint. */
static void boot_endpoint(struct qc_boot *b, struct qc_endpoint *ep)
{
	ep->fd = b->data_fd;
	b->data_fd = -1;
	ep->sealed = true;
	ep->cipher = b->cipher;
	ep->keys = b->keys;
	qft_session_keys_wipe(&b->keys);
	ep->priv = b;
}

static int remote_open(void *ctx, struct qc_endpoint *ep)
{
	struct remote_tr *rt = ctx;
	struct qc_boot *b;
	int r;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	r = qc_boot_open(b, &rt->bo);
	if (r < 0) {
		free(b);
		return r;
	}
	boot_endpoint(b, ep);
	return 0;
}

static void remote_close(void *ctx, struct qc_endpoint *ep, int timeout_ms,
			 bool clean)
{
	struct qc_boot *b = ep->priv;

	(void)ctx;
	(void)clean;
	/* Closing the channel ends the server, if it is still there. */
	qc_boot_close(b, timeout_ms);
	free(b);
}

static int remote_open_meta(void *ctx, struct qc_endpoint *ep)
{
	struct remote_tr *rt = ctx;
	int r;

	r = qc_boot_open_meta(ep->priv, &rt->bo, &ep->meta_fd,
			      &ep->meta_keys);
	if (r == 0)
		ep->meta = true;
	return r;
}

static const struct qc_transport_ops remote_ops = {
	.open = remote_open,
	.close = remote_close,
	.open_meta = remote_open_meta,
};

/* Starts the server, says HELLO; on failure explains why, from the
 * server's own words and exit status. */
static int start_local(struct qc_fs *fs, struct local_tr *lt,
		       const struct qc_conn_opts *co)
{
	char msg[QFT_MAX_ERRMSG + 128], desc[128];
	struct qc_endpoint ep = { .fd = -1, .meta_fd = -1 };
	struct qc_transport *t;
	int status = 0, r;
	bool reaped;

	t = calloc(1, sizeof(*t));
	if (!t) {
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	r = qc_transport_spawn(t, lt->server, lt->root, lt->follow,
			       lt->capture);
	if (r < 0) {
		fprintf(stderr, "qftfs: cannot start the server: %s\n",
			strerror(-r));
		goto out_free;
	}
	ep.fd = t->fd;
	ep.meta = true;
	ep.meta_fd = t->meta_fd;
	t->meta_fd = -1;
	ep.priv = t;
	r = qc_conn_new(&fs->conn, co, &ep);
	if (r < 0) {
		fprintf(stderr, "qftfs: %s\n", strerror(-r));
		qc_transport_reap(t, REAP_WAIT_MS, NULL);
		goto out_free;
	}
	r = qc_conn_hello(fs->conn, HELLO_TIMEOUT_S, msg, sizeof(msg));
	if (r == 0) {
		lt->first = t;
		return 0;
	}

	/* The transport stays ours (-1), for its exit status and stderr. */
	qc_conn_shutdown(fs->conn, 0, -1);
	qc_conn_free(fs->conn);
	fs->conn = NULL;
	reaped = qc_transport_reap(t, REAP_WAIT_MS, &status) == 0;
	/* What the server said (such as why exec failed) comes first. */
	qc_transport_copy_stderr(t, 1000);
	if (r != -EPIPE)
		fprintf(stderr, "qftfs: %s\n", msg);
	else if (reaped)
		fprintf(stderr, "qftfs: the server '%s' did not start (%s)\n",
			t->argv0,
			qc_transport_status_str(status, desc, sizeof(desc)));
	else
		fprintf(stderr, "qftfs: the server '%s' did not start\n",
			t->argv0);
	/* getopt's own words come first; this says what to do about them. */
	if (r == -EPIPE && reaped && lt->follow && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 2)
		fprintf(stderr, "qftfs: -o follow_symlinks needs a qftfs-server "
			"that knows --follow-symlinks: update '%s', or mount "
			"without follow_symlinks\n", t->argv0);
out_free:
	qc_transport_free(t, RELAY_WAIT_MS);
	free(t);
	return r;
}

/* Logs in, starts the server, opens the data plane, says HELLO. */
static int start_remote(struct qc_fs *fs, struct remote_tr *rt,
			const struct qc_conn_opts *co)
{
	char msg[QFT_MAX_ERRMSG + 128];
	struct qc_endpoint ep = { .fd = -1, .meta_fd = -1 };
	struct qc_boot *b;
	int r;

	b = calloc(1, sizeof(*b));
	if (!b) {
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	r = qc_boot_open(b, &rt->bo);
	if (r < 0) {
		free(b);
		return r;
	}
	boot_endpoint(b, &ep);
	r = qc_conn_new(&fs->conn, co, &ep);
	if (r < 0) {
		fprintf(stderr, "qftfs: cannot set up the data plane: %s\n",
			strerror(-r));
		qc_boot_close(b, REAP_WAIT_MS);
		free(b);
		return r;
	}
	r = qc_conn_hello(fs->conn, HELLO_TIMEOUT_S, msg, sizeof(msg));
	if (r == 0) {
		rt->first = b;
		return 0;
	}

	if (r == -EPIPE)
		snprintf(msg, sizeof(msg), "qftfs-server closed the data "
			 "connection during the handshake");
	qc_conn_shutdown(fs->conn, 0, -1);
	qc_conn_free(fs->conn);
	fs->conn = NULL;
	qc_boot_close(b, REAP_WAIT_MS);
	free(b);
	fprintf(stderr, "qftfs: %s\n", msg);
	return r;
}

/*
 * commit=async: what the application was told is done must be on the
 * server before the connection ends, and what failed must be said.
 */
static int drain(struct qc_fs *fs)
{
	char text[QFT_MAX_PATH + 256];
	int r;

	r = qc_commit_sync(fs, text, sizeof(text));
	qc_commit_stop(fs);
	if (r < 0)
		qft_err("unmount: writes queued with commit=async failed: %s",
			text);
	return r;
}

/*
 * `qftfs --sync MOUNTPOINT`: waits until everything written to the mount
 * is on the server's disk and reports what failed since the last time.
 * The kernel does not pass sync(2) or syncfs(2) on to a FUSE file
 * system, so the mount answers an attribute of its root instead.
 */
static int sync_mount(const char *mnt)
{
	char text[QFT_MAX_PATH + 256];
	ssize_t n;

	n = getxattr(mnt, QC_COMMIT_SYNC_XATTR, text, sizeof(text) - 1);
	if (n < 0) {
		int e = errno;

		fprintf(stderr, "qftfs: --sync %s: %s%s\n", mnt, strerror(e),
			e == ENOTSUP || e == ENODATA || e == EOPNOTSUPP ?
			" (not the root of a qftfs mount?)" : "");
		return 1;
	}
	text[n] = '\0';
	if (strncmp(text, "errors 0\n", 9) == 0)
		return 0;
	fprintf(stderr, "qftfs: %s: writes failed after close():\n%s", mnt,
		text);
	return 1;
}

/*
 * Ends the connection and what it runs over.  False when a reconnect
 * attempt would not stop in time and was left to the exiting process
 * (nothing it uses may be freed then).
 */
static bool stop_conn(struct qc_conn *conn, struct remote_tr *rt)
{
	int r;

	/* Before qc_conn_start the tunnel's pump may still be paused for
	 * the fork, and it has to carry the end of stream. */
	if (rt && rt->first && (r = qc_boot_resume(rt->first)) < 0)
		qft_warn("cannot restart the ssh channel thread: %s",
			 strerror(-r));
	return qc_conn_shutdown(conn, SHUTDOWN_WAIT_MS, REAP_WAIT_MS) !=
	       -EINPROGRESS;
}

/* SIGUSR1 logs the statistics (qc_reqlog_log_stats) instead of ending
 * the process: a thread of its own waits for it. */
static pthread_t usr1_thread;
static bool usr1_running;
static atomic_bool usr1_quit;

static void *usr1_main(void *arg)
{
	sigset_t set;
	int sig;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	while (sigwait(&set, &sig) == 0 && !atomic_load(&usr1_quit))
		qc_reqlog_log_stats();
	return NULL;
}

static int usr1_start(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -EINVAL;
	if (pthread_create(&usr1_thread, NULL, usr1_main, NULL) != 0)
		return -EAGAIN;
	usr1_running = true;
	return 0;
}

static void usr1_stop(void)
{
	if (!usr1_running)
		return;
	atomic_store(&usr1_quit, true);
	pthread_kill(usr1_thread, SIGUSR1);
	pthread_join(usr1_thread, NULL);
	usr1_running = false;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cmdline cl = { 0 };
	struct qc_remote rem = { 0 };
	struct local_tr lt = { 0 };
	struct remote_tr rt = { 0 };
	struct qc_conn_opts co = {
		.timeout_s = QC_TIMEOUT_DEFAULT,
		.keepalive_s = QC_KEEPALIVE_DEFAULT,
		.reconnect = true,
	};
	struct qc_fs fs = { 0 };
	size_t dircache_max = QC_DIRCACHE_DEFAULT;
	struct fuse_session *se;
	char *root = NULL, *mnt = NULL;
	int ret = 1, r;
	bool remote, lost, ssh_inited = false;
	struct stat st;

	ensure_std_fds();
	/* A server that died must be an error code, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	qft_log_init("qftfs", QFT_LOG_INFO);
	if (argc >= 2 && strcmp(argv[1], "--stats") == 0)
		return qc_statcmd_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--sync") == 0) {
		if (argc != 3) {
			fprintf(stderr, "usage: qftfs --sync MOUNTPOINT\n");
			return EXIT_USAGE;
		}
		return sync_mount(argv[2]);
	}

	qc_compat_init(&cl.compat);
	if (fuse_opt_parse(&args, &cl, cmdline_opts, cmdline_proc) == -1 ||
	    apply_compat(&cl) < 0) {
		fprintf(stderr, "Try 'qftfs --help' for more information.\n");
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if (cl.help) {
		usage();
		fflush(stdout);
		ret = 0;
		goto out_free_args;
	}
	if (cl.version) {
		printf("qftfs version %s\n", QFT_VERSION_STRING);
		printf("qftfs protocol version %u\n", QFT_VERSION);
		printf("FUSE library version %s\n", fuse_pkgversion());
		fflush(stdout);
		fuse_lowlevel_version();
		ret = 0;
		goto out_free_args;
	}
	if (!cl.source || !cl.mountpoint) {
		fprintf(stderr, "qftfs: %s\n"
			"usage: qftfs [options] SOURCE MOUNTPOINT\n"
			"Try 'qftfs --help' for more information.\n",
			cl.source ? "missing MOUNTPOINT" :
				    "missing SOURCE and MOUNTPOINT");
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	qc_compat_print_notes(&cl.compat);
	{
		struct qc_idmap_opts io = {
			.idmap = cl.idmap, .uidfile = cl.uidfile,
			.gidfile = cl.gidfile, .nomap = cl.nomap,
			.uid = cl.uid, .gid = cl.gid, .umask = cl.umask,
		};

		if (qc_idmap_setup(&io) < 0) {
			ret = EXIT_USAGE;
			goto out_free_args;
		}
	}
	if ((cl.batch && strcmp(cl.batch, "yes") != 0 &&
	     strcmp(cl.batch, "no") != 0) ||
	    (cl.identities_only && strcmp(cl.identities_only, "yes") != 0 &&
	     strcmp(cl.identities_only, "no") != 0)) {
		fprintf(stderr, "qftfs: invalid %s '%s': expected yes or no\n",
			cl.batch && strcmp(cl.batch, "yes") &&
			strcmp(cl.batch, "no") ? "BatchMode" : "IdentitiesOnly",
			cl.batch && strcmp(cl.batch, "yes") &&
			strcmp(cl.batch, "no") ? cl.batch : cl.identities_only);
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if (parse_seconds("entry_timeout", cl.entry_timeout, 1.0,
			  &fs.entry_timeout) < 0 ||
	    parse_seconds("attr_timeout", cl.attr_timeout, 1.0,
			  &fs.attr_timeout) < 0 ||
	    parse_seconds("negative_timeout", cl.negative_timeout, 0.0,
			  &fs.negative_timeout) < 0) {
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if (cl.commit && strcmp(cl.commit, "close") != 0 &&
	    strcmp(cl.commit, "none") != 0 &&
	    strcmp(cl.commit, "async") != 0) {
		fprintf(stderr, "qftfs: invalid commit '%s': expected close, "
			"none or async\n", cl.commit);
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	fs.commit_none = cl.commit && strcmp(cl.commit, "none") == 0;
	if (cl.dircache && qc_dir_parse_max(cl.dircache, &dircache_max) < 0) {
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	fs.commit.on = cl.commit && strcmp(cl.commit, "async") == 0;
	fs.multi_user = cl.allow_other;
	if (qc_fs_set_sizes(&fs, cl.window, cl.readahead) < 0) {
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if (cl.server && !cl.server[strspn(cl.server, " \t")]) {
		fprintf(stderr, "qftfs: empty server command\n");
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if ((cl.timeout &&
	     qc_conn_parse_seconds("timeout", cl.timeout, false,
				   &co.timeout_s) < 0) ||
	    (cl.keepalive &&
	     qc_conn_parse_seconds("keepalive", cl.keepalive, true,
				   &co.keepalive_s) < 0)) {
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if (cl.reconnect && strcmp(cl.reconnect, "yes") != 0 &&
	    strcmp(cl.reconnect, "no") != 0) {
		fprintf(stderr, "qftfs: invalid reconnect '%s': expected yes "
			"or no\n", cl.reconnect);
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	co.reconnect = !cl.reconnect || strcmp(cl.reconnect, "yes") == 0;
	if (cl.compress && qft_lz4_mode_parse(cl.compress, &co.compress) < 0) {
		fprintf(stderr, "qftfs: invalid compress '%s': expected none, "
			"lz4 or auto\n", cl.compress);
		ret = EXIT_USAGE;
		goto out_free_args;
	}

	remote = qc_boot_is_remote(cl.source);
	if (!remote)
		note_ssh_options(&cl);
	if (remote && qc_boot_parse_source(cl.source, &rem) < 0) {
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if (remote && !rem.user && cl.ssh_user &&
	    !(rem.user = strdup(cl.ssh_user))) {
		fprintf(stderr, "qftfs: out of memory\n");
		goto out_free_args;
	}
	if (remote && cl.subdir) {
		char *d = join_subdir(rem.dir, cl.subdir);

		if (!d) {
			fprintf(stderr, "qftfs: out of memory\n");
			goto out_free_args;
		}
		free(rem.dir);
		rem.dir = d;
	}
	if (remote_opts(&cl, remote ? &rem : NULL, &rt.bo) < 0) {
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	rt.bo.ssh.batch = cl.batch && strcmp(cl.batch, "yes") == 0;
	rt.bo.timeout_s = rt.bo.ssh.timeout_s = co.timeout_s;
	rt.bo.keepalive_s = rt.bo.ssh.keepalive_s = co.keepalive_s;
	if (remote) {
		if (qc_ssh_global_init() < 0) {
			fprintf(stderr, "qftfs: cannot initialise libssh2\n");
			goto out_free_args;
		}
		ssh_inited = true;
	}
	if (!remote) {
		char *src = join_subdir(cl.source, cl.subdir);

		root = src ? realpath(src, NULL) : NULL;
		free(src);
		if (!root) {
			fprintf(stderr, "qftfs: cannot use source '%s': %s\n",
				cl.source, strerror(errno));
			goto out_free_args;
		}
		if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "qftfs: source '%s' is not a "
				"directory\n", cl.source);
			goto out_free_args;
		}
	}
	mnt = mountpoint_path(cl.mountpoint);
	if (!mnt) {
		fprintf(stderr, "qftfs: bad mount point '%s': %s\n",
			cl.mountpoint, strerror(errno));
		goto out_free_args;
	}

	if (cl.debug)
		qft_log_set_level(QFT_LOG_DEBUG);
	if ((!cl.subtype_given &&
	     add_mount_opt(&args, "subtype", "qftfs") < 0) ||
	    (!cl.fsname_given &&
	     add_mount_opt(&args, "fsname", cl.source) < 0)) {
		fprintf(stderr, "qftfs: out of memory\n");
		goto out_free_args;
	}
	if (qc_fs_init(&fs) < 0) {
		fprintf(stderr, "qftfs: out of memory\n");
		goto out_free_args;
	}
	if (qc_dir_init(&fs, dircache_max) < 0) {
		fprintf(stderr, "qftfs: out of memory\n");
		goto out_free_nodes;
	}
	/* Through reqlog: statistics and the -d request log. */
	se = fuse_session_new(&args, qc_reqlog_ops(&qc_ops, &fs),
			      sizeof(qc_ops), &fs);
	if (!se) {
		/* libfuse said why; nearly always an unknown option. */
		ret = EXIT_USAGE;
		goto out_free_nodes;
	}
	qft_debug("options: timeout %d s, keepalive %d s, reconnect %s, "
		  "compress %s, readahead %llu, dircache %zu, batch %s",
		  co.timeout_s, co.keepalive_s, co.reconnect ? "yes" : "no",
		  cl.compress ? cl.compress : "none",
		  (unsigned long long)fs.readahead, dircache_max,
		  rt.bo.ssh.batch ? "yes" : "no");
	/* After every option is known good, before the server starts. */
	if (check_mountpoint(mnt) < 0)
		goto out_destroy_session;

	fs.se = se;
	fs.follow = cl.follow_symlinks;
	co.want_follow = cl.follow_symlinks;
	/* Leases: the server says when a cached directory changed. */
	if (fs.dirs) {
		co.want_notify = true;
		co.notify = qc_dir_notify;
		co.notify_ctx = &fs;
	}
	if (remote) {
		co.host = rem.host;
		co.ops = &remote_ops;
		co.ops_ctx = &rt;
		r = start_remote(&fs, &rt, &co);
	} else {
		lt.server = cl.server;
		lt.root = root;
		lt.follow = cl.follow_symlinks;
		lt.capture = !cl.foreground;
		co.host = "the local server";
		co.ops = &local_ops;
		co.ops_ctx = &lt;
		r = start_local(&fs, &lt, &co);
	}
	if (r < 0)
		goto out_destroy_session;
	{
		uint32_t suid, sgid;

		/* idmap=user maps the ids the server runs as. */
		qc_conn_server_ids(fs.conn, &suid, &sgid);
		qc_idmap_set_remote(suid, sgid);
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_stop_server;
	if (fuse_session_mount(se, mnt) != 0)
		goto out_remove_handlers;
	/* The pump thread would not survive the fork. */
	if (rt.first)
		qc_boot_pause(rt.first);
	if (fuse_daemonize(cl.foreground) != 0)
		goto out_unmount;
	if (!cl.foreground) {
		qft_log_set_tag(mnt);
		qft_log_to_syslog(true);
	}
	/* SIGUSR1 logs the counters; every thread started from here on
	 * inherits the mask, so only the waiting thread takes it. */
	if (usr1_start() < 0)
		qft_warn("SIGUSR1 will not log statistics: cannot start its "
			 "thread");
	if (remote) {
		r = qc_boot_resume(rt.first);
		if (r < 0) {
			qft_err("cannot restart the ssh channel thread: %s",
				strerror(-r));
			goto out_unmount;
		}
	} else {
		r = qc_transport_relay_start(lt.first);
		if (r < 0)
			qft_warn("cannot relay the server's messages: %s",
				 strerror(-r));
	}
	/* Reconnects log in again without anyone to type a password. */
	rt.bo.ssh.batch = true;
	r = qc_conn_start(fs.conn);
	if (r < 0) {
		qft_err("cannot start the connection's threads: %s",
			strerror(-r));
		goto out_unmount;
	}
	r = qc_dir_start(&fs);
	if (r < 0) {
		qft_err("cannot start the directory cache's thread: %s",
			strerror(-r));
		goto out_unmount;
	}
	/* From here on the watchdog owns the transports. */
	lt.first = NULL;
	rt.first = NULL;
	r = qc_commit_start(&fs);
	if (r < 0) {
		qft_err("cannot start the closer thread: %s", strerror(-r));
		goto out_unmount;
	}

	r = run_loop(se, cl.single);
	if (cl.debug)
		qc_reqlog_summary();
	/* Its kernel notices need the session. */
	qc_dir_stop(&fs);
	/* A signal ends the loop with its number: a normal unmount. */
	lost = qc_conn_lost(fs.conn);
	ret = r < 0 || lost ? 1 : 0;
	if (r < 0)
		qft_err("session ended: %s", strerror(-r));
	if (fs.commit.on && drain(&fs) < 0)
		ret = 1;

out_unmount:
	usr1_stop();
	fuse_session_unmount(se);
out_remove_handlers:
	fuse_remove_signal_handlers(se);
	/* libfuse restores SIGPIPE to the default it assumed we had. */
	signal(SIGPIPE, SIG_IGN);
out_stop_server:
	if (!stop_conn(fs.conn, remote ? &rt : NULL)) {
		/*
		 * A reconnect attempt is still blocked on the network (an ssh
		 * login to a host that is gone), using what would be freed
		 * below: leave at once, the mount being gone already.
		 */
		fuse_session_destroy(se);
		fflush(stdout);
		fflush(stderr);
		_exit(ret);
	}
	qc_conn_free(fs.conn);
out_destroy_session:
	fuse_session_destroy(se);
out_free_nodes:
	qc_fs_destroy(&fs);
out_free_args:
	qft_log_set_tag(NULL);
	free(mnt);
	free(root);
	free(cl.source);
	free(cl.mountpoint);
	free(cl.server);
	free(cl.install);
	free(cl.server_binaries);
	free(cl.entry_timeout);
	free(cl.attr_timeout);
	free(cl.negative_timeout);
	free(cl.dircache);
	free(cl.commit);
	free(cl.port);
	free(cl.config_file);
	for (int i = 0; i < cl.n_identity; i++)
		free(cl.identity[i]);
	free(cl.known_hosts);
	free(cl.strict);
	free(cl.cipher);
	free(cl.transport);
	free(cl.window);
	free(cl.readahead);
	free(cl.compress);
	free(cl.timeout);
	free(cl.keepalive);
	free(cl.reconnect);
	free(cl.ssh_user);
	free(cl.ssh_command);
	for (int i = 0; i < cl.n_ssh_extra; i++)
		free(cl.ssh_extra[i]);
	free(cl.batch);
	free(cl.identities_only);
	free(cl.subdir);
	free(cl.idmap);
	free(cl.uidfile);
	free(cl.gidfile);
	free(cl.nomap);
	free(cl.uid);
	free(cl.gid);
	free(cl.umask);
	qc_compat_free(&cl.compat);
	qc_idmap_free();
	qc_remote_free(&rem);
	if (ssh_inited)
		qc_ssh_global_exit();
	fuse_opt_free_args(&args);
	return ret;
}
