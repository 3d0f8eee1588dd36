/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one JSON string escaper of Crux. Header-only so that libraries which
 * link nothing of libcrux-common (the scheduler) share it too.
 */
#ifndef CRUX_JSON_H
#define CRUX_JSON_H

#include <stdio.h>

/*
 * Writes s as a quoted JSON string. Quote and backslash are escaped; every
 * byte outside printable ASCII becomes \u00XX, so the output is valid JSON
 * (and one line) whatever the input bytes are. NULL is written as "".
 */
static inline void crux_json_put_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

#endif
