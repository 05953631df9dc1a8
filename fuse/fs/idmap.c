// SPDX-License-Identifier: MIT
/*
 * Owner and mode mapping (see idmap.h).
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/idmap.h"
#include "msg.h"

#define NOBODY 65534u


static int parse_id(const char *name, const char *s, uint32_t *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (end == s || *end || errno || *s == '-' || v >= UINT32_MAX) {
		fprintf(stderr, "qftfs: invalid %s '%s': expected a numeric "
			"id\n", name, s);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/* A local name in a uidfile/gidfile: its id, or -ENOENT said. */
static int local_id(bool group, const char *file, unsigned line,
		    const char *name, uint32_t *out)
{
	if (group) {
		struct group *g = getgrnam(name);

		if (g) {
			*out = g->gr_gid;
			return 0;
		}
	} else {
		struct passwd *p = getpwnam(name);

		if (p) {
			*out = p->pw_uid;
			return 0;
		}
	}
	fprintf(stderr, "qftfs: %s:%u: unknown local %s '%s'\n", file, line,
		group ? "group" : "user", name);
	return -ENOENT;
}

/* "name:remote_id" lines; # comments and blank lines skipped. */
static int load_table(bool group, const char *file, struct qc_idmap_table *t)
{
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	int r = 0;
	FILE *f;

	f = fopen(file, "re");
	if (!f) {
		fprintf(stderr, "qftfs: cannot read %s '%s': %s\n",
			group ? "gidfile" : "uidfile", file, strerror(errno));
		return -EINVAL;
	}
	while (r == 0 && getline(&line, &cap, f) >= 0) {
		char *colon, *s = line + strspn(line, " \t");
		struct qc_idmap_pair p, *nv;

		lineno++;
		s[strcspn(s, "\r\n")] = '\0';
		if (!*s || *s == '#')
			continue;
		colon = strchr(s, ':');
		if (!colon) {
			fprintf(stderr, "qftfs: %s:%u: expected name:id\n",
				file, lineno);
			r = -EINVAL;
			break;
		}
		*colon = '\0';
		if (local_id(group, file, lineno, s, &p.local) < 0 ||
		    parse_id(file, colon + 1, &p.remote) < 0) {
			r = -EINVAL;
			break;
		}
		nv = realloc(t->v, (t->n + 1) * sizeof(*nv));
		if (!nv) {
			r = -ENOMEM;
			break;
		}
		t->v = nv;
		t->v[t->n++] = p;
	}
	free(line);
	fclose(f);
	return r;
}

int qc_idmap_setup(struct qc_idmap *m, const struct qc_idmap_opts *o)
{
	uint32_t um;
	int r;

	m->local_uid = (uint32_t)getuid();
	m->local_gid = (uint32_t)getgid();
	if (!o->idmap || strcmp(o->idmap, "none") == 0) {
		m->mode = QC_IDMAP_NONE;
	} else if (strcmp(o->idmap, "user") == 0) {
		m->mode = QC_IDMAP_USER;
	} else if (strcmp(o->idmap, "file") == 0) {
		m->mode = QC_IDMAP_FILE;
	} else {
		fprintf(stderr, "qftfs: invalid idmap '%s': expected none, "
			"user or file\n", o->idmap);
		return -EINVAL;
	}
	if (o->nomap && strcmp(o->nomap, "ignore") != 0 &&
	    strcmp(o->nomap, "error") != 0) {
		fprintf(stderr, "qftfs: invalid nomap '%s': expected ignore "
			"or error\n", o->nomap);
		return -EINVAL;
	}
	m->nomap_error = !o->nomap || strcmp(o->nomap, "error") == 0;
	if (m->mode == QC_IDMAP_FILE) {
		if (!o->uidfile && !o->gidfile) {
			fprintf(stderr, "qftfs: idmap=file needs uidfile= "
				"and/or gidfile=\n");
			return -EINVAL;
		}
		if (o->uidfile &&
		    (r = load_table(false, o->uidfile, &m->uids)) < 0)
			return r;
		if (o->gidfile &&
		    (r = load_table(true, o->gidfile, &m->gids)) < 0)
			return r;
	} else if (o->uidfile || o->gidfile) {
		/* As sshfs: the files are read only for idmap=file. */
		fprintf(stderr, "qftfs: note: uidfile=/gidfile= ignored: "
			"they apply with idmap=file\n");
	}
	if (o->uid) {
		if (parse_id("uid", o->uid, &m->uid) < 0)
			return -EINVAL;
		m->force_uid = true;
	}
	if (o->gid) {
		if (parse_id("gid", o->gid, &m->gid) < 0)
			return -EINVAL;
		m->force_gid = true;
	}
	if (o->umask) {
		char *end;

		errno = 0;
		um = (uint32_t)strtoul(o->umask, &end, 8);
		if (end == o->umask || *end || errno || um > 0777) {
			fprintf(stderr, "qftfs: invalid umask '%s': expected "
				"octal permission bits such as 022\n",
				o->umask);
			return -EINVAL;
		}
		m->umask = (mode_t)um;
		m->force_mode = true;
	}
	return 0;
}

