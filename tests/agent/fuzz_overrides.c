/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the overrides file parser and the --route syntax: no crash, and a
 * parsed file formats to text that parses to the same overrides.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/overrides.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cruxd_overrides *o = malloc(sizeof(*o)), *p = malloc(sizeof(*p));
	struct cruxd_override_route r;
	char err[256], *route, *buf = NULL;
	size_t len;

	if (!o || !p)
		goto out;
	if (cruxd_overrides_parse((const char *)data, size, o, err, sizeof(err)) == CRUX_OK) {
		size_t cap = 4096 + (size_t)o->n * 1024;
		buf = malloc(cap);
		if (!buf || cruxd_overrides_format(o, buf, cap, &len) != CRUX_OK)
			abort();
		if (cruxd_overrides_parse(buf, len, p, err, sizeof(err)) != CRUX_OK ||
		    p->n != o->n || p->seq != o->seq ||
		    memcmp(p->o, o->o, o->n * sizeof(o->o[0])) != 0)
			abort();
	}
	route = malloc(size + 1);
	if (route) {
		memcpy(route, data, size);
		route[size] = '\0';
		if (cruxd_route_parse(route, &r, err, sizeof(err)) == CRUX_OK &&
		    (r.nports > CRUX_ROUTE_MAX_PORTS || r.path_id == CRUX_PATH_NONE))
			abort();
		free(route);
	}
out:
	free(buf);
	free(o);
	free(p);
	return 0;
}
