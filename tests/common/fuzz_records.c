/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: record validation, through the same paths the readers use.
 *
 * Input: byte 0 picks the record kind (even: decision table, odd: profile
 * record); bytes 1-2 (little endian) times 8 give an offset; the rest is
 * the payload. Each input is used twice:
 *   1. the payload alone is written as the record file in a private
 *      directory and opened the way readers open it (header checks, sizes);
 *   2. the payload is written over a valid record image at the offset and
 *      the image goes through the readers' full validation; when it passes,
 *      lookups / snapshot reads run on it (bounds inside the body).
 * Nothing may crash, hang or trip a sanitizer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/log.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"
#include "crux/shm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_ctx {
	int ready;
	char base[64];
	char shm[96];
	char prof_name[96];
	uint64_t *dt_tmpl, *dt_img;
	size_t dt_size;
	uint64_t *pr_tmpl, *pr_img;
	size_t pr_size;
	uint64_t keys[4];
	struct crux_addr peers[2];
	struct crux_dt_contents *contents;
	struct crux_prof_snapshot *snap;
};

static struct fuzz_ctx fz;

static void quiet_sink(void *arg, enum crux_log_level level, const char *file, int line,
		       const char *msg)
{
	(void)arg;
	(void)level;
	(void)file;
	(void)line;
	(void)msg;
}

static void cleanup(void)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, fz.shm);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s", fz.shm, fz.prof_name);
	unlink(path);
	rmdir(fz.shm);
	rmdir(fz.base);
	free(fz.dt_tmpl);
	free(fz.dt_img);
	free(fz.pr_tmpl);
	free(fz.pr_img);
	free(fz.contents);
	free(fz.snap);
}

static uint64_t *load(const char *path, size_t size)
{
	uint64_t *buf = aligned_alloc(64, (size + 63) / 64 * 64);
	FILE *f = fopen(path, "rb");
	if (!buf || !f || fread(buf, 1, size, f) != size)
		abort();
	fclose(f);
	return buf;
}

/* Valid templates of both kinds, made once with the real writers. */
static void setup(void)
{
	crux_log_set_sink(quiet_sink, NULL);
	snprintf(fz.base, sizeof(fz.base), "/tmp/crux-fuzz-XXXXXX");
	if (!mkdtemp(fz.base))
		abort();
	snprintf(fz.shm, sizeof(fz.shm), "%s/shm", fz.base);
	if (mkdir(fz.shm, 0755) != 0 || chmod(fz.shm, 0755) != 0)
		abort();
	atexit(cleanup);

	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	crux_dt_settings_default(4, &s);
	if (crux_dt_writer_open(fz.shm, &s, &w, NULL) != CRUX_OK)
		abort();
	struct crux_dt_job jobs[4];
	struct crux_dt_route routes[6];
	memset(jobs, 0, sizeof(jobs));
	memset(routes, 0, sizeof(routes));
	crux_addr_parse("198.18.0.2", &fz.peers[0]);
	crux_addr_parse("fd00::3", &fz.peers[1]);
	for (int j = 0; j < 4; j++) {
		snprintf(jobs[j].job_id, sizeof(jobs[j].job_id), "env:fuzz%d", j);
		jobs[j].job_key = fz.keys[j] = crux_job_key_of(jobs[j].job_id);
		jobs[j].level = (uint8_t)j;
		jobs[j].state = (uint8_t)(j % 3);
	}
	for (int r = 0; r < 6; r++) {
		routes[r].job_key = fz.keys[r % 4];
		routes[r].peer = fz.peers[r / 4];
		routes[r].path_id = (uint16_t)r;
		routes[r].nports = (uint8_t)(r + 1);
		for (int k = 0; k < r + 1; k++)
			routes[r].ports[k] = (uint16_t)(40000 + r * 10 + k);
	}
	if (crux_dt_publish(w, jobs, 4, routes, 6) != CRUX_OK)
		abort();
	crux_dt_writer_close(w);
	char path[200];
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, fz.shm);
	fz.dt_size = crux_dt_file_size();
	fz.dt_tmpl = load(path, fz.dt_size);
	fz.dt_img = aligned_alloc(64, (fz.dt_size + 63) / 64 * 64);

	struct crux_prof_identity id;
	struct crux_prof_handle *h;
	memset(&id, 0, sizeof(id));
	snprintf(id.job_id, sizeof(id.job_id), "env:fuzz0");
	id.job_key = fz.keys[0];
	if (crux_prof_open_self(fz.shm, &id, &h) != CRUX_OK)
		abort();
	struct crux_prof_compute c;
	memset(&c, 0, sizeof(c));
	c.windows = 3;
	snprintf(c.device, sizeof(c.device), "cpu");
	crux_prof_publish_compute(h, &c);
	struct crux_prof_net *n = calloc(1, sizeof(*n));
	n->npeers = 2;
	n->peers[0].peer = fz.peers[0];
	n->peers[1].peer = fz.peers[1];
	crux_prof_publish_net(h, n);
	free(n);
	crux_prof_close(h);
	uint64_t start;
	crux_proc_start_time(getpid(), &start);
	crux_prof_name(getpid(), start, fz.prof_name, sizeof(fz.prof_name));
	snprintf(path, sizeof(path), "%s/%s", fz.shm, fz.prof_name);
	fz.pr_size = crux_prof_file_size();
	fz.pr_tmpl = load(path, fz.pr_size);
	fz.pr_img = aligned_alloc(64, (fz.pr_size + 63) / 64 * 64);
	fz.contents = malloc(sizeof(*fz.contents));
	fz.snap = malloc(sizeof(*fz.snap));
	if (!fz.dt_img || !fz.pr_img || !fz.contents || !fz.snap)
		abort();
	fz.ready = 1;
}

