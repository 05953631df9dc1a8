/* SPDX-License-Identifier: MIT */
/*
 * SIGUSR1: logs the mount's statistics.
 */
#ifndef QC_CLI_USR1_H
#define QC_CLI_USR1_H

int usr1_start(void);
void usr1_stop(void);

#endif /* QC_CLI_USR1_H */
