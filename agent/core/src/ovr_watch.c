/* SPDX-License-Identifier: Apache-2.0 */
/* The overrides file as the agent watches it (ovr_watch.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crux/log.h"
#include "ovr_watch.h"

struct cruxd_ovr_watch {
	char path[CRUX_PATH_MAX + 32];
	const char *dir;
	struct cruxd_overrides ovr;
	bool present; /* st: the file last taken (or refused) */
	struct stat st;
	char error[256];
};

static void refused(struct cruxd_ovr_watch *w, const char *what, const char *err)
{
	crux_err("overrides file refused%s: %s; fix: correct it, or run 'cruxctl clear' to "
		 "replace it (drops every override)",
		 what, err);
	snprintf(w->error, sizeof(w->error), "%s", err);
}

crux_status_t cruxd_ovr_watch_open(const char *shm_dir, struct cruxd_ovr_watch **out)
{
	struct cruxd_ovr_watch *w = calloc(1, sizeof(*w));
	char err[256];
	crux_status_t st;

	*out = w;
	if (!w)
		return CRUX_ERR_NOMEM;
	w->dir = shm_dir;
	snprintf(w->path, sizeof(w->path), "%s/%s", shm_dir, CRUXD_OVERRIDES_FILE);
	st = cruxd_overrides_load(shm_dir, &w->ovr, err, sizeof(err));
	if (st == CRUX_OK) {
		w->present = lstat(w->path, &w->st) == 0;
	} else if (st != CRUX_ERR_NOENT) {
		refused(w, "", err);
		memset(&w->ovr, 0, sizeof(w->ovr));
	}
	return CRUX_OK;
}

void cruxd_ovr_watch_close(struct cruxd_ovr_watch *w)
{
	free(w);
}

static bool check(struct cruxd_ovr_watch *w, uint32_t nlevels)
{
	struct cruxd_overrides *n;
	struct stat sb;
	char err[256];

	if (lstat(w->path, &sb) != 0) {
		bool cleared = w->present && w->ovr.n;
		if (cleared)
			crux_info("overrides file removed: %u override(s) cleared", w->ovr.n);
		if (w->present)
			memset(&w->ovr, 0, sizeof(w->ovr));
		w->present = false;
		w->error[0] = '\0';
		return cleared;
	}
	if (w->present && sb.st_ino == w->st.st_ino && sb.st_size == w->st.st_size &&
	    sb.st_mtim.tv_sec == w->st.st_mtim.tv_sec &&
	    sb.st_mtim.tv_nsec == w->st.st_mtim.tv_nsec)
		return false;
	w->present = true;
	w->st = sb;
	n = malloc(sizeof(*n));
	if (!n)
		return false;
	if (cruxd_overrides_load(w->dir, n, err, sizeof(err)) != CRUX_OK) {
		refused(w, ", keeping the previous overrides", err);
		free(n);
		return false;
	}
	for (uint32_t i = 0; i < n->n; i++)
		if (n->o[i].level >= nlevels)
			crux_warn(
			    "override for job 0x%016llx: level %u >= CRUX_LEVELS=%u, using %u",
			    (unsigned long long)n->o[i].job_key, n->o[i].level, nlevels,
			    nlevels - 1);
	if (n->seq != w->ovr.seq || n->n != w->ovr.n ||
	    memcmp(n->o, w->ovr.o, n->n * sizeof(n->o[0])))
		crux_info("overrides applied (seq %llu): %u job(s)", (unsigned long long)n->seq,
			  n->n);
	memcpy(&w->ovr, n, sizeof(*n));
	w->error[0] = '\0';
	free(n);
	return true;
}

const struct cruxd_overrides *cruxd_ovr_watch_check(struct cruxd_ovr_watch *w, uint32_t nlevels,
						    bool *changed)
{
	*changed = check(w, nlevels);
	return &w->ovr;
}

const struct cruxd_overrides *cruxd_ovr_watch_get(const struct cruxd_ovr_watch *w)
{
	return &w->ovr;
}

bool cruxd_ovr_watch_has(const struct cruxd_ovr_watch *w, uint64_t job_key)
{
	return cruxd_overrides_find(&w->ovr, job_key) >= 0;
}

crux_status_t cruxd_ovr_watch_keep(struct cruxd_ovr_watch *w, const struct cruxd_override *o)
{
	return cruxd_overrides_put(&w->ovr, o);
}

void cruxd_ovr_watch_store(struct cruxd_ovr_watch *w)
{
	w->ovr.seq++;
	if (cruxd_overrides_store(w->dir, &w->ovr) == CRUX_OK && lstat(w->path, &w->st) == 0)
		w->present = true;
}

void cruxd_ovr_watch_report(const struct cruxd_ovr_watch *w, struct cruxd_status_body *b)
{
	b->overrides_seq = w->ovr.seq;
	snprintf(b->overrides_error, sizeof(b->overrides_error), "%s", w->error);
}
