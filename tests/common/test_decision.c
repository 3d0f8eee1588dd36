/* SPDX-License-Identifier: Apache-2.0 */
/* Decision table: settings, writer/reader, lookup, generation, heartbeat, flock, restart,
 * corruption. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <fcntl.h>
#include <sys/wait.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/shm.h"
#include "testutil.h"

static int setup(void **state)
{
	struct tu_dirs *d = calloc(1, sizeof(*d));
	tu_dirs_make(d);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	tu_dirs_remove(*state);
	free(*state);
	return 0;
}

static struct crux_dt_job job(const char *id, uint8_t level, uint8_t state)
{
	struct crux_dt_job j;
	memset(&j, 0, sizeof(j));
	snprintf(j.job_id, sizeof(j.job_id), "%s", id);
	j.job_key = crux_job_key_of(id);
	j.level = level;
	j.state = state;
	return j;
}

static struct crux_dt_route route(const char *id, const char *peer, uint16_t path, uint8_t nports,
				  uint16_t first_port)
{
	struct crux_dt_route r;
	memset(&r, 0, sizeof(r));
	r.job_key = crux_job_key_of(id);
	assert_int_equal(crux_addr_parse(peer, &r.peer), CRUX_OK);
	r.path_id = path;
	r.nports = nports;
	for (uint8_t i = 0; i < nports; i++)
		r.ports[i] = (uint16_t)(first_port + i);
	return r;
}

static void test_settings(void **state)
{
	(void)state;
	struct crux_dt_settings s;
	char err[256];
	crux_dt_settings_default(4, &s);
	assert_int_equal(s.nlevels, 4);
	assert_int_equal(s.default_level, 0);
	assert_int_equal(s.levels[3].dscp, 24);
	assert_int_equal(s.levels[3].sock_prio, 3);
	assert_int_equal(s.levels[3].ib_sl, 3);
	assert_true(s.heartbeat_timeout_ns == CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS);
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_OK);
	crux_dt_settings_default(99, &s);
	assert_int_equal(s.nlevels, CRUX_MAX_LEVELS);
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_OK);

	crux_dt_settings_default(4, &s);
	s.nlevels = 0;
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "number of levels 0"));
	crux_dt_settings_default(4, &s);
	s.default_level = 4;
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "default level 4"));
	crux_dt_settings_default(4, &s);
	s.levels[2].dscp = 64;
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "DSCP 64"));
	crux_dt_settings_default(4, &s);
	s.levels[1].ib_sl = 16;
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_ERR_INVAL);
	crux_dt_settings_default(4, &s);
	s.levels[3].dscp = s.levels[1].dscp;
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "share DSCP"));
	crux_dt_settings_default(4, &s);
	s.levels[5].dscp = s.levels[1].dscp; /* beyond nlevels: ignored */
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_OK);
	s.levels[0].sock_prio = -1;
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_ERR_INVAL);
	crux_dt_settings_default(4, &s);
	s.heartbeat_timeout_ns = 0;
	assert_int_equal(crux_dt_settings_validate(&s, err, sizeof(err)), CRUX_ERR_INVAL);
}

static void test_no_table(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_reader *r = (void *)0x1;
	char err[512], missing[256];
	assert_int_equal(crux_dt_reader_open_ex(d->shm, &r, err, sizeof(err)), CRUX_ERR_NOENT);
	assert_ptr_equal(r, (void *)0x1);
	snprintf(missing, sizeof(missing), "%s/none", d->base);
	assert_int_equal(crux_dt_reader_open_ex(missing, &r, err, sizeof(err)), CRUX_ERR_NOENT);
	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_ERR_NOENT);
}

