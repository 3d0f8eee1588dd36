/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging. Messages go to a sink: NCCL's logger inside the plugin, stderr
 * everywhere else. The threshold comes from CRUX_LOG_LEVEL
 * (error|warn|info|debug, or 0..3; default warn).
 *
 * The log context is the one piece of process-wide state of common/; it is
 * set once at start-up (crux_log_init) and read lock-free afterwards.
 */
#ifndef CRUX_LOG_H
#define CRUX_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/env.h"

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum crux_log_level {
	CRUX_LOG_ERROR = 0,
	CRUX_LOG_WARN = 1,
	CRUX_LOG_INFO = 2,
	CRUX_LOG_DEBUG = 3,
};

/* A sink receives one formatted line without trailing newline. */
typedef void (*crux_log_sink_fn)(void *arg, enum crux_log_level level, const char *file, int line,
				 const char *msg);

/*
 * Read CRUX_LOG_LEVEL. Returns CRUX_ERR_INVAL (and keeps the default) on a bad
 * value; the message naming the variable is logged at error level.
 * 'component' prefixes stderr lines ("cruxd", "crux-plugin", ...).
 */
crux_status_t crux_log_init(const char *component);

/*
 * Parse CRUX_LOG_LEVEL through fn (NULL = getenv) without touching the log
 * context (unset: warn). On a bad value CRUX_ERR_INVAL and a message in err.
 */
crux_status_t crux_log_parse_level(crux_getenv_fn fn, void *arg, enum crux_log_level *out,
				   char *err, size_t errlen);

/*
 * True the first time 'key' (e.g. a hash of a file name and a status) is
 * seen by this process, false afterwards: "log once per thing" across calls.
 * Remembers the last 256 keys (bounded memory; an old key may log again).
 */
bool crux_log_once_key(uint64_t key);
/* Forget every key (tests). */
void crux_log_once_reset(void);

/* Replace the sink (NULL restores stderr). */
void crux_log_set_sink(crux_log_sink_fn sink, void *arg);
void crux_log_set_level(enum crux_log_level level);

/* Prefix stderr lines with UTC time (daemons not under journald, which stamps its own). */
void crux_log_set_timestamps(bool on);
enum crux_log_level crux_log_get_level(void);

void crux_log_msg(enum crux_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void crux_log_vmsg(enum crux_log_level level, const char *file, int line, const char *fmt,
		   va_list ap);

#define crux_log(level, ...)                                                                       \
	do {                                                                                       \
		if ((level) <= crux_log_get_level())                                               \
			crux_log_msg((level), __FILE__, __LINE__, __VA_ARGS__);                    \
	} while (0)
#define crux_err(...)	crux_log(CRUX_LOG_ERROR, __VA_ARGS__)
#define crux_warn(...)	crux_log(CRUX_LOG_WARN, __VA_ARGS__)
#define crux_info(...)	crux_log(CRUX_LOG_INFO, __VA_ARGS__)
#define crux_debug(...) crux_log(CRUX_LOG_DEBUG, __VA_ARGS__)

/*
 * Log at most once per 'flag' (an int or _Atomic int owned by the caller,
 * e.g. a field of a connection or of the component's context). Thread-safe.
 */
#define crux__once_take(flag)                                                                      \
	_Generic((flag),                                                                           \
		_Atomic int *: atomic_exchange_explicit((_Atomic int *)(flag), 1,                  \
							memory_order_relaxed),                     \
		default: __atomic_exchange_n((int *)(flag), 1, __ATOMIC_RELAXED))
#define crux_log_once(flag, level, ...)                                                            \
	do {                                                                                       \
		if (!crux__once_take(flag))                                                        \
			crux_log((level), __VA_ARGS__);                                            \
	} while (0)

#ifdef __cplusplus
}
#endif

#endif /* CRUX_LOG_H */
