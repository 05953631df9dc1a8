// SPDX-License-Identifier: MIT
/* Host <-> protocol value mappings (see errmap.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>

#include "errmap.h"
#include "protocol.h"

static const int status_errno[QFT_STATUS__COUNT] = {
	[QFT_OK] = 0,
	[QFT_EPERM] = EPERM, [QFT_ENOENT] = ENOENT, [QFT_EIO] = EIO,
	[QFT_EBADF] = EBADF, [QFT_ENOMEM] = ENOMEM, [QFT_EACCES] = EACCES,
	[QFT_EBUSY] = EBUSY, [QFT_EEXIST] = EEXIST, [QFT_EXDEV] = EXDEV,
	[QFT_ENOTDIR] = ENOTDIR, [QFT_EISDIR] = EISDIR, [QFT_EINVAL] = EINVAL,
	[QFT_ENFILE] = ENFILE, [QFT_EMFILE] = EMFILE, [QFT_ETXTBSY] = ETXTBSY,
	[QFT_EFBIG] = EFBIG, [QFT_ENOSPC] = ENOSPC, [QFT_ESPIPE] = ESPIPE,
	[QFT_EROFS] = EROFS, [QFT_EMLINK] = EMLINK, [QFT_ERANGE] = ERANGE,
	[QFT_ENAMETOOLONG] = ENAMETOOLONG, [QFT_ENOSYS] = ENOSYS,
	[QFT_ENOTEMPTY] = ENOTEMPTY, [QFT_ELOOP] = ELOOP,
	[QFT_ENODATA] = ENODATA, [QFT_EOVERFLOW] = EOVERFLOW,
	[QFT_EPROTO] = EPROTO, [QFT_EOPNOTSUPP] = EOPNOTSUPP,
	[QFT_EDQUOT] = EDQUOT, [QFT_ESTALE] = ESTALE,
	[QFT_ETIMEDOUT] = ETIMEDOUT, [QFT_EAGAIN] = EAGAIN,
	[QFT_EINTR] = EINTR, [QFT_E2BIG] = E2BIG, [QFT_ENXIO] = ENXIO,
	[QFT_ENODEV] = ENODEV, [QFT_ECANCELED] = ECANCELED,
};

uint32_t qft_status_from_errno(int err)
{
	if (err == 0)
		return QFT_OK;
	/* ENOTSUP is EOPNOTSUPP on Linux; EWOULDBLOCK is EAGAIN. */
	for (uint32_t s = 1; s < QFT_STATUS__COUNT; s++)
		if (status_errno[s] == err)
			return s;
	return QFT_EIO;
}

int qft_errno_from_status(uint32_t status)
{
	if (status >= QFT_STATUS__COUNT)
		return EIO;
	return status_errno[status];
}

static const struct {
	uint32_t qft;
	int host;
} oflag_map[] = {
	{ QFT_O_APPEND, O_APPEND },
	{ QFT_O_TRUNC, O_TRUNC },
	{ QFT_O_EXCL, O_EXCL },
	{ QFT_O_SYNC, O_SYNC },
	{ QFT_O_DSYNC, O_DSYNC },
	{ QFT_O_NOATIME, O_NOATIME },
};

uint32_t qft_oflags_from_host(int flags)
{
	uint32_t out;

	switch (flags & O_ACCMODE) {
	case O_WRONLY: out = QFT_O_WRONLY; break;
	case O_RDWR:   out = QFT_O_RDWR; break;
	default:       out = QFT_O_RDONLY; break;
	}
	for (size_t i = 0; i < sizeof(oflag_map) / sizeof(oflag_map[0]); i++) {
		/* O_SYNC includes the O_DSYNC bit; test the whole mask. */
		if ((flags & oflag_map[i].host) == oflag_map[i].host)
			out |= oflag_map[i].qft;
	}
	return out;
}

int qft_oflags_to_host(uint32_t flags)
{
	int out;

	switch (flags & QFT_O_ACCMODE) {
	case QFT_O_WRONLY: out = O_WRONLY; break;
	case QFT_O_RDWR:   out = O_RDWR; break;
	default:           out = O_RDONLY; break;
	}
	for (size_t i = 0; i < sizeof(oflag_map) / sizeof(oflag_map[0]); i++)
		if (flags & oflag_map[i].qft)
			out |= oflag_map[i].host;
	return out;
}