static void test_publish_lookup(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	struct crux_dt_reader *r;
	struct crux_decision dec;
	pid_t holder = -5;
	char path[256];

	crux_dt_settings_default(4, &s);
	s.default_level = 1;
	mode_t old = umask(077);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, &holder), CRUX_OK);
	umask(old);
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, d->shm);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0644);
	assert_true((size_t)sb.st_size == crux_dt_file_size());

	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_OK);
	uint64_t g0 = crux_dt_generation(r);
	assert_true(g0 >= 1);

	/* empty table: default level, no route */
	struct crux_addr peer;
	assert_int_equal(crux_addr_parse("198.18.1.2", &peer), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:a"), &peer, &dec), CRUX_OK);
	assert_false(dec.job_found);
	assert_false(dec.route_found);
	assert_int_equal(dec.level, 1);
	assert_int_equal(dec.class_map.dscp, 8);
	assert_int_equal(dec.path_id, CRUX_PATH_NONE);
	assert_int_equal(dec.nports, 0);
	assert_true(dec.generation == g0);

	struct crux_dt_job jobs[3] = {job("env:a", 3, CRUX_JOB_PROFILING),
				      job("env:b", 0, CRUX_JOB_SCHEDULED),
				      job("env:c", 2, CRUX_JOB_OVERRIDDEN)};
	struct crux_dt_route routes[3] = {route("env:a", "198.18.1.2", 5, 3, 40000),
					  route("env:a", "fd00::2", 6, 8, 41000),
					  route("env:b", "198.18.1.2", 7, 1, 42000)};
	assert_int_equal(crux_dt_publish(w, jobs, 3, routes, 3), CRUX_OK);
	uint64_t g1 = crux_dt_generation(r);
	assert_true(g1 == g0 + 1);

	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:a"), &peer, &dec), CRUX_OK);
	assert_true(dec.job_found);
	assert_true(dec.route_found);
	assert_int_equal(dec.level, 3);
	assert_int_equal(dec.state, CRUX_JOB_PROFILING);
	assert_int_equal(dec.class_map.dscp, 24);
	assert_int_equal(dec.class_map.sock_prio, 3);
	assert_int_equal(dec.class_map.ib_sl, 3);
	assert_int_equal(dec.path_id, 5);
	assert_int_equal(dec.nports, 3);
	assert_int_equal(dec.ports[0], 40000);
	assert_int_equal(dec.ports[2], 40002);
	assert_true(dec.generation == g1);

	struct crux_addr peer6;
	assert_int_equal(crux_addr_parse("fd00::2", &peer6), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:a"), &peer6, &dec), CRUX_OK);
	assert_true(dec.route_found);
	assert_int_equal(dec.path_id, 6);
	assert_int_equal(dec.nports, 8);
	assert_int_equal(dec.ports[7], 41007);

	/* job without route to that peer; no peer at all */
	struct crux_addr other;
	assert_int_equal(crux_addr_parse("198.18.9.9", &other), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:c"), &other, &dec), CRUX_OK);
	assert_true(dec.job_found);
	assert_false(dec.route_found);
	assert_int_equal(dec.level, 2);
	assert_int_equal(dec.state, CRUX_JOB_OVERRIDDEN);
	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:b"), NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 0);
	assert_false(dec.route_found);
	/* unknown job with a route (routes for default-level jobs are allowed) */
	struct crux_dt_route rr = route("env:zzz", "198.18.1.2", 9, 2, 43000);
	assert_int_equal(crux_dt_publish(w, jobs, 3, &rr, 1), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:zzz"), &peer, &dec), CRUX_OK);
	assert_false(dec.job_found);
	assert_true(dec.route_found);
	assert_int_equal(dec.level, 1);
	assert_int_equal(dec.path_id, 9);
	/* the old routes are gone */
	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:a"), &peer, &dec), CRUX_OK);
	assert_false(dec.route_found);

	/* settings change bumps the generation and changes the map */
	uint64_t g2 = crux_dt_generation(r);
	s.levels[3].dscp = 46;
	assert_int_equal(crux_dt_set_settings(w, &s), CRUX_OK);
	assert_true(crux_dt_generation(r) == g2 + 1);
	assert_int_equal(crux_dt_lookup(r, crux_job_key_of("env:a"), NULL, &dec), CRUX_OK);
	assert_int_equal(dec.class_map.dscp, 46);
	/* settings that would orphan a job's level are refused */
	struct crux_dt_settings s2;
	crux_dt_settings_default(2, &s2);
	assert_int_equal(crux_dt_set_settings(w, &s2), CRUX_ERR_INVAL);
	s2.nlevels = 0;
	assert_int_equal(crux_dt_set_settings(w, &s2), CRUX_ERR_INVAL);

	/* whole-table copies */
	struct crux_dt_contents *c = calloc(1, sizeof(*c));
	assert_int_equal(crux_dt_read_all(r, c), CRUX_OK);
	assert_int_equal(c->njobs, 3);
	assert_int_equal(c->nroutes, 1);
	assert_string_equal(c->jobs[2].job_id, "env:c");
	assert_int_equal(c->jobs[2].level, 2);
	assert_int_equal(c->routes[0].path_id, 9);
	assert_int_equal(c->settings.levels[3].dscp, 46);
	assert_int_equal(c->settings.default_level, 1);
	assert_int_equal(c->writer_pid, getpid());
	assert_true(c->generation == crux_dt_generation(r));
	assert_true(c->heartbeat_ns > 0);
	memset(c, 0, sizeof(*c));
	assert_int_equal(crux_dt_writer_read(w, c), CRUX_OK);
	assert_int_equal(c->njobs, 3);
	assert_int_equal(c->routes[0].ports[1], 43001);
	free(c);

	crux_dt_reader_close(r);
	crux_dt_writer_close(w);
}

static void test_publish_errors(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	struct crux_dt_reader *r;
	struct crux_decision dec;
	char err[256];
	crux_dt_settings_default(4, &s);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_OK);
	struct crux_dt_job good = job("env:good", 2, CRUX_JOB_SCHEDULED);
	assert_int_equal(crux_dt_publish(w, &good, 1, NULL, 0), CRUX_OK);
	uint64_t g = crux_dt_generation(r);

	struct crux_dt_job bad[2] = {job("env:x", 4, 0), job("env:y", 1, 0)};
	assert_int_equal(crux_dt_publish_ex(w, bad, 2, NULL, 0, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "level 4"));
	bad[0].level = 1;
	bad[0].state = 9;
	assert_int_equal(crux_dt_publish_ex(w, bad, 2, NULL, 0, err, sizeof(err)), CRUX_ERR_INVAL);
	bad[0] = job("env:y", 1, 0); /* duplicate key */
	assert_int_equal(crux_dt_publish_ex(w, bad, 2, NULL, 0, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "twice"));
	bad[0].job_key = 0;
	assert_int_equal(crux_dt_publish_ex(w, bad, 2, NULL, 0, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_int_equal(
	    crux_dt_publish_ex(w, bad, CRUX_DT_MAX_JOBS + 1, NULL, 0, err, sizeof(err)),
	    CRUX_ERR_RANGE);
	struct crux_dt_route rt[2] = {route("env:y", "198.18.0.1", 1, 1, 1000),
				      route("env:y", "198.18.0.1", 2, 1, 2000)};
	assert_int_equal(crux_dt_publish_ex(w, &good, 1, rt, 2, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "198.18.0.1"));
	rt[1].nports = CRUX_ROUTE_MAX_PORTS + 1;
	rt[1].peer.bytes[3] = 2;
	assert_int_equal(crux_dt_publish_ex(w, &good, 1, rt, 2, err, sizeof(err)), CRUX_ERR_INVAL);
	rt[1].nports = 1;
	rt[1].peer.family = 0;
	assert_int_equal(crux_dt_publish_ex(w, &good, 1, rt, 2, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_int_equal(
	    crux_dt_publish_ex(w, &good, 1, rt, CRUX_DT_MAX_ROUTES + 1, err, sizeof(err)),
	    CRUX_ERR_RANGE);

	/* nothing changed */
	assert_true(crux_dt_generation(r) == g);
	assert_int_equal(crux_dt_lookup(r, good.job_key, NULL, &dec), CRUX_OK);
	assert_true(dec.job_found);
	assert_int_equal(dec.level, 2);

	/* full tables work */
	struct crux_dt_job *many = calloc(CRUX_DT_MAX_JOBS, sizeof(*many));
	struct crux_dt_route *mr = calloc(CRUX_DT_MAX_ROUTES, sizeof(*mr));
	for (uint32_t i = 0; i < CRUX_DT_MAX_JOBS; i++) {
		char id[32];
		snprintf(id, sizeof(id), "env:job%u", i);
		many[i] = job(id, (uint8_t)(i % 4), CRUX_JOB_SCHEDULED);
	}
	for (uint32_t i = 0; i < CRUX_DT_MAX_ROUTES; i++) {
		mr[i].job_key = many[i % CRUX_DT_MAX_JOBS].job_key;
		mr[i].peer.family = 4;
		mr[i].peer.bytes[0] = 198;
		mr[i].peer.bytes[1] = 18;
		mr[i].peer.bytes[2] = (uint8_t)(i / CRUX_DT_MAX_JOBS);
		mr[i].peer.bytes[3] = 1;
		mr[i].path_id = (uint16_t)i;
		mr[i].nports = 1;
		mr[i].ports[0] = (uint16_t)(10000 + i);
	}
	assert_int_equal(crux_dt_publish(w, many, CRUX_DT_MAX_JOBS, mr, CRUX_DT_MAX_ROUTES),
			 CRUX_OK);
	for (uint32_t i = 0; i < CRUX_DT_MAX_ROUTES; i += 7) {
		assert_int_equal(crux_dt_lookup(r, mr[i].job_key, &mr[i].peer, &dec), CRUX_OK);
		assert_true(dec.job_found && dec.route_found);
		assert_int_equal(dec.path_id, i);
		assert_int_equal(dec.ports[0], 10000 + i);
		assert_int_equal(dec.level, (i % CRUX_DT_MAX_JOBS) % 4);
	}
	free(many);
	free(mr);
	crux_dt_reader_close(r);
	crux_dt_writer_close(w);
}

static void test_heartbeat(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	struct crux_dt_reader *r;
	crux_dt_settings_default(4, &s);
	s.heartbeat_timeout_ns = 1000000000ull;
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_OK);
	uint64_t now = crux_now_ns();
	assert_true(crux_dt_heartbeat_age(r, now) < 1000000000ull);
	assert_false(crux_dt_is_stale(r, now));
	assert_true(crux_dt_is_stale(r, now + 2000000000ull));
	assert_true(crux_dt_heartbeat_age(r, now + 2000000000ull) > 1000000000ull);
	/* a clock reading before the beat counts as age 0 */
	assert_true(crux_dt_heartbeat_age(r, 1) == 0);
	uint64_t gen = crux_dt_generation(r);
	crux_dt_heartbeat(w);
	/* the heartbeat never bumps the generation */
	assert_true(crux_dt_generation(r) == gen);
	assert_false(crux_dt_is_stale(r, crux_now_ns()));
	crux_dt_reader_close(r);
	crux_dt_writer_close(w);

	/* a table whose heartbeat was never written: age "infinite" */
	char path[256];
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, d->shm);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint64_t zero = 0;
	assert_int_equal(pwrite(fd, &zero, 8, offsetof(struct crux_shm_header, heartbeat_ns)), 8);
	close(fd);
	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_OK);
	assert_true(crux_dt_heartbeat_age(r, crux_now_ns()) == UINT64_MAX);
	assert_true(crux_dt_is_stale(r, crux_now_ns()));
	crux_dt_reader_close(r);
}

static void test_flock_and_restart(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w, *w2 = NULL;
	struct crux_dt_reader *r;
	struct crux_decision dec;
	pid_t holder = -1;
	char err[512];
	crux_dt_settings_default(4, &s);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	struct crux_dt_job jobs[2] = {job("slurm:1.0", 3, CRUX_JOB_SCHEDULED),
				      job("slurm:2.0", 1, CRUX_JOB_OVERRIDDEN)};
	struct crux_dt_route rt = route("slurm:1.0", "198.18.0.7", 3, 2, 50000);
	assert_int_equal(crux_dt_publish(w, jobs, 2, &rt, 1), CRUX_OK);

	/* a second writer in this process (another open file description) */
	assert_int_equal(crux_dt_writer_open_ex(d->shm, &s, &w2, &holder, err, sizeof(err)),
			 CRUX_ERR_BUSY);
	assert_null(w2);
	assert_int_equal(holder, getpid());
	char expect[64];
	snprintf(expect, sizeof(expect), "pid %d", (int)getpid());
	assert_non_null(strstr(err, expect));

	/* a second writer in another process */
	pid_t child = fork();
	if (child == 0) {
		struct crux_dt_writer *cw = NULL;
		pid_t h = -1;
		crux_status_t st = crux_dt_writer_open_ex(d->shm, &s, &cw, &h, NULL, 0);
		_exit(st == CRUX_ERR_BUSY && h == getppid() && cw == NULL ? 0 : 1);
	}
	int status = 0;
	waitpid(child, &status, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_OK);
	uint64_t gen = crux_dt_generation(r);
	crux_dt_writer_close(w);
	/* the table stays valid for readers after the writer leaves */
	assert_int_equal(crux_dt_lookup(r, jobs[0].job_key, &rt.peer, &dec), CRUX_OK);
	assert_int_equal(dec.level, 3);

	/* restart with fewer levels: entries kept, levels clamped, generation continues */
	struct crux_dt_settings s2;
	crux_dt_settings_default(3, &s2);
	assert_int_equal(crux_dt_writer_open(d->shm, &s2, &w, &holder), CRUX_OK);
	assert_true(crux_dt_generation(r) > gen);
	assert_int_equal(crux_dt_lookup(r, jobs[0].job_key, &rt.peer, &dec), CRUX_OK);
	assert_true(dec.job_found);
	assert_int_equal(dec.level, 2);
	assert_true(dec.route_found);
	assert_int_equal(dec.ports[1], 50001);
	assert_int_equal(crux_dt_lookup(r, jobs[1].job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 1);
	assert_int_equal(dec.state, CRUX_JOB_OVERRIDDEN);
	struct crux_dt_contents *c = calloc(1, sizeof(*c));
	assert_int_equal(crux_dt_writer_read(w, c), CRUX_OK);
	assert_int_equal(c->njobs, 2);
	assert_int_equal(c->settings.nlevels, 3);
	free(c);
	crux_dt_writer_close(w);
	crux_dt_reader_close(r);

	/* invalid settings are refused before anything is touched */
	s2.nlevels = 0;
	assert_int_equal(crux_dt_writer_open_ex(d->shm, &s2, &w, NULL, err, sizeof(err)),
			 CRUX_ERR_INVAL);
}

static void test_corrupt_table(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_reader *r;
	struct crux_dt_writer *w;
	struct crux_dt_settings s;
	char path[256], err[512];
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, d->shm);
	crux_dt_settings_default(4, &s);

	/* garbage of the right size */
	size_t size = crux_dt_file_size();
	unsigned char *junk = malloc(size);
	for (size_t i = 0; i < size; i++)
		junk[i] = (unsigned char)(i * 2654435761u >> 13);
	tu_write_file(path, junk, size, 0644);
	assert_int_equal(crux_dt_reader_open_ex(d->shm, &r, err, sizeof(err)), CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "wrong magic"));
	/* truncated */
	tu_write_file(path, junk, 100, 0644);
	assert_int_equal(crux_dt_reader_open_ex(d->shm, &r, err, sizeof(err)), CRUX_ERR_CORRUPT);
	/* wrong version */
	struct crux_shm_header h;
	memset(&h, 0, sizeof(h));
	h.magic = CRUX_DT_MAGIC;
	h.layout_version = CRUX_DT_VERSION + 1;
	h.header_size = 64;
	h.total_size = size;
	memset(junk, 0, size);
	memcpy(junk, &h, sizeof(h));
	tu_write_file(path, junk, size, 0644);
	assert_int_equal(crux_dt_reader_open_ex(d->shm, &r, err, sizeof(err)), CRUX_ERR_VERSION);
	/* right header, all-zero body: bad settings */
	h.layout_version = CRUX_DT_VERSION;
	memcpy(junk, &h, sizeof(h));
	tu_write_file(path, junk, size, 0644);
	assert_int_equal(crux_dt_reader_open_ex(d->shm, &r, err, sizeof(err)), CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "bad settings"));

	/* the writer drops bad contents with a logged warning */
	struct tu_log cap = {0};
	crux_log_set_sink(tu_log_sink, &cap);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	assert_true(cap.lines >= 1);
	assert_non_null(strstr(cap.last, "existing entries dropped"));
	crux_dt_writer_close(w);
	/* and replaces a table of another version; readers of the old file can tell */
	struct crux_dt_reader *old_r;
	assert_int_equal(crux_dt_reader_open(d->shm, &old_r), CRUX_OK);
	assert_true(crux_dt_reader_is_current(old_r));
	h.layout_version = CRUX_DT_VERSION + 1;
	memcpy(junk, &h, sizeof(h));
	tu_write_file(path, junk, size, 0644);
	cap.lines = 0;
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	assert_false(crux_dt_reader_is_current(old_r));
	crux_dt_reader_close(old_r);
	crux_log_set_sink(NULL, NULL);
	assert_int_equal(cap.lines, 1);
	assert_non_null(strstr(cap.last, "replacing it with an empty table"));
	struct crux_dt_job jobs[3] = {job("env:p", 1, 1), job("env:q", 2, 1), job("env:r", 3, 1)};
	struct crux_dt_route rts[5];
	for (int i = 0; i < 5; i++) {
		char a[32];
		snprintf(a, sizeof(a), "198.18.0.%d", i + 1);
		rts[i] = route("env:p", a, (uint16_t)i, 1, 1000);
	}
	assert_int_equal(crux_dt_publish(w, jobs, 3, rts, 5), CRUX_OK);
	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_OK);
	crux_dt_reader_close(r);

	/* counts out of bounds inside a valid header, on an in-memory image */
	uint64_t *img = aligned_alloc(64, (size + 63) / 64 * 64);
	int fd = open(path, O_RDONLY);
	assert_int_equal(pread(fd, img, size, 0), (ssize_t)size);
	close(fd);
	assert_int_equal(crux_dt_validate_mapped(img, size, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_dt_validate_mapped(img, size - 1, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	/* find (njobs=3, nroutes=5) pairs: the bank counters */
	int patched = 0;
	for (size_t off = 64; off + 8 <= 4096; off += 4) {
		uint32_t pair[2];
		memcpy(pair, (char *)img + off, 8);
		if (pair[0] == 3 && pair[1] == 5) {
			uint32_t huge[2] = {100000, 5};
			memcpy((char *)img + off, huge, 8);
			patched++;
		}
	}
	assert_true(patched >= 1);
	assert_int_equal(crux_dt_validate_mapped(img, size, err, sizeof(err)), CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "exceed the limits"));
	struct crux_dt_reader *br = (void *)0x1;
	assert_int_equal(crux_dt_reader_open_buffer(img, size, &br, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	assert_ptr_equal(br, (void *)0x1);
	free(img);
	free(junk);
	crux_dt_writer_close(w);

	/* a symlinked table is refused by readers and writers */
	char real[256];
	snprintf(real, sizeof(real), "%s/real.tbl", d->base);
	assert_int_equal(rename(path, real), 0);
	assert_int_equal(symlink(real, path), 0);
	assert_int_equal(crux_dt_reader_open_ex(d->shm, &r, err, sizeof(err)), CRUX_ERR_PERM);
	assert_non_null(strstr(err, "symbolic link"));
	assert_int_equal(crux_dt_writer_open_ex(d->shm, &s, &w, NULL, err, sizeof(err)),
			 CRUX_ERR_PERM);
	unlink(path);
	/* a directory in its place */
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(crux_dt_writer_open_ex(d->shm, &s, &w, NULL, err, sizeof(err)),
			 CRUX_ERR_PERM);
	rmdir(path);
	/* world-writable directory */
	chmod(d->shm, 0777);
	assert_int_equal(crux_dt_writer_open_ex(d->shm, &s, &w, NULL, err, sizeof(err)),
			 CRUX_ERR_PERM);
	assert_non_null(strstr(err, "chmod 755"));
	chmod(d->shm, 0755);
}

static void test_buffer_reader(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	crux_dt_settings_default(4, &s);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	struct crux_dt_job j = job("env:buf", 2, 1);
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	crux_dt_writer_close(w);
	char path[256];
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, d->shm);
	size_t size = crux_dt_file_size();
	uint64_t *img = aligned_alloc(64, (size + 63) / 64 * 64);
	int fd = open(path, O_RDONLY);
	assert_int_equal(pread(fd, img, size, 0), (ssize_t)size);
	close(fd);
	struct crux_dt_reader *r;
	struct crux_decision dec;
	assert_int_equal(crux_dt_reader_open_buffer(img, size, &r, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 2);
	crux_dt_reader_close(r);
	free(img);
}

/*
 * The next tests poke at the private file layout of version 1: the active
 * bank index is the first word after the header, then two equal banks that
 * each start with their sequence counter, 128 bytes of fields, then the job
 * index (16-bit slots).
 */
#define DT_ACTIVE_OFF 64
#define DT_BANKS_OFF  128

static size_t bank_off(int b)
{
	return DT_BANKS_OFF + (size_t)b * ((crux_dt_file_size() - DT_BANKS_OFF) / 2);
}

static void test_lookup_bounds(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	crux_dt_settings_default(4, &s);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	struct crux_dt_job j = job("env:bounds", 1, 1);
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	crux_dt_writer_close(w);
	char path[256];
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, d->shm);
	size_t size = crux_dt_file_size();
	unsigned char *img = aligned_alloc(64, (size + 63) / 64 * 64);
	int fd = open(path, O_RDONLY);
	assert_int_equal(pread(fd, img, size, 0), (ssize_t)size);
	close(fd);
	struct crux_dt_reader *r;
	struct crux_decision dec;
	assert_int_equal(crux_dt_reader_open_buffer(img, size, &r, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_OK);
	/* after validation at open, the index turns bad: every lookup checks bounds */
	uint32_t active;
	memcpy(&active, img + DT_ACTIVE_OFF, 4);
	memset(img + bank_off((int)(active & 1)) + 128, 0xff, 16);
	memset(&dec, 0x5a, sizeof(dec));
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_ERR_CORRUPT);
	assert_int_equal(crux_dt_lookup(r, 777, NULL, &dec), CRUX_ERR_CORRUPT);
	struct crux_dt_contents *c = malloc(sizeof(*c));
	assert_int_equal(crux_dt_read_all(r, c), CRUX_OK); /* entries themselves are fine */
	/* a level beyond the levels */
	memset(img + bank_off((int)(active & 1)) + 128, 0, 16);
	uint32_t nlevels = 0;
	memcpy(img + bank_off((int)(active & 1)) + 16, &nlevels, 4);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_ERR_CORRUPT);
	assert_int_equal(crux_dt_read_all(r, c), CRUX_ERR_CORRUPT);
	/* an odd counter that never moves: bounded retries, then busy */
	uint64_t odd = 1;
	memcpy(img + bank_off((int)(active & 1)), &odd, 8);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_ERR_BUSY);
	assert_int_equal(crux_dt_read_all(r, c), CRUX_ERR_BUSY);
	free(c);
	crux_dt_reader_close(r);
	free(img);
}

static uint64_t seq_at(const char *path, size_t off)
{
	uint64_t v = 0;
	int fd = open(path, O_RDONLY);
	assert_int_equal(pread(fd, &v, 8, (off_t)off), 8);
	close(fd);
	return v;
}

static void test_writer_died_mid_publish(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	struct crux_dt_reader *r;
	struct crux_decision dec;
	char path[256];
	snprintf(path, sizeof(path), "%s/" CRUX_DT_FILE, d->shm);
	crux_dt_settings_default(4, &s);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	struct crux_dt_job j = job("env:crash", 2, 1);
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	crux_dt_writer_close(w);

	/* the writer died inside its next publish: the inactive bank's counter is odd */
	uint32_t active;
	int fd = open(path, O_RDWR);
	assert_int_equal(pread(fd, &active, 4, DT_ACTIVE_OFF), 4);
	size_t inactive = bank_off((int)((active & 1) ^ 1));
	uint64_t q = seq_at(path, inactive) | 1;
	assert_int_equal(pwrite(fd, &q, 8, (off_t)inactive), 8);
	close(fd);
	/* readers use the active bank: unaffected */
	assert_int_equal(crux_dt_reader_open(d->shm, &r), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 2);
	/* the next writer keeps the entries and evens the counter before writing that bank */
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	assert_int_equal(seq_at(path, bank_off(0)) & 1, 0);
	assert_int_equal(seq_at(path, bank_off(1)) & 1, 0);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 2);
	j.level = 3;
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 3);
	crux_dt_writer_close(w);
	crux_dt_reader_close(r);
}

