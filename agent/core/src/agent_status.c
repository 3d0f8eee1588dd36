/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's status record file. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crux/agent_status.h"
#include "crux/log.h"

struct cruxd_status_writer {
	struct crux_shm_map map;
	char dir[CRUX_PATH_MAX];
};

crux_status_t cruxd_status_writer_open(const char *dir, struct cruxd_status_writer **out)
{
	struct cruxd_status_writer *w = calloc(1, sizeof(*w));
	crux_status_t st;

	if (!w)
		return CRUX_ERR_NOMEM;
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	st = crux_shm_create(dir, CRUXD_STATUS_FILE, CRUXD_STATUS_MAGIC, CRUXD_STATUS_VERSION,
			     sizeof(struct cruxd_status_file), 0644, false, &w->map);
	if (st != CRUX_OK) {
		free(w);
		return st;
	}
	*out = w;
	return CRUX_OK;
}

void cruxd_status_heartbeat(struct cruxd_status_writer *w)
{
	struct cruxd_status_file *f = w->map.base;

	atomic_store_explicit(&f->hdr.heartbeat_ns, crux_now_ns(), memory_order_release);
}

void cruxd_status_publish(struct cruxd_status_writer *w, const struct cruxd_status_body *b)
{
	struct cruxd_status_file *f = w->map.base;
	uint32_t nj = b->njobs < CRUXD_STATUS_MAX_JOBS ? b->njobs : CRUXD_STATUS_MAX_JOBS;
	uint32_t np = b->npeers < CRUXD_STATUS_MAX_PEERS ? b->npeers : CRUXD_STATUS_MAX_PEERS;

	crux_seq_write_begin(&f->seq);
	memcpy(&f->body, b, offsetof(struct cruxd_status_body, jobs));
	f->body.njobs = nj;
	f->body.npeers = np;
	memcpy(f->body.jobs, b->jobs, nj * sizeof(b->jobs[0]));
	memcpy(f->body.peers, b->peers, np * sizeof(b->peers[0]));
	crux_seq_write_end(&f->seq);
	atomic_fetch_add_explicit(&f->hdr.generation, 1, memory_order_release);
	cruxd_status_heartbeat(w);
}

void cruxd_status_writer_close(struct cruxd_status_writer *w, bool remove)
{
	char path[CRUX_PATH_MAX + 32];

	if (!w)
		return;
	if (remove) {
		snprintf(path, sizeof(path), "%s/%s", w->dir, CRUXD_STATUS_FILE);
		unlink(path);
	}
	crux_shm_unmap(&w->map);
	free(w);
}

crux_status_t cruxd_status_read(const char *dir, struct cruxd_status_body *out,
				uint64_t *heartbeat_ns)
{
	struct crux_shm_map map;
	struct cruxd_status_file *f;
	crux_status_t st;

	st = crux_shm_open(dir, CRUXD_STATUS_FILE, CRUXD_STATUS_MAGIC, CRUXD_STATUS_VERSION,
			   sizeof(struct cruxd_status_file), false, &map);
	if (st != CRUX_OK)
		return st;
	f = map.base;
	/* The copy is large: allow the writer more room than a table entry gets. */
	st = crux_seq_copy(&f->seq, out, &f->body, sizeof(*out), 1000);
	if (st == CRUX_OK) {
		if (out->njobs > CRUXD_STATUS_MAX_JOBS || out->npeers > CRUXD_STATUS_MAX_PEERS ||
		    out->nlevels > CRUX_MAX_LEVELS) {
			st = CRUX_ERR_CORRUPT;
		} else {
			out->topology[sizeof(out->topology) - 1] = '\0';
			out->overrides_error[sizeof(out->overrides_error) - 1] = '\0';
			for (uint32_t i = 0; i < out->njobs; i++)
				out->jobs[i].job_id[CRUX_JOB_ID_LEN - 1] = '\0';
			if (heartbeat_ns)
				*heartbeat_ns = atomic_load_explicit(&f->hdr.heartbeat_ns,
								     memory_order_acquire);
		}
	}
	crux_shm_unmap(&map);
	return st;
}
