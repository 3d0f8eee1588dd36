/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the files of common/ and not part of its API. */
#ifndef CRUX_COMMON_INTERNAL_H
#define CRUX_COMMON_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* A value shown in a message: at most this many bytes, non-printables as '?'. */
#define CRUX_ENV_SHOWN_LEN 80
void crux_env_quote(const char *value, char *buf, size_t len);

/* snprintf into err when err is non-NULL. */
void crux_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

/* 64-bit mixer (splitmix64 finaliser): the hash of the decision table index. */
static inline uint64_t crux_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

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

#endif /* CRUX_COMMON_INTERNAL_H */
