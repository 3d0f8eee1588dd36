/* SPDX-License-Identifier: Apache-2.0 */
/* Decision table: settings and bank validation, the consistent bank read (layout:
 * decision_layout.h). */
#include <stdlib.h>
#include <string.h>

#include "common_int.h"
#include "crux/decision.h"
#include "crux/log.h"
#include "crux/shm.h"
#include "decision_layout.h"

size_t crux_dt_file_size(void)
{
	return sizeof(struct dt_file);
}

/* ---- settings ---- */

void crux_dt_settings_default(uint32_t nlevels, struct crux_dt_settings *out)
{
	if (nlevels < 1)
		nlevels = 1;
	if (nlevels > CRUX_MAX_LEVELS)
		nlevels = CRUX_MAX_LEVELS;
	memset(out, 0, sizeof(*out));
	out->nlevels = nlevels;
	out->default_level = 0;
	for (uint32_t l = 0; l < CRUX_MAX_LEVELS; l++) {
		out->levels[l].dscp = (uint8_t)(8 * l);
		out->levels[l].ib_sl = (uint8_t)l;
		out->levels[l].sock_prio = (int32_t)l;
	}
	out->heartbeat_timeout_ns = CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS;
}

crux_status_t crux_dt_settings_validate(const struct crux_dt_settings *s, char *err, size_t errlen)
{
	if (s->nlevels < 1 || s->nlevels > CRUX_MAX_LEVELS) {
		crux_set_err(err, errlen, "number of levels %u is not in [1, %d]",
			     (unsigned)s->nlevels, CRUX_MAX_LEVELS);
		return CRUX_ERR_INVAL;
	}
	if (s->default_level >= s->nlevels) {
		crux_set_err(err, errlen, "default level %u is not in [0, %u]",
			     (unsigned)s->default_level, (unsigned)s->nlevels - 1);
		return CRUX_ERR_INVAL;
	}
	if (s->heartbeat_timeout_ns == 0) {
		crux_set_err(err, errlen, "heartbeat timeout must be positive");
		return CRUX_ERR_INVAL;
	}
	for (uint32_t l = 0; l < s->nlevels; l++) {
		const struct crux_level_map *m = &s->levels[l];
		if (m->dscp > 63) {
			crux_set_err(err, errlen, "level %u: DSCP %u is not in [0, 63]",
				     (unsigned)l, (unsigned)m->dscp);
			return CRUX_ERR_INVAL;
		}
		if (m->ib_sl > 15) {
			crux_set_err(err, errlen, "level %u: InfiniBand SL %u is not in [0, 15]",
				     (unsigned)l, (unsigned)m->ib_sl);
			return CRUX_ERR_INVAL;
		}
		if (m->sock_prio < 0) {
			crux_set_err(err, errlen, "level %u: socket priority %d is negative",
				     (unsigned)l, (int)m->sock_prio);
			return CRUX_ERR_INVAL;
		}
		for (uint32_t o = 0; o < l; o++) {
			if (s->levels[o].dscp == m->dscp) {
				crux_set_err(err, errlen,
					     "levels %u and %u share DSCP %u: switches could not "
					     "tell them apart",
					     (unsigned)o, (unsigned)l, (unsigned)m->dscp);
				return CRUX_ERR_INVAL;
			}
		}
	}
	return CRUX_OK;
}

/* ---- validation of a consistent bank copy ---- */

static bool mask_ok(uint32_t mask, uint32_t max_buckets)
{
	uint32_t n = mask + 1;
	return n >= 1 && n <= max_buckets && (n & (n - 1)) == 0;
}

void crux_dt_bank_settings(const struct dt_bank *b, struct crux_dt_settings *s)
{
	memset(s, 0, sizeof(*s));
	s->nlevels = b->nlevels;
	s->default_level = b->default_level;
	s->heartbeat_timeout_ns = b->heartbeat_timeout_ns;
	memcpy(s->levels, b->levels, sizeof(s->levels));
}

