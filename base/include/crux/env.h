/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict parsing of CRUX_ environment variables.
 *
 * An unset (or empty) variable yields the default. A set variable must parse
 * completely and lie in range; otherwise the call returns CRUX_ERR_INVAL and,
 * when 'err' is given, writes a message that names the variable, the value
 * and what is accepted, e.g.
 *   CRUX_LEVELS='nine' is not valid: expected an integer in [1, 8]
 * Out-parameters are set only on CRUX_OK.
 *
 * Variables are read through a crux_getenv_fn so tests can pass fixtures;
 * NULL means the process environment (getenv).
 */
#ifndef CRUX_ENV_H
#define CRUX_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef const char *(*crux_getenv_fn)(void *arg, const char *name);

/* Look up 'name' through fn (NULL = getenv). Returns NULL when unset or empty. */
const char *crux_env_get(crux_getenv_fn fn, void *arg, const char *name);

crux_status_t crux_env_int(crux_getenv_fn fn, void *arg, const char *name, long long def,
			   long long min, long long max, long long *out, char *err, size_t errlen);

crux_status_t crux_env_double(crux_getenv_fn fn, void *arg, const char *name, double def,
			      double min, double max, double *out, char *err, size_t errlen);

/* Accepts 1/0, true/false, yes/no, on/off (case-insensitive). */
crux_status_t crux_env_bool(crux_getenv_fn fn, void *arg, const char *name, bool def, bool *out,
			    char *err, size_t errlen);

/*
 * One of a NULL-terminated list of names (case-insensitive); *out is the
 * index. 'def' is the index used when unset.
 */
crux_status_t crux_env_enum(crux_getenv_fn fn, void *arg, const char *name,
			    const char *const *choices, int def, int *out, char *err,
			    size_t errlen);

/*
 * A duration: a number with an optional unit suffix ns, us, ms, s, m
 * (no suffix = 'default_unit_ns' nanoseconds per unit). Result in ns.
 */
crux_status_t crux_env_duration_ns(crux_getenv_fn fn, void *arg, const char *name, uint64_t def_ns,
				   uint64_t min_ns, uint64_t max_ns, uint64_t default_unit_ns,
				   uint64_t *out, char *err, size_t errlen);

/* Parse helpers on a plain string (no environment); same error wording with 'name'. */
crux_status_t crux_parse_int(const char *name, const char *value, long long min, long long max,
			     long long *out, char *err, size_t errlen);
/*
 * Unsigned 64-bit: decimal, or hexadecimal after 0x/0X; no sign, no blanks,
 * and no leading zero before more digits (which strtoull would read as octal).
 */
crux_status_t crux_parse_u64(const char *name, const char *value, uint64_t min, uint64_t max,
			     uint64_t *out, char *err, size_t errlen);
crux_status_t crux_parse_double(const char *name, const char *value, double min, double max,
				double *out, char *err, size_t errlen);
crux_status_t crux_parse_bool(const char *name, const char *value, bool *out, char *err,
			      size_t errlen);
crux_status_t crux_parse_duration_ns(const char *name, const char *value, uint64_t min_ns,
				     uint64_t max_ns, uint64_t default_unit_ns, uint64_t *out,
				     char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_ENV_H */