/*
 * Contract v1 readers: a mirror of private pread copies. Truncating, growing,
 * scribbling on, replacing or removing the file never reaches the copy in
 * use; a heartbeat is taken without a new copy; a new generation is.
 */
static void test_mirror_survives_the_file(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w = NULL;
	struct crux_dt_mirror *m = NULL;
	struct crux_dt_reader *r = NULL, *r2 = NULL;
	struct crux_decision dec;
	char err[512], path[300];
	crux_dt_settings_default(4, &s);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	struct crux_dt_job j = job("env:mirror", 2, CRUX_JOB_SCHEDULED);
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	crux_dt_heartbeat(w);
	assert_int_equal(crux_dt_mirror_open(d->shm, &m, &r, err, sizeof(err)), CRUX_OK);
	assert_true(crux_dt_mirror_owns(m, r));
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 2);
	uint64_t age = crux_dt_heartbeat_age(r, crux_now_ns());
	usleep(20000);
	crux_dt_heartbeat(w);
	assert_int_equal(crux_dt_mirror_refresh(m, &r2, err, sizeof(err)), CRUX_OK);
	assert_ptr_equal(r2, r); /* only the heartbeat moved */
	assert_true(crux_dt_heartbeat_age(r, crux_now_ns()) < age + 20000000ull);
	j.level = 3;
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_mirror_refresh(m, &r2, err, sizeof(err)), CRUX_OK);
	assert_ptr_not_equal(r2, r);
	assert_int_equal(crux_dt_lookup(r2, j.job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 3);
	crux_dt_writer_close(w);

	snprintf(path, sizeof(path), "%s/%s", d->shm, CRUX_DT_FILE);
	char junk[4096];
	memset(junk, 0x5a, sizeof(junk));
	for (int k = 0; k < 5; k++) {
		if (k == 0)
			assert_int_equal(truncate(path, 0), 0);
		else if (k == 1)
			assert_int_equal(truncate(path, 4 << 20), 0);
		else if (k == 2)
			tu_write_file(path, junk, sizeof(junk), 0644);
		else if (k == 3)
			assert_int_equal(unlink(path), 0);
		else
			assert_int_equal(symlink("/etc/passwd", path), 0);
		err[0] = '\0';
		assert_int_not_equal(crux_dt_mirror_refresh(m, &r, err, sizeof(err)), CRUX_OK);
		assert_non_null(strstr(err, CRUX_DT_FILE));
		/* the copy in use is untouched */
		assert_int_equal(crux_dt_lookup(r2, j.job_key, NULL, &dec), CRUX_OK);
		assert_int_equal(dec.level, 3);
		if (k == 0 || k == 1) /* restore a whole file for the next step */
			assert_int_equal(truncate(path, (off_t)crux_dt_file_size()), 0);
	}
	unlink(path);
	/* a good table again: taken at the next refresh */
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	j.level = 1;
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_mirror_refresh(m, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, j.job_key, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 1);
	crux_dt_writer_close(w);
	crux_dt_mirror_close(m);
}

/* A copy reader names the real cause: another layout version, not "cannot open". */
static void test_copy_names_version(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_dt_reader *r = NULL;
	struct crux_shm_header h;
	char err[512], path[300];
	size_t size = crux_dt_file_size();
	char *img = calloc(1, size);
	memset(&h, 0, sizeof(h));
	h.magic = CRUX_DT_MAGIC;
	h.layout_version = CRUX_DT_VERSION - 1;
	h.header_size = sizeof(h);
	h.total_size = size - 64; /* the old layout had another size */
	memcpy(img, &h, sizeof(h));
	snprintf(path, sizeof(path), "%s/%s", d->shm, CRUX_DT_FILE);
	tu_write_file(path, img, size - 64, 0644);
	assert_int_equal(crux_dt_reader_open_copy(d->shm, &r, err, sizeof(err)), CRUX_ERR_VERSION);
	assert_non_null(strstr(err, "layout version"));
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_settings),
	    cmocka_unit_test_setup_teardown(test_no_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_publish_lookup, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_publish_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_heartbeat, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flock_and_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mirror_survives_the_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_copy_names_version, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_buffer_reader, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lookup_bounds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_writer_died_mid_publish, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