crux_status_t crux_dt_bank_validate(const struct dt_bank *b, char *err, size_t errlen)
{
	struct crux_dt_settings s;
	char why[160];
	crux_dt_bank_settings(b, &s);
	if (crux_dt_settings_validate(&s, why, sizeof(why)) != CRUX_OK) {
		crux_set_err(err, errlen, "bad settings: %s", why);
		return CRUX_ERR_CORRUPT;
	}
	if (b->njobs > CRUX_DT_MAX_JOBS || b->nroutes > CRUX_DT_MAX_ROUTES) {
		crux_set_err(err, errlen, "%u jobs / %u routes exceed the limits %d / %d",
			     (unsigned)b->njobs, (unsigned)b->nroutes, CRUX_DT_MAX_JOBS,
			     CRUX_DT_MAX_ROUTES);
		return CRUX_ERR_CORRUPT;
	}
	if (!mask_ok(b->job_mask, DT_JOB_BUCKETS) || !mask_ok(b->route_mask, DT_ROUTE_BUCKETS) ||
	    b->njobs > b->job_mask || b->nroutes > b->route_mask) {
		crux_set_err(err, errlen, "bad index size (%u job / %u route buckets)",
			     (unsigned)b->job_mask + 1, (unsigned)b->route_mask + 1);
		return CRUX_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i <= b->job_mask; i++) {
		if (b->job_index[i] > b->njobs) {
			crux_set_err(err, errlen, "job index slot %u points past the %u jobs",
				     (unsigned)i, (unsigned)b->njobs);
			return CRUX_ERR_CORRUPT;
		}
	}
	for (uint32_t i = 0; i <= b->route_mask; i++) {
		if (b->route_index[i] > b->nroutes) {
			crux_set_err(err, errlen, "route index slot %u points past the %u routes",
				     (unsigned)i, (unsigned)b->nroutes);
			return CRUX_ERR_CORRUPT;
		}
	}
	for (uint32_t i = 0; i < b->njobs; i++) {
		const struct dt_job_slot *j = &b->jobs[i];
		if (j->key == 0 || j->level >= b->nlevels || j->state > CRUX_JOB_OVERRIDDEN ||
		    !memchr(j->id, '\0', sizeof(j->id))) {
			crux_set_err(err, errlen,
				     "job entry %u is invalid (key, level %u, state "
				     "%u or unterminated id)",
				     (unsigned)i, (unsigned)j->level, (unsigned)j->state);
			return CRUX_ERR_CORRUPT;
		}
	}
	for (uint32_t i = 0; i < b->nroutes; i++) {
		const struct dt_route_slot *r = &b->routes[i];
		if (r->key == 0 || r->nports > CRUX_ROUTE_MAX_PORTS ||
		    (r->peer.family != 4 && r->peer.family != 6)) {
			crux_set_err(err, errlen,
				     "route entry %u is invalid (key, %u ports or "
				     "address family %u)",
				     (unsigned)i, (unsigned)r->nports, (unsigned)r->peer.family);
			return CRUX_ERR_CORRUPT;
		}
	}
	return CRUX_OK;
}

/* Counts are clamped before they size a copy; the caller validates the copy once consistent. */
static void snapshot_read(const void *region, uint64_t seq, void *arg)
{
	const struct dt_bank *b = region;
	struct dt_bank *dst = arg;
	(void)seq;
	memcpy(dst, b, offsetof(struct dt_bank, job_index));
	uint32_t jm = dst->job_mask < DT_JOB_BUCKETS ? dst->job_mask : DT_JOB_BUCKETS - 1;
	uint32_t rm = dst->route_mask < DT_ROUTE_BUCKETS ? dst->route_mask : DT_ROUTE_BUCKETS - 1;
	uint32_t nj = dst->njobs < CRUX_DT_MAX_JOBS ? dst->njobs : CRUX_DT_MAX_JOBS;
	uint32_t nr = dst->nroutes < CRUX_DT_MAX_ROUTES ? dst->nroutes : CRUX_DT_MAX_ROUTES;
	memcpy(dst->job_index, b->job_index, (jm + 1) * sizeof(uint16_t));
	memcpy(dst->route_index, b->route_index, (rm + 1) * sizeof(uint16_t));
	memcpy(dst->jobs, b->jobs, nj * sizeof(b->jobs[0]));
	memcpy(dst->routes, b->routes, nr * sizeof(b->routes[0]));
}

crux_status_t crux_dt_bank_snapshot(const struct dt_file *f, struct dt_bank *dst, unsigned retries)
{
	return crux_dt_bank_read(f, snapshot_read, dst, retries);
}

void crux_dt_bank_entries(const struct dt_bank *b, uint32_t nj, uint32_t nr,
			  struct crux_dt_contents *out)
{
	for (uint32_t i = 0; i < nj; i++) {
		struct crux_dt_job *j = &out->jobs[i];
		memset(j, 0, sizeof(*j));
		j->job_key = b->jobs[i].key;
		memcpy(j->job_id, b->jobs[i].id, sizeof(j->job_id));
		j->level = b->jobs[i].level;
		j->state = b->jobs[i].state;
	}
	for (uint32_t i = 0; i < nr; i++) {
		struct crux_dt_route *rt = &out->routes[i];
		memset(rt, 0, sizeof(*rt));
		rt->job_key = b->routes[i].key;
		rt->peer = b->routes[i].peer;
		rt->path_id = b->routes[i].path_id;
		rt->nports = b->routes[i].nports;
		memcpy(rt->ports, b->routes[i].ports, sizeof(rt->ports));
	}
}

crux_status_t crux_dt_validate_mapped(const void *base, size_t size, char *err, size_t errlen)
{
	crux_status_t st;
	char why[256];
	st = crux_shm_validate_ex(base, size, CRUX_DT_MAGIC, CRUX_DT_VERSION,
				  sizeof(struct dt_file), why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "decision table: %s", why);
		return st;
	}
	struct dt_bank *copy = malloc(sizeof(*copy));
	if (!copy)
		return CRUX_ERR_NOMEM;
	st = crux_dt_bank_snapshot(base, copy, DT_READ_ALL_RETRIES);
	if (st == CRUX_OK) {
		st = crux_dt_bank_validate(copy, why, sizeof(why));
		if (st != CRUX_OK)
			crux_set_err(err, errlen, "decision table: %s", why);
	} else {
		crux_set_err(err, errlen, "decision table: writer kept it busy");
	}
	free(copy);
	return st;
}
