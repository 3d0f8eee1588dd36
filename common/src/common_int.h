/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the files of common/ and not part of its API. */
#ifndef CRUX_COMMON_INT_H
#define CRUX_COMMON_INT_H

#include <stddef.h>
#include <stdint.h>

#include "crux/errmsg.h"
#include "crux/hash.h"

/*
 * Check the shared-memory directory (crux_shm_dir_check_ex), open it and
 * check the opened directory again: *dfd_out is safe to use with *at().
 */
#include "crux/status.h"
#include <stdbool.h>
crux_status_t crux_shm_open_dir(const char *dir, bool create, int *dfd_out, char *err,
				size_t errlen);

/*
 * Open 'dir'/'name' (never following a link, never blocking on a FIFO) and
 * check it is a regular file, not writable by group or others, owned by root
 * or us: what crux_shm_open_ex checks before it maps. Nothing is mapped.
 */
crux_status_t crux_shm_open_checked(const char *dir, const char *name, bool writable, int *fd_out,
				    char *path_out, size_t pathlen, char *err, size_t errlen);

/* pwrite of exactly 'len' bytes at 'off' (records mirrored into files, never mapped). */
#include <sys/types.h>
#include <unistd.h>
static inline bool crux_put(int fd, const void *p, size_t len, size_t off)
{
	return pwrite(fd, p, len, (off_t)off) == (ssize_t)len;
}

/*
 * One message of exactly 'len' bytes with at most one descriptor, both
 * directions of the attach socket; MSG_DONTWAIT. Extra descriptors are
 * closed. recv: *got bytes, *fd (-1 if none), *nfds.
 */
#include <sys/types.h>
ssize_t crux_sock_send(int sock, const void *buf, size_t len, int fd);
ssize_t crux_sock_recv(int sock, void *buf, size_t len, int *fd, int *nfds);

#endif /* CRUX_COMMON_INT_H */
