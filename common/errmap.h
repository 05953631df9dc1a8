/* SPDX-License-Identifier: MIT */
/*
 * Mapping between host values and their fixed protocol encodings: errno
 * values to enum qft_status and back, open(2) flags to QFT_O_* and back.
 * The mapping is total: an errno with no protocol code travels as QFT_EIO,
 * and an unknown status arrives as EIO, so a peer can never make us hand an
 * arbitrary number to the kernel.
 */
#ifndef QFT_ERRMAP_H
#define QFT_ERRMAP_H

#include <stdint.h>

/* `err` is a positive errno; 0 gives QFT_OK. */
uint32_t qft_status_from_errno(int err);
/* Returns a positive errno, 0 for QFT_OK, EIO for anything unknown. */
int qft_errno_from_status(uint32_t status);

/* Host O_* flags (access mode and the bits listed in protocol.h). */
uint32_t qft_oflags_from_host(int flags);
int qft_oflags_to_host(uint32_t flags);

#endif /* QFT_ERRMAP_H */
