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
 * The mapping (struct qc_idmap, in struct qc_fs) is set up once before
 * the session starts and read-only afterwards (qc_idmap_set_remote only
 * before the FUSE threads start), so the hooks take no lock.
 *
 * Error convention: 0 or a negative errno; setup prints the reason.
 */
#ifndef QC_IDMAP_H
#define QC_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

enum qc_idmap_mode { QC_IDMAP_NONE, QC_IDMAP_USER, QC_IDMAP_FILE };

struct qc_idmap_pair {
	uint32_t local, remote;
};

struct qc_idmap_table {
	struct qc_idmap_pair *v;
	size_t n;
};

/* Written by qc_idmap_setup and qc_idmap_set_remote before the mount
 * serves; read-only after. */
struct qc_idmap {
	enum qc_idmap_mode mode;
	bool nomap_error;
	/* idmap=user */
	uint32_t local_uid, local_gid;
	uint32_t remote_uid, remote_gid;
	bool remote_known;
	/* idmap=file */
	struct qc_idmap_table uids, gids;
	/* uid=, gid=, umask= */
	bool force_uid, force_gid, force_mode;
	uint32_t uid, gid;
	mode_t umask;
};

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
int qc_idmap_setup(struct qc_idmap *m, const struct qc_idmap_opts *o);

/* idmap=user: the ids the server runs as (from its HELLO). */
void qc_idmap_set_remote(struct qc_idmap *m, uint32_t uid, uint32_t gid);

/* True when any mapping is on. */
int qc_idmap_active(const struct qc_idmap *m);

/* The hook where a wire attribute becomes a struct stat. */
void qc_idmap_to_local(const struct qc_idmap *m, struct stat *st);

/*
 * The hook for chown: maps *uid and *gid (either may be NULL) to the
 * server's ids.  0, or -EPERM for an id that idmap=file with
 * nomap=error cannot map.
 */
int qc_idmap_to_remote(const struct qc_idmap *m, uint32_t *uid,
		       uint32_t *gid);

struct qft_cred;

/*
 * A caller of the mount (QFT_FEAT_CRED) as the server must know it, the
 * way chown's ids are mapped: idmap=user turns the mounting user and its
 * group into the server's; idmap=file maps each id through the tables,
 * and with nomap=error a user or group without a line acts as nobody and
 * nogroup (65534) and a supplementary group without one is dropped, as
 * NFS squashes users it cannot map.  uid=, gid= and umask= only change
 * what is shown, not who acts.
 */
void qc_idmap_caller(const struct qc_idmap *m, struct qft_cred *c);

/* Frees the tables. */
void qc_idmap_free(struct qc_idmap *m);

#endif /* QC_IDMAP_H */
