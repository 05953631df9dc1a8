/* SPDX-License-Identifier: MIT */
/*
 * Owners and modes as the local side sees them (sshfs's idmap=, uid=,
 * gid=, umask=).
 *
 *   idmap=user   the remote user the server runs as appears as the
 *                mounting user, its group as the mounting user's group;
 *                chown to the mounting user becomes chown to the remote
 *                user.
 *   idmap=file   uidfile=/gidfile= list "name:remote_id" lines; each
 *                remote id appears as the local user or group of that
 *                name, and back for chown.  nomap=ignore shows ids
 *                without a line as they are; nomap=error (the default)
 *                shows them as nobody/nogroup (65534) and refuses a
 *                chown to them with EPERM.
 *   uid=N, gid=N every file appears owned by N (after idmap).
 *   umask=M      every file's permission bits appear as 0777 & ~M (as
 *                libfuse's option of the same name does).
 *
 * The mapping is set up once before the session starts and read-only
 * afterwards (qc_idmap_set_remote only before the FUSE threads start), so
 * the hooks take no lock.  One mount per process: the state is the
 * module's, a singleton that is written only before the FUSE threads
 * start and read-only while the mount serves -- which is why it is not
 * yet in struct qc_fs: moving it there changes these calls' signatures
 * for main.c (setup, set_remote, free) and the chown callbacks.
 *
 * Error convention: 0 or a negative errno; setup prints the reason.
 */
#ifndef QC_IDMAP_H
#define QC_IDMAP_H

#include <stdint.h>
#include <sys/stat.h>

struct qc_idmap_opts {
	const char *idmap;    /* none, user, file; NULL: none */
	const char *uidfile;
	const char *gidfile;
	const char *nomap;    /* ignore, error; NULL: error */
	const char *uid;
	const char *gid;
	const char *umask;
};

/* Parses and loads the options (unknown names in the files are errors);
 * prints why and returns -EINVAL on a bad one. */
int qc_idmap_setup(const struct qc_idmap_opts *o);

/* idmap=user: the ids the server runs as (from its HELLO). */
void qc_idmap_set_remote(uint32_t uid, uint32_t gid);

/* True when any mapping is on. */
int qc_idmap_active(void);

/* The hook where a wire attribute becomes a struct stat. */
void qc_idmap_to_local(struct stat *st);

/*
 * The hook for chown: maps *uid and *gid (either may be NULL) to the
 * server's ids.  0, or -EPERM for an id that idmap=file with
 * nomap=error cannot map.
 */
int qc_idmap_to_remote(uint32_t *uid, uint32_t *gid);

/* Frees the tables. */
void qc_idmap_free(void);

#endif /* QC_IDMAP_H */
