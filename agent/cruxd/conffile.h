/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's own configuration file (--config FILE, e.g. /etc/crux/cruxd.conf):
 * CRUX_NAME=value lines in the EnvironmentFile syntax, so one file serves
 * both. cruxd re-reads it on SIGHUP (systemctl reload), which an
 * EnvironmentFile cannot offer. Precedence: options > file > environment.
 */
#ifndef CRUXD_CONFFILE_H
#define CRUXD_CONFFILE_H

#include <stddef.h>

#include "crux/status.h"

#define CRUXD_CONF_MAX	     64
#define CRUXD_CONF_MAX_BYTES (64 * 1024)

struct cruxd_conffile {
	int n;
	char *name[CRUXD_CONF_MAX];
	char *value[CRUXD_CONF_MAX];
};

/*
 * Lines: blank, '#' comment, or [export ]CRUX_NAME=VALUE with VALUE bare or
 * in matching single or double quotes. Only CRUX_ names; a later line wins.
 * CRUX_ERR_INVAL with "line N: ..." in err. *out is empty on error.
 */
crux_status_t cruxd_conffile_parse(const char *text, size_t len, struct cruxd_conffile *out,
				   char *err, size_t errlen);
/* Read and parse; CRUX_ERR_NOENT when the file does not exist. */
crux_status_t cruxd_conffile_load(const char *path, struct cruxd_conffile *out, char *err,
				  size_t errlen);
const char *cruxd_conffile_get(const struct cruxd_conffile *c, const char *name);
void cruxd_conffile_free(struct cruxd_conffile *c);

#endif
