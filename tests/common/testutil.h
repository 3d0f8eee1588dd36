/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the common/ tests: private directories and environment fixtures. */
#ifndef CRUX_TESTUTIL_H
#define CRUX_TESTUTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A name=value fixture list ending with {NULL, NULL}, read through crux_getenv_fn. */
struct tu_env {
	const char *name;
	const char *value;
};

static inline const char *tu_getenv(void *arg, const char *name)
{
	for (const struct tu_env *e = arg; e && e->name; e++)
		if (strcmp(e->name, name) == 0)
			return e->value;
	return NULL;
}

/* A private base directory (mode 0700) and inside it the shm directory "shm". */
struct tu_dirs {
	char base[128];
	char shm[160];
};

static inline void tu_dirs_make(struct tu_dirs *d)
{
	snprintf(d->base, sizeof(d->base), "/tmp/crux-test-XXXXXX");
	if (!mkdtemp(d->base)) {
		perror("mkdtemp");
		abort();
	}
	snprintf(d->shm, sizeof(d->shm), "%s/shm", d->base);
	if (mkdir(d->shm, 0755) != 0 || chmod(d->shm, 0755) != 0) {
		perror("mkdir");
		abort();
	}
	/* Anything in common/ that reads CRUX_SHM_DIR itself sees the private one. */
	setenv("CRUX_SHM_DIR", d->shm, 1);
}

static inline int tu_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static inline void tu_dirs_remove(struct tu_dirs *d)
{
	chmod(d->shm, 0755);
	nftw(d->base, tu_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void tu_write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	FILE *f = fopen(path, "wb");
	if (!f || (len && fwrite(data, 1, len, f) != len)) {
		perror(path);
		abort();
	}
	fclose(f);
	chmod(path, mode);
}

/* Log capture: a sink that keeps the last message and counts lines. */
struct tu_log {
	int lines;
	int level;
	char last[1024];
};

#include "crux/log.h"

static inline void tu_log_sink(void *arg, enum crux_log_level level, const char *file, int line,
			       const char *msg)
{
	struct tu_log *l = arg;
	(void)file;
	(void)line;
	l->lines++;
	l->level = (int)level;
	snprintf(l->last, sizeof(l->last), "%s", msg);
}

#endif /* CRUX_TESTUTIL_H */
