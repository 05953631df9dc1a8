/* SPDX-License-Identifier: MIT */
/*
 * `qftfs --stats [--json] [--watch] MOUNTPOINT`: a mount's counters
 * (stats.h) read from the attributes of its root, for people, as one
 * JSON object, or refreshed every second like top(1) with the files
 * being transferred.
 */
#ifndef QC_STATCMD_H
#define QC_STATCMD_H

/* argv[1] is "--stats".  Returns the exit status (0, 1, or 2 on usage). */
int qc_statcmd_main(int argc, char *argv[]);

#endif /* QC_STATCMD_H */