static void write_file(const char *name, const uint8_t *p, size_t n)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/%s", fz.shm, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		abort();
	if (n)
		fwrite(p, 1, n, f);
	fclose(f);
	chmod(path, 0644);
}

static void overlay(uint64_t *img, const uint64_t *tmpl, size_t size, size_t off, const uint8_t *p,
		    size_t n)
{
	memcpy(img, tmpl, size);
	if (off < size)
		memcpy((char *)img + off, p, n < size - off ? n : size - off);
}

static void fuzz_table(size_t off, const uint8_t *p, size_t n)
{
	struct crux_dt_reader *r;
	struct crux_decision d;
	char err[512];

	write_file(CRUX_DT_FILE, p, n);
	if (crux_dt_reader_open_ex(fz.shm, &r, err, sizeof(err)) == CRUX_OK) {
		crux_dt_lookup(r, fz.keys[0], &fz.peers[0], &d);
		crux_dt_reader_close(r);
	}

	overlay(fz.dt_img, fz.dt_tmpl, fz.dt_size, off, p, n);
	crux_status_t st = crux_dt_reader_open_buffer(fz.dt_img, fz.dt_size, &r, err, sizeof(err));
#ifdef CRUX_FUZZ_VERBOSE
	fprintf(stderr, "table overlay at %zu: %s %s\n", off, crux_status_str(st),
		st == CRUX_OK ? "" : err);
#endif
	if (st != CRUX_OK)
		return;
	for (int j = 0; j < 4; j++) {
		for (int k = 0; k < 2; k++) {
			if (crux_dt_lookup(r, fz.keys[j], &fz.peers[k], &d) == CRUX_OK &&
			    (d.level >= CRUX_MAX_LEVELS || d.nports > CRUX_ROUTE_MAX_PORTS))
				abort(); /* validation let an out-of-range value through */
		}
	}
	crux_dt_lookup(r, 12345, NULL, &d);
	if (crux_dt_read_all(r, fz.contents) == CRUX_OK &&
	    (fz.contents->njobs > CRUX_DT_MAX_JOBS || fz.contents->nroutes > CRUX_DT_MAX_ROUTES))
		abort();
	crux_dt_generation(r);
	crux_dt_is_stale(r, crux_now_ns());
	crux_dt_reader_close(r);
}

static void fuzz_profile(size_t off, const uint8_t *p, size_t n)
{
	char err[768];
	write_file(fz.prof_name, p, n);
	crux_prof_read_ex(fz.shm, fz.prof_name, fz.snap, err, sizeof(err));

	overlay(fz.pr_img, fz.pr_tmpl, fz.pr_size, off, p, n);
	crux_status_t st =
	    crux_prof_validate_buffer(fz.pr_img, fz.pr_size, 0, 0, fz.snap, err, sizeof(err));
#ifdef CRUX_FUZZ_VERBOSE
	fprintf(stderr, "profile overlay at %zu: %s %s\n", off, crux_status_str(st),
		st == CRUX_OK ? "" : err);
#endif
	if (st == CRUX_OK && (fz.snap->net.npeers > CRUX_PROF_MAX_PEERS ||
			      !memchr(fz.snap->id.job_id, '\0', sizeof(fz.snap->id.job_id)) ||
			      fz.snap->net.busy_period_ns > fz.snap->net.busy_window_ns ||
			      fz.snap->net.busy_period_ns > fz.snap->net.busy_ns))
		abort();
	if (st == CRUX_OK) {
		/* the stall breakdown of whatever passed: fractions in range, summing to 1 */
		struct crux_prof_stalls sb;
		crux_prof_stalls_of(&fz.snap->compute, fz.snap->has_compute, &fz.snap->net,
				    fz.snap->has_net, &sb);
		if (sb.valid &&
		    !(sb.compute >= 0 && sb.interconnect >= 0 && sb.network >= 0 && sb.other >= 0 &&
		      sb.compute + sb.interconnect + sb.network + sb.other < 1.000001))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fz.ready)
		setup();
	if (size < 3)
		return 0;
	size_t off = ((size_t)data[1] | ((size_t)data[2] << 8)) * 8;
	if (data[0] & 1)
		fuzz_profile(off, data + 3, size - 3);
	else
		fuzz_table(off, data + 3, size - 3);
	return 0;
}
