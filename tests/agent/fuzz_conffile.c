/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz cruxd's configuration file parser: no crash, no leak, and every
 * accepted setting has a CRUX_ name and a value without control characters.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conffile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cruxd_conffile c;
	char err[256];

	if (cruxd_conffile_parse((const char *)data, size, &c, err, sizeof(err)) != CRUX_OK)
		return 0;
	for (int i = 0; i < c.n; i++) {
		if (strncmp(c.name[i], "CRUX_", 5) || strchr(c.value[i], '\n'))
			abort();
		if (cruxd_conffile_get(&c, c.name[i]) == NULL)
			abort();
	}
	cruxd_conffile_free(&c);
	return 0;
}
