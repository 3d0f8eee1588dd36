/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Status codes shared by every Crux component.
 *
 * Every function that can fail returns a crux_status_t and sets its
 * out-parameters only when it returns CRUX_OK.
 */
#ifndef CRUX_STATUS_H
#define CRUX_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum crux_status {
	CRUX_OK = 0,
	CRUX_ERR_INVAL,	      /* bad argument or bad value (env, file, CLI) */
	CRUX_ERR_NOMEM,	      /* allocation failed */
	CRUX_ERR_IO,	      /* a system call failed (errno kept in the log) */
	CRUX_ERR_NOENT,	      /* no such file, entry or job */
	CRUX_ERR_BUSY,	      /* seqlock retries exhausted, or lock held by another process */
	CRUX_ERR_CORRUPT,     /* a shared-memory record failed validation (magic, size, bounds) */
	CRUX_ERR_VERSION,     /* a record of another layout version */
	CRUX_ERR_PERM,	      /* unsafe permissions, owner, symlink or file type */
	CRUX_ERR_STALE,	      /* heartbeat older than its timeout */
	CRUX_ERR_EXIST,	      /* already exists */
	CRUX_ERR_RANGE,	      /* a value outside its accepted range, or a table full */
	CRUX_ERR_UNSUPPORTED, /* not available on this machine (CUDA, verbs, ...) */
	CRUX_ERR_REMOTE,      /* the peer failed or closed the connection */
	CRUX_ERR_TIMEOUT,     /* a bounded wait ran out */
} crux_status_t;

/* A short constant string naming the status ("invalid argument", ...). */
const char *crux_status_str(crux_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_STATUS_H */
