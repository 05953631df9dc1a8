/* SPDX-License-Identifier: MIT */
/*
 * sshfs and ssh options on a qftfs command line or fstab line.
 *
 * A user replaces `sshfs` with `qftfs` and keeps their options.  Each
 * option sshfs 3.7 knows (its own, the libfuse high-level ones it
 * accepts, the ssh_config(5) keywords it passes on to ssh) and each
 * option mount(8) leaves in an fstab line is, here, one of:
 *
 *   mapped    rewritten into the qftfs option with the same meaning
 *             (reconnect -> reconnect=yes, ServerAliveInterval=15 ->
 *             keepalive=15 and, with ServerAliveCountMax, timeout=45);
 *   noted     accepted with no effect, and one line on stderr saying why
 *             qftfs does not need it (max_conns, directport, ...);
 *   mount     an fstab-only word (_netdev, nofail, x-systemd.*): taken
 *             out silently, since it is addressed to mount(8) or systemd
 *             and had its effect there;
 *   refused   cannot work with qftfs: the reason, and exit 2.
 *
 * Anything else goes on to libfuse, which knows the kernel's mount
 * options and refuses the rest.
 *
 * Error convention: 0 or a negative errno; refusals print the reason.
 */
#ifndef QC_COMPAT_H
#define QC_COMPAT_H

#include <stdbool.h>
#include <stddef.h>

#define QC_COMPAT_MAX_NATIVE 64
#define QC_COMPAT_MAX_NOTES  64

struct qc_compat {
	/* qftfs options the mapped ones became, in order (owned). */
	char *native[QC_COMPAT_MAX_NATIVE];
	size_t n_native;
	/* One line per option accepted without effect (owned). */
	char *notes[QC_COMPAT_MAX_NOTES];
	size_t n_notes;
	/* ServerAliveInterval / ServerAliveCountMax, until qc_compat_finish
	 * turns them into keepalive= and timeout= (-1: not given). */
	long alive_interval;
	long alive_count;
};

enum qc_compat_kind {
	QC_COMPAT_FUSE,    /* not ours: for libfuse */
	QC_COMPAT_DONE,    /* mapped, noted or an fstab word: consumed */
};

void qc_compat_init(struct qc_compat *c);
void qc_compat_free(struct qc_compat *c);

/*
 * One option as fuse_opt hands it over ("name" or "name=value", or a
 * command-line flag such as "-C").  Returns its kind, or -EINVAL after
 * printing why it cannot work (or why its value is wrong), or -ENOMEM.
 */
int qc_compat_option(struct qc_compat *c, const char *opt);

/* After the last option: derived options (timeout= from the keepalive
 * settings).  0 or -ENOMEM. */
int qc_compat_finish(struct qc_compat *c);

/* Prints each note once on stderr ("qftfs: note: ..."). */
void qc_compat_print_notes(const struct qc_compat *c);

/*
 * Appends the sshfs compatibility part of `qftfs -h` to stdout: which
 * sshfs and ssh options are understood and how.
 */
void qc_compat_help(void);

#endif /* QC_COMPAT_H */
