/* SPDX-License-Identifier: MIT */
/*
 * The command line of a mount: the option table, --help, and the checks
 * that make a bad option a usage error before anything starts.
 */
#ifndef QC_CLI_OPTIONS_H
#define QC_CLI_OPTIONS_H

#include <stdbool.h>

#include <fuse_lowlevel.h>

#include "cli/compat.h"
#include "login/bootstrap.h"

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

extern const struct fuse_opt cmdline_opts[];

void usage(void);
int cmdline_proc(void *data, const char *arg, int key,
		 struct fuse_args *outargs);
int apply_compat(struct cmdline *cl);
void note_ssh_options(const struct cmdline *cl);
char *join_subdir(const char *dir, const char *sub);
int check_mountpoint(const char *mnt);
int parse_seconds(const char *name, const char *s, double def,
		  double *out);
int remote_opts(const struct cmdline *cl, struct qc_remote *rem,
		struct qc_boot_opts *bo);
char *mountpoint_path(const char *mnt);
int add_mount_opt(struct fuse_args *args, const char *key,
		  const char *value);

#endif /* QC_CLI_OPTIONS_H */
