/* SPDX-License-Identifier: Apache-2.0 */
/* Profile records: their names and size (layout: profile_layout.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "crux/profile.h"
#include "profile_layout.h"

size_t crux_prof_file_size(void)
{
	return sizeof(struct prof_file);
}

int crux_prof_name(pid_t pid, uint64_t start_time, char *buf, size_t len)
{
	return snprintf(buf, len, CRUX_PROF_PREFIX "%d-%" PRIu64 CRUX_PROF_SUFFIX, (int)pid,
			start_time);
}

/* Strict inverse of crux_prof_name: digits only, no leading zeros or signs. */
bool crux_prof_parse_name(const char *name, pid_t *pid, uint64_t *start_time)
{
	const size_t plen = sizeof(CRUX_PROF_PREFIX) - 1, slen = sizeof(CRUX_PROF_SUFFIX) - 1;
	size_t n = strlen(name);
	if (n <= plen + slen || strncmp(name, CRUX_PROF_PREFIX, plen) != 0 ||
	    strcmp(name + n - slen, CRUX_PROF_SUFFIX) != 0)
		return false;
	const char *p = name + plen, *end = name + n - slen;
	uint64_t v[2] = {0, 0};
	for (int k = 0; k < 2; k++) {
		const char *q = p;
		while (q < end && *q >= '0' && *q <= '9') {
			uint64_t d = (uint64_t)(*q - '0');
			if (v[k] > (UINT64_MAX - d) / 10)
				return false;
			v[k] = v[k] * 10 + d;
			q++;
		}
		if (q == p || (q - p > 1 && *p == '0'))
			return false;
		if (k == 0) {
			if (q >= end || *q != '-')
				return false;
			p = q + 1;
		} else if (q != end) {
			return false;
		}
	}
	if (v[0] == 0 || v[0] > INT32_MAX)
		return false;
	*pid = (pid_t)v[0];
	*start_time = v[1];
	return true;
}
