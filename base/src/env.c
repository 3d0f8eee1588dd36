/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crux/env.h"
#include "crux/errmsg.h"

void crux_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void crux_env_quote(const char *value, char *buf, size_t len)
{
	size_t i = 0;
	if (len == 0)
		return;
	for (; value[i] && i + 1 < len; i++) {
		unsigned char ch = (unsigned char)value[i];
		buf[i] = (ch >= 0x20 && ch < 0x7f && ch != '\'') ? (char)ch : '?';
	}
	buf[i] = '\0';
	/* Mark a cut value so the reader does not take it for the whole. */
	if (value[i] && len >= 4) {
		buf[len - 4] = '.';
		buf[len - 3] = '.';
		buf[len - 2] = '.';
	}
}

const char *crux_env_get(crux_getenv_fn fn, void *arg, const char *name)
{
	const char *v = fn ? fn(arg, name) : getenv(name);
	if (!v || !v[0])
		return NULL;
	return v;
}

crux_status_t crux_parse_int(const char *name, const char *value, long long min, long long max,
			     long long *out, char *err, size_t errlen)
{
	char shown[CRUX_ENV_SHOWN_LEN];
	const char *p = value ? value : "";
	/* strtoll would skip leading blanks: a strict parser does not. */
	bool ok = (p[0] >= '0' && p[0] <= '9') ||
		  ((p[0] == '-' || p[0] == '+') && p[1] >= '0' && p[1] <= '9');
	long long v = 0;
	if (ok) {
		char *end;
		errno = 0;
		v = strtoll(p, &end, 10);
		if (errno == ERANGE || *end != '\0')
			ok = false;
	}
	if (!ok || v < min || v > max) {
		crux_env_quote(p, shown, sizeof(shown));
		crux_set_err(err, errlen,
			     "%s='%s' is not valid: expected an integer in [%lld, %lld]", name,
			     shown, min, max);
		return CRUX_ERR_INVAL;
	}
	*out = v;
	return CRUX_OK;
}

crux_status_t crux_parse_u64(const char *name, const char *value, uint64_t min, uint64_t max,
			     uint64_t *out, char *err, size_t errlen)
{
	char shown[CRUX_ENV_SHOWN_LEN];
	const char *p = value ? value : "";
	bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
	const char *digits = hex ? p + 2 : p;
	bool ok = hex ? isxdigit((unsigned char)digits[0]) != 0
		      : (digits[0] >= '1' && digits[0] <= '9') || (digits[0] == '0' && !digits[1]);
	unsigned long long v = 0;
	if (ok) {
		char *end;
		errno = 0;
		v = strtoull(digits, &end, hex ? 16 : 10);
		if (errno == ERANGE || *end != '\0')
			ok = false;
	}
	if (!ok || v < min || v > max) {
		crux_env_quote(p, shown, sizeof(shown));
		crux_set_err(err, errlen,
			     "%s='%s' is not valid: expected an unsigned integer in [%llu, %llu] "
			     "(decimal, or hexadecimal after 0x)",
			     name, shown, (unsigned long long)min, (unsigned long long)max);
		return CRUX_ERR_INVAL;
	}
	*out = v;
	return CRUX_OK;
}

/* Decimal number: digits with an optional fraction, no sign, exponent, hex, inf or nan. */
static size_t scan_decimal(const char *p)
{
	size_t i = 0, digits = 0;
	while (p[i] >= '0' && p[i] <= '9') {
		i++;
		digits++;
	}
	if (p[i] == '.') {
		i++;
		while (p[i] >= '0' && p[i] <= '9') {
			i++;
			digits++;
		}
	}
	return digits ? i : 0;
}

crux_status_t crux_parse_double(const char *name, const char *value, double min, double max,
				double *out, char *err, size_t errlen)
{
	char shown[CRUX_ENV_SHOWN_LEN];
	const char *p = value ? value : "";
	const char *num = (p[0] == '-' || p[0] == '+') ? p + 1 : p;
	size_t n = scan_decimal(num);
	bool ok = n > 0;
	double v = 0;
	if (ok) {
		/* An exponent is allowed after a decimal mantissa: 1e-3. */
		size_t i = n;
		if (num[i] == 'e' || num[i] == 'E') {
			size_t j = i + 1;
			if (num[j] == '+' || num[j] == '-')
				j++;
			if (num[j] >= '0' && num[j] <= '9') {
				while (num[j] >= '0' && num[j] <= '9')
					j++;
				i = j;
			}
		}
		if (num[i] != '\0') {
			ok = false;
		} else {
			char *end;
			errno = 0;
			v = strtod(p, &end);
			if (*end != '\0' || !isfinite(v) || errno == ERANGE)
				ok = false;
		}
	}
	if (!ok || v < min || v > max) {
		crux_env_quote(p, shown, sizeof(shown));
		crux_set_err(err, errlen, "%s='%s' is not valid: expected a number in [%g, %g]",
			     name, shown, min, max);
		return CRUX_ERR_INVAL;
	}
	*out = v;
	return CRUX_OK;
}

crux_status_t crux_env_int(crux_getenv_fn fn, void *arg, const char *name, long long def,
			   long long min, long long max, long long *out, char *err, size_t errlen)
{
	const char *v = crux_env_get(fn, arg, name);
	if (!v) {
		*out = def;
		return CRUX_OK;
	}
	return crux_parse_int(name, v, min, max, out, err, errlen);
}

crux_status_t crux_env_double(crux_getenv_fn fn, void *arg, const char *name, double def,
			      double min, double max, double *out, char *err, size_t errlen)
{
	const char *v = crux_env_get(fn, arg, name);
	if (!v) {
		*out = def;
		return CRUX_OK;
	}
	return crux_parse_double(name, v, min, max, out, err, errlen);
}

