/* SPDX-License-Identifier: MIT */
/*
 * commit=async's end: the unmount's drain and `qftfs --sync`.
 */
#ifndef QC_CLI_SYNC_H
#define QC_CLI_SYNC_H

#include "fs/fs.h"

int drain(struct qc_fs *fs);
int sync_mount(const char *mnt);

#endif /* QC_CLI_SYNC_H */