void qc_idmap_set_remote(struct qc_idmap *m, uint32_t uid, uint32_t gid)
{
	m->remote_uid = uid;
	m->remote_gid = gid;
	m->remote_known = true;
}

int qc_idmap_active(const struct qc_idmap *m)
{
	return m->mode != QC_IDMAP_NONE || m->force_uid || m->force_gid ||
	       m->force_mode;
}

/* idmap=file: remote -> local (to_local) or back; false when no line. */
static bool table_map(const struct qc_idmap_table *t, bool to_local, uint32_t *id)
{
	for (size_t i = 0; i < t->n; i++) {
		if (to_local && t->v[i].remote == *id) {
			*id = t->v[i].local;
			return true;
		}
		if (!to_local && t->v[i].local == *id) {
			*id = t->v[i].remote;
			return true;
		}
	}
	return false;
}

void qc_idmap_to_local(const struct qc_idmap *m, struct stat *st)
{
	uint32_t uid = (uint32_t)st->st_uid, gid = (uint32_t)st->st_gid;

	switch (m->mode) {
	case QC_IDMAP_USER:
		if (m->remote_known && uid == m->remote_uid)
			uid = m->local_uid;
		if (m->remote_known && gid == m->remote_gid)
			gid = m->local_gid;
		break;
	case QC_IDMAP_FILE:
		if (!table_map(&m->uids, true, &uid) && m->nomap_error)
			uid = NOBODY;
		if (!table_map(&m->gids, true, &gid) && m->nomap_error)
			gid = NOBODY;
		break;
	case QC_IDMAP_NONE:
		break;
	}
	if (m->force_uid)
		uid = m->uid;
	if (m->force_gid)
		gid = m->gid;
	st->st_uid = (uid_t)uid;
	st->st_gid = (gid_t)gid;
	if (m->force_mode)
		st->st_mode = (st->st_mode & S_IFMT) | (0777 & ~m->umask);
}

int qc_idmap_to_remote(const struct qc_idmap *m, uint32_t *uid,
		       uint32_t *gid)
{
	switch (m->mode) {
	case QC_IDMAP_USER:
		if (uid && m->remote_known && *uid == m->local_uid)
			*uid = m->remote_uid;
		if (gid && m->remote_known && *gid == m->local_gid)
			*gid = m->remote_gid;
		break;
	case QC_IDMAP_FILE:
		if (uid && !table_map(&m->uids, false, uid) && m->nomap_error)
			return -EPERM;
		if (gid && !table_map(&m->gids, false, gid) && m->nomap_error)
			return -EPERM;
		break;
	case QC_IDMAP_NONE:
		break;
	}
	return 0;
}

void qc_idmap_caller(const struct qc_idmap *m, struct qft_cred *c)
{
	uint32_t n = 0;

	switch (m->mode) {
	case QC_IDMAP_USER:
		if (!m->remote_known)
			return;
		if (c->uid == m->local_uid)
			c->uid = m->remote_uid;
		if (c->gid == m->local_gid)
			c->gid = m->remote_gid;
		for (uint32_t i = 0; i < c->ngroups; i++)
			if (c->groups[i] == m->local_gid)
				c->groups[i] = m->remote_gid;
		return;
	case QC_IDMAP_FILE:
		if (!table_map(&m->uids, false, &c->uid) && m->nomap_error)
			c->uid = NOBODY;
		if (!table_map(&m->gids, false, &c->gid) && m->nomap_error)
			c->gid = NOBODY;
		for (uint32_t i = 0; i < c->ngroups; i++) {
			uint32_t g = c->groups[i];

			if (table_map(&m->gids, false, &g) || !m->nomap_error)
				c->groups[n++] = g;
		}
		c->ngroups = n;
		return;
	case QC_IDMAP_NONE:
		return;
	}
}

void qc_idmap_free(struct qc_idmap *m)
{
	free(m->uids.v);
	free(m->gids.v);
	memset(m, 0, sizeof(*m));
}