crux_status_t crux_parse_bool(const char *name, const char *value, bool *out, char *err,
			      size_t errlen)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};
	const char *p = value ? value : "";
	for (unsigned i = 0; i < 4; i++) {
		if (strcasecmp(p, yes[i]) == 0) {
			*out = true;
			return CRUX_OK;
		}
		if (strcasecmp(p, no[i]) == 0) {
			*out = false;
			return CRUX_OK;
		}
	}
	char shown[CRUX_ENV_SHOWN_LEN];
	crux_env_quote(p, shown, sizeof(shown));
	crux_set_err(err, errlen,
		     "%s='%s' is not valid: expected 1/0, true/false, yes/no or on/off", name,
		     shown);
	return CRUX_ERR_INVAL;
}

crux_status_t crux_env_bool(crux_getenv_fn fn, void *arg, const char *name, bool def, bool *out,
			    char *err, size_t errlen)
{
	const char *v = crux_env_get(fn, arg, name);
	if (!v) {
		*out = def;
		return CRUX_OK;
	}
	return crux_parse_bool(name, v, out, err, errlen);
}

crux_status_t crux_env_enum(crux_getenv_fn fn, void *arg, const char *name,
			    const char *const *choices, int def, int *out, char *err, size_t errlen)
{
	const char *v = crux_env_get(fn, arg, name);
	if (!v) {
		*out = def;
		return CRUX_OK;
	}
	for (int i = 0; choices[i]; i++) {
		if (strcasecmp(v, choices[i]) == 0) {
			*out = i;
			return CRUX_OK;
		}
	}
	if (err && errlen) {
		char shown[CRUX_ENV_SHOWN_LEN];
		crux_env_quote(v, shown, sizeof(shown));
		int n =
		    snprintf(err, errlen, "%s='%s' is not valid: expected one of ", name, shown);
		for (int i = 0; choices[i] && n >= 0 && (size_t)n < errlen; i++)
			n += snprintf(err + n, errlen - (size_t)n, "%s%s", i ? ", " : "",
				      choices[i]);
	}
	return CRUX_ERR_INVAL;
}

static const struct {
	const char *suffix;
	uint64_t ns;
} duration_units[] = {
    {"ns", 1ull},	   {"us", 1000ull},	    {"ms", 1000000ull},	      {"s", 1000000000ull},
    {"m", 60000000000ull}, {"h", 3600000000000ull}, {"d", 86400000000000ull},
};

/* A bound in the largest unit that writes it exactly ("100ms", "2h"). */
static void show_duration(uint64_t ns, char *buf, size_t len)
{
	unsigned i = sizeof(duration_units) / sizeof(duration_units[0]);
	while (--i > 0 && (ns == 0 || ns % duration_units[i].ns))
		;
	snprintf(buf, len, "%llu%s", (unsigned long long)(ns / duration_units[i].ns),
		 duration_units[i].suffix);
}

crux_status_t crux_parse_duration_ns(const char *name, const char *value, uint64_t min_ns,
				     uint64_t max_ns, uint64_t default_unit_ns, uint64_t *out,
				     char *err, size_t errlen)
{
	const char *p = value ? value : "";
	size_t n = scan_decimal(p);
	bool ok = n > 0;
	uint64_t unit = default_unit_ns ? default_unit_ns : 1;
	uint64_t result = 0;
	if (ok && p[n] != '\0') {
		ok = false;
		for (unsigned i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
			if (strcmp(p + n, duration_units[i].suffix) == 0) {
				unit = duration_units[i].ns;
				ok = true;
				break;
			}
		}
	}
	if (ok) {
		/* Whole part exactly in integers; the fraction through a double. */
		uint64_t whole = 0;
		size_t i = 0;
		for (; p[i] >= '0' && p[i] <= '9'; i++) {
			uint64_t d = (uint64_t)(p[i] - '0');
			if (whole > (UINT64_MAX - d) / 10) {
				ok = false;
				break;
			}
			whole = whole * 10 + d;
		}
		if (ok && whole > UINT64_MAX / unit)
			ok = false;
		if (ok) {
			result = whole * unit;
			if (p[i] == '.') {
				double frac = strtod(p + i, NULL); /* ".25" */
				double add = frac * (double)unit;
				if (add >= (double)(UINT64_MAX - result))
					ok = false;
				else
					result += (uint64_t)(add + 0.5);
			}
		}
	}
	if (!ok || result < min_ns || result > max_ns) {
		char shown[CRUX_ENV_SHOWN_LEN], lo[32], hi[32];
		crux_env_quote(p, shown, sizeof(shown));
		show_duration(min_ns, lo, sizeof(lo));
		show_duration(max_ns, hi, sizeof(hi));
		crux_set_err(err, errlen,
			     "%s='%s' is not valid: expected a duration from %s to %s written as a "
			     "number with an optional unit ns, us, ms, s, m, h or d",
			     name, shown, lo, hi);
		return CRUX_ERR_INVAL;
	}
	*out = result;
	return CRUX_OK;
}

crux_status_t crux_env_duration_ns(crux_getenv_fn fn, void *arg, const char *name, uint64_t def_ns,
				   uint64_t min_ns, uint64_t max_ns, uint64_t default_unit_ns,
				   uint64_t *out, char *err, size_t errlen)
{
	const char *v = crux_env_get(fn, arg, name);
	if (!v) {
		*out = def_ns;
		return CRUX_OK;
	}
	return crux_parse_duration_ns(name, v, min_ns, max_ns, default_unit_ns, out, err, errlen);
}
