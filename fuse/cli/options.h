/* SPDX-License-Identifier: MIT */
/*
 * The command line of a mount: the option table (qftfs's own options,
 * and sshfs's and ssh's through compat.h), --help and --version, and the
 * checks that turn each option into the setting it stands for.  Every
 * check runs before anything starts, so a typo is a usage error (exit 2)
 * said on stderr, never a mount that fails later in the background.
 *
 * Error convention: 0 or a negative errno, the reason already printed.
 */
#ifndef QC_CLI_OPTIONS_H
#define QC_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include <fuse_lowlevel.h>

#include "cli/compat.h"
#include "fs/fs.h"
#include "login/bootstrap.h"
#include "net/conn.h"

/* At most this many -o IdentityFile= and -o ProxyJump=-like options. */
#define QC_CMDLINE_MAX_IDENTITY 16

/* The command line as given: the strings are the options' values (NULL
 * when not given), owned by the struct until qc_cmdline_free. */
struct qc_cmdline {
	char *source;
	char *mountpoint;
	char *server;
	char *entry_timeout;
	char *attr_timeout;
	char *negative_timeout;
	char *dircache;
	char *commit;
	char *locks;            /* -o locks=server|local */
	/* Remote sources only. */
	char *port;
	char *config_file;
	char *identity[QC_CMDLINE_MAX_IDENTITY];
	int n_identity;
	char *known_hosts;
	char *strict;
	char *cipher;
	char *transport;
	char *congestion;
	char *streams;
	char *window;
	char *readahead;
	char *walkahead;
	char *compress;
	char *timeout;
	char *keepalive;
	char *resume;           /* -o resume=SECS (conn.h, "Resuming") */
	char *reconnect;
	char *install;          /* -o install=yes|no (install.h) */
	char *server_binaries;  /* -o server_binaries=DIR */
	char *ssh_user;         /* -o User=, when SOURCE names none */
	char *ssh_command;      /* -o ssh_command=: the OpenSSH client */
	char *ssh_extra[QC_CMDLINE_MAX_IDENTITY]; /* -o ProxyJump=... for it */
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
	int noatime;            /* -o noatime (kept for the kernel too) */
	int follow_symlinks;    /* the server follows symlinks (as sshfs's) */
	int allow_other;        /* seen, and passed on to libfuse */
	int default_permissions; /* seen (passed on), or added for a
				  * shared mount of a root server */
	int foreground;
	int debug;
	int single;
	int help;
	int version;
	int fsname_given;
	int subtype_given;
};

/*
 * Parses `args` into `cl` (zeroed by the caller), sshfs and ssh spellings
 * included; the mount options libfuse knows stay in `args` for
 * fuse_session_new.  -EINVAL on a usage error.  Call qc_cmdline_free
 * afterwards whatever it returns.
 */
int qc_cmdline_parse(struct fuse_args *args, struct qc_cmdline *cl);

/* --help and --version, on stdout. */
void qc_cmdline_usage(void);
void qc_cmdline_version(void);

/*
 * Checks the options that do not depend on where the source is and sets
 * what they stand for: the mount's timeouts, commit mode, sizes and
 * symlink mode in `fs` (before qc_fs_init), the directory cache's size in
 * *dircache_max, the connection's options in `co`, and the owner mapping
 * (qc_idmap_setup; the caller frees it with qc_idmap_free).  Prints the
 * notes on sshfs options.  -EINVAL on a usage error (SOURCE or MOUNTPOINT
 * missing too).
 */
int qc_cmdline_settings(const struct qc_cmdline *cl, struct qc_fs *fs,
			size_t *dircache_max, struct qc_conn_opts *co);

/*
 * The ssh side: for a `remote` source, parses SOURCE into `rem` (the
 * caller frees it with qc_boot_source_free) and fills `bo` for the bootstrap,
 * with co's timeout and keepalive; for a local one, notes the ssh options
 * it ignores, but still checks port, cipher, transport and
 * StrictHostKeyChecking.  -EINVAL on a usage error, -ENOMEM.
 */
int qc_cmdline_login(const struct qc_cmdline *cl, bool remote,
		     struct qc_boot_source *rem, struct qc_boot_opts *bo,
		     const struct qc_conn_opts *co);

/* A local source's directory (with -o subdir=), resolved: *root, which
 * the caller frees (also on error), must be a directory. */
int qc_cmdline_root(const struct qc_cmdline *cl, char **root);

/* MOUNTPOINT, resolved (or /dev/fd/N as given): *mnt, freed by the
 * caller. */
int qc_cmdline_mountpoint(const struct qc_cmdline *cl, char **mnt);

/* Adds -o subtype=qftfs and -o fsname=SOURCE to `args` unless given. */
int qc_cmdline_mount_opts(const struct qc_cmdline *cl,
			  struct fuse_args *args);

/*
 * Once the server's HELLO is in (its uid): a mount other users share
 * whose server runs as root acts as each caller there, and the kernel's
 * own check (default_permissions) must stand beside the server's, for
 * what the client answers from its caches.  Adds -o default_permissions
 * to `args` when it is missing and says so: 1 when added (the session
 * must then be made again from `args`), 0 when nothing was needed,
 * -ENOMEM.
 */
int qc_cmdline_shared_mount(struct qc_cmdline *cl, struct fuse_args *args,
			    uint32_t server_uid);

/*
 * What the kernel or fusermount3 would refuse only after qftfs went to
 * the background: `mnt` (from qc_cmdline_mountpoint) must be a directory
 * we may write to.  For after every option is known good, before the
 * server starts.
 */
int qc_cmdline_check_mountpoint(const char *mnt);

/* Frees what qc_cmdline_parse stored in `cl`. */
void qc_cmdline_free(struct qc_cmdline *cl);

#endif /* QC_CLI_OPTIONS_H */
