/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error messages into caller buffers: every crux_ function that can fail
 * takes (char *err, size_t errlen) and fills it through these.
 */
#ifndef CRUX_ERRMSG_H
#define CRUX_ERRMSG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A value shown in a message: at most this many bytes, non-printables as '?'. */
#define CRUX_ENV_SHOWN_LEN 80
void crux_env_quote(const char *value, char *buf, size_t len);

/* snprintf into err when err is non-NULL. */
void crux_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif

#endif /* CRUX_ERRMSG_H */
