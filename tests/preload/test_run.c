/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End-to-end tests of the real libcrux-preload.so: a trainer program runs a
 * scripted training loop over the CPU NCCL double under LD_PRELOAD, with a
 * short CRUX_PROFILE_WINDOW and a private CRUX_SHM_DIR; the test then reads
 * the profile record and checks it against the script.
 *
 * Tolerances: per-iteration times within 5% + 0.3 ms of what the program
 * itself measured over the same window (FW_TRUTH; the period also one
 * iteration's share, for the window's edges), and within -5%/+700% of the
 * script (sleeps overshoot on a busy machine, never undershoot); bytes
 * exact; iterations in the window within 20% + 2 of window/period.
 */
#include <fcntl.h>
#include <ftw.h>
#include <link.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "crux/profile.h"
#include "crux/profile_scan.h"

#define MAX_SNAPS 4

struct run {
	char base[128];
	char shm[160];
	char errfile[192];
	char truthfile[192];
	int status;
	size_t nsnaps;
	struct crux_prof_snapshot snaps[MAX_SNAPS];
	char err[8192];
};

static const char *need(const char *name)
{
	const char *v = getenv(name);

	if (!v) {
		fprintf(stderr, "%s is not set (run through meson test)\n", name);
		abort();
	}
	return v;
}

/* Under AddressSanitizer its runtime must come first in LD_PRELOAD. */
static int find_asan(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	(void)size;
	if (base && strncmp(base + 1, "libasan.so", 10) == 0) {
		snprintf(arg, 512, "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

static void set_preload(void)
{
	char asan[512] = "", value[1100];
	const char *opts = getenv("ASAN_OPTIONS");

	dl_iterate_phdr(find_asan, asan);
	if (*asan) {
		/*
		 * GCC's ASan reports its own registration of the preload's globals
		 * twice (an ODR "violation" within one library, also with nothing
		 * else loaded); every other check stays on.
		 */
		snprintf(value, sizeof(value), "%s%sdetect_odr_violation=0", opts ? opts : "",
			 opts && *opts ? ":" : "");
		setenv("ASAN_OPTIONS", value, 1);
	}
	snprintf(value, sizeof(value), "%s%s%s", asan, *asan ? ":" : "",
		 need("CRUXP_TEST_PRELOAD"));
	setenv("LD_PRELOAD", value, 1);
}

static int collect(void *arg, const struct crux_prof_snapshot *snap)
{
	struct run *r = arg;

	if (r->nsnaps < MAX_SNAPS)
		r->snaps[r->nsnaps++] = *snap;
	return 0;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Run the trainer with 'env' (NULL-terminated "NAME=value" list) added. */
static void run_trainer(struct run *r, const char *fw, const char *scenario, int iters,
			double compute_ms, const char *const *env)
{
	char siters[16], sms[32];
	pid_t pid;
	FILE *f;
	size_t n;

	memset(r, 0, sizeof(*r));
	snprintf(r->base, sizeof(r->base), "/tmp/cruxp-test-XXXXXX");
	assert_non_null(mkdtemp(r->base));
	snprintf(r->shm, sizeof(r->shm), "%s/shm", r->base);
	snprintf(r->errfile, sizeof(r->errfile), "%s/stderr", r->base);
	snprintf(r->truthfile, sizeof(r->truthfile), "%s/truth", r->base);
	assert_int_equal(mkdir(r->shm, 0755), 0);
	assert_int_equal(chmod(r->shm, 0755), 0);
	snprintf(siters, sizeof(siters), "%d", iters);
	snprintf(sms, sizeof(sms), "%g", compute_ms);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(r->errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(126);
		setenv("CRUX_SHM_DIR", r->shm, 1);
		setenv("CRUX_PROFILE_WINDOW", "400ms", 1);
		set_preload();
		setenv("CRUX_JOB_ID", "preload-test", 1);
		setenv("FW_TRUTH", r->truthfile, 1);
		unsetenv("CRUX_TIMING");
		unsetenv("CRUX_ITERATION_MARK");
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		execl(need("CRUXP_TEST_TRAINER"), "trainer", fw, scenario, siters, sms,
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &r->status, 0), pid);
	f = fopen(r->errfile, "r");
	if (f) {
		n = fread(r->err, 1, sizeof(r->err) - 1, f);
		r->err[n] = '\0';
		fclose(f);
	}
	if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0)
		fprintf(stderr, "trainer %s failed (status %d); its stderr:\n%s\n", scenario,
			r->status, r->err);
	assert_int_equal(crux_prof_scan(r->shm, 0, collect, r, NULL), CRUX_OK);
}

static void cleanup(struct run *r)
{
	nftw(r->base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* The program's own per-iteration means over the published window. */
struct truth {
	double iter, compute, comm, overlap;
	int n;
};

static struct truth truth_of(const struct run *r, const struct crux_prof_compute *c)
{
	unsigned long long a, b, cp, cm, ov;
	uint64_t to = c->window_end_ns, from = to - (uint64_t)(c->window_s * 1e9);
	struct truth t = {0, 0, 0, 0, 0};
	FILE *f = fopen(r->truthfile, "r");

	assert_non_null(f);
	while (fscanf(f, "%llu %llu %llu %llu %llu", &a, &b, &cp, &cm, &ov) == 5) {
		if (a < from || a >= to)
			continue;
		t.iter += (double)(b - a);
		t.compute += (double)cp;
		t.comm += (double)cm;
		t.overlap += (double)ov;
		t.n++;
	}
	fclose(f);
	assert_true(t.n >= 3);
	t.iter /= t.n * 1e9;
	t.compute /= t.n * 1e9;
	t.comm /= t.n * 1e9;
	t.overlap /= t.n * 1e9;
	return t;
}

static void near_tol(double got, double truth, double script, const char *what, double tol)
{

	if (fabs(got - truth) > tol)
		fail_msg("%s: measured %.6f s, the program saw %.6f s (tolerance %.6f s)", what,
			 got, truth, tol);
	/* The program's own clock is the truth; the script only bounds it from
	 * below (a sleep never ends early). Above, a loaded machine stretches
	 * sleeps by several times, so only a gross error is caught here. */
	if (got < 0.95 * script - 0.0003 || got > 8 * script + 0.0003)
		fail_msg("%s: measured %.6f s, the script says %.6f s (-5%%/+700%%)", what, got,
			 script);
}

static void near(double got, double truth, double script, const char *what)
{
	near_tol(got, truth, script, what, 0.05 * truth + 0.0003);
}

/* The period comes from the whole window while the truth averages the
 * iterations that start in it: one iteration more or less at an edge moves
 * it by up to 1/n, which a loaded machine's uneven iterations make real. */
static void near_iter(double got, const struct truth *t, double script)
{
	near_tol(got, t->iter, script, "iteration time", 0.05 * t->iter + 0.0003 + t->iter / t->n);
}

static void check_iterations(const struct crux_prof_compute *c)
{
	double expect = c->window_s / c->iter_time_s;

	assert_true(c->iterations > 0);
	if (fabs((double)c->iterations - expect) > 0.2 * expect + 2)
		fail_msg("window of %.3f s holds %llu iterations, period %.6f s says %.1f",
			 c->window_s, (unsigned long long)c->iterations, c->iter_time_s, expect);
}

static const struct crux_prof_compute *only(struct run *r)
{
	assert_int_equal(r->status, 0);
	assert_int_equal(r->nsnaps, 1);
	assert_true(r->snaps[0].has_compute);
	return &r->snaps[0].compute;
}

/* DDP: 10 ms compute, 3 all-reduces of 3 ms. */
static void ddp_common(const char *fw, const char *const *env, uint32_t backend, double overlap)
{
	struct run r;
	const struct crux_prof_compute *c;
	struct truth t;

	run_trainer(&r, fw, overlap > 0 ? "ddp-overlap" : "ddp", 80, 10, env);
	c = only(&r);
	t = truth_of(&r, c);
	assert_int_equal(c->timing_backend, backend);
	assert_true(c->flags & CRUX_PROF_F_ITER_DETECTED);
	assert_false(c->flags & CRUX_PROF_F_STATIC_NCCL);
	assert_string_equal(c->device, "cpu");
	near_iter(c->iter_time_s, &t, 0.019);
	near(c->comm_s, t.comm, 0.009, "communication");
	/* Without kernel records, compute is whatever is not communication. */
	near(c->compute_s, backend == CRUX_TIMING_CUPTI ? t.compute : t.iter - t.comm,
	     0.010 + overlap, "compute");
	near(c->overlap_s, t.overlap, overlap, "overlap");
	near(c->stall_s, t.comm - t.overlap, 0.009 - overlap, "exposed communication");
	assert_int_equal(c->bytes_per_iter[CRUX_COLL_ALLREDUCE], ((1u << 20) * 2 + (1u << 18)) * 4);
	assert_int_equal(c->bytes_per_iter[CRUX_COLL_ALLGATHER], 0);
	check_iterations(c);
	if (c->total_iterations < 40 || c->total_iterations > 80)
		fail_msg("%llu iterations in all, expected 40..80 of the 80 run",
			 (unsigned long long)c->total_iterations);
	assert_int_equal(r.snaps[0].id.rank, 3);
	assert_int_equal(r.snaps[0].id.world_size, 8);
	cleanup(&r);
}

static void test_host_ddp(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", "FAKENCCL_SCRIPT=allreduce=3ms", NULL};

	(void)state;
	ddp_common(need("CRUXP_TEST_FW"), env, CRUX_TIMING_HOST, 0);
}

/* NCCL in the global scope (linked or RTLD_GLOBAL): found through RTLD_NEXT. */
static void test_host_ddp_global(void **state)
{
	const char *env[] = {"FAKENCCL_SCRIPT=allreduce=3ms", NULL};
	char fw[512];

	(void)state;
	snprintf(fw, sizeof(fw), "+%s", need("CRUXP_TEST_FW"));
	/* auto picks the host clock: no CUDA driver in this process */
	ddp_common(fw, env, CRUX_TIMING_HOST, 0);
}

static void test_events_ddp(void **state)
{
	char lib[512];
	const char *env[] = {"CRUX_TIMING=events", "FAKENCCL_SCRIPT=allreduce=3ms", lib, NULL};

	(void)state;
	snprintf(lib, sizeof(lib), "CRUX_CUDART_LIB=%s", need("CRUXP_TEST_CUDART"));
	ddp_common(need("CRUXP_TEST_FW"), env, CRUX_TIMING_EVENTS, 0);
}

static void test_cupti_ddp_overlap(void **state)
{
	char lib[512];
	const char *env[] = {"CRUX_TIMING=cupti", "FAKENCCL_SCRIPT=allreduce=3ms", lib, NULL};

	(void)state;
	snprintf(lib, sizeof(lib), "CRUX_CUPTI_LIB=%s", need("CRUXP_TEST_CUPTI"));
	/* Compute kernels cover the second half of every all-reduce: 1.5 ms each. */
	ddp_common(need("CRUXP_TEST_FW"), env, CRUX_TIMING_CUPTI, 0.0045);
}

/* Another CUPTI subscriber: back off to CUDA events and say so. */
static void test_cupti_busy(void **state)
{
	char lib[512], rt[512];
	const char *env[] = {"CRUX_TIMING=cupti",
			     "FAKECUPTI_BUSY=1",
			     "FAKENCCL_SCRIPT=allreduce=3ms",
			     lib,
			     rt,
			     NULL};
	struct run r;

	(void)state;
	snprintf(lib, sizeof(lib), "CRUX_CUPTI_LIB=%s", need("CRUXP_TEST_CUPTI"));
	snprintf(rt, sizeof(rt), "CRUX_CUDART_LIB=%s", need("CRUXP_TEST_CUDART"));
	run_trainer(&r, need("CRUXP_TEST_FW"), "ddp", 40, 10, env);
	assert_int_equal(only(&r)->timing_backend, CRUX_TIMING_EVENTS);
	assert_non_null(strstr(r.err, "another CUPTI client"));
	cleanup(&r);
}

/* Pipeline stage: grouped send/recv, timed at ncclGroupEnd. */
static void pipeline_common(const char *const *env, uint32_t backend)
{
	const struct crux_prof_compute *c;
	struct truth t;
	struct run r;

	run_trainer(&r, need("CRUXP_TEST_FW"), "pipeline", 100, 8, env);
	c = only(&r);
	t = truth_of(&r, c);
	assert_int_equal(c->timing_backend, backend);
	assert_true(c->flags & CRUX_PROF_F_ITER_DETECTED);
	/* recv 2 ms + (send+recv) 4 ms + send 2 ms of communication, 8 ms compute */
	near_iter(c->iter_time_s, &t, 0.016);
	near(c->comm_s, t.comm, 0.008, "communication");
	near(c->compute_s, t.iter - t.comm, 0.008, "compute");
	assert_int_equal(c->bytes_per_iter[CRUX_COLL_SENDRECV], 4u * (1u << 20) * 2);
	check_iterations(c);
	cleanup(&r);
}

static void test_pipeline(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", "FAKENCCL_SCRIPT=send=2ms,recv=2ms", NULL};

	(void)state;
	pipeline_common(env, CRUX_TIMING_HOST);
}

/* CUDA events around the outermost ncclGroupEnd, on the group's stream. */
static void test_events_pipeline(void **state)
{
	char lib[512];
	const char *env[] = {"CRUX_TIMING=events", "FAKENCCL_SCRIPT=send=2ms,recv=2ms", lib, NULL};

	(void)state;
	snprintf(lib, sizeof(lib), "CRUX_CUDART_LIB=%s", need("CRUXP_TEST_CUDART"));
	pipeline_common(env, CRUX_TIMING_EVENTS);
}

/* CRUX_PRELOAD=0: everything passes straight through, nothing is started. */
static void test_disabled(void **state)
{
	const char *env[] = {"CRUX_PRELOAD=0", NULL};
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW"), "errors", 0, 0, env);
	assert_int_equal(r.status, 0);
	run_trainer(&r, need("CRUXP_TEST_FW"), "ddp", 5, 1, env);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.nsnaps, 0);
	assert_string_equal(r.err, "");
	cleanup(&r);
}

/* Explicit marks win over detection, whatever the call pattern. */
static void test_marks(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", "FAKENCCL_SCRIPT=allreduce=1ms", NULL};
	const struct crux_prof_compute *c;
	struct truth t;
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW"), "mark", 150, 5, env);
	c = only(&r);
	t = truth_of(&r, c);
	assert_true(c->flags & CRUX_PROF_F_ITER_MARKED);
	/* 1, 2 or 3 all-reduces of 1 ms: 2 ms on average */
	near_iter(c->iter_time_s, &t, 0.007);
	near(c->comm_s, t.comm, 0.002, "communication");
	check_iterations(c);
	assert_true(c->total_iterations >= 100);
	cleanup(&r);
}

/* A loss all-reduce every 10 steps does not turn 10 steps into one iteration. */
static void test_loss_noise(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", "FAKENCCL_SCRIPT=allreduce=3ms", NULL};
	const struct crux_prof_compute *c;
	struct truth t;
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW"), "ddp-loss", 80, 10, env);
	c = only(&r);
	t = truth_of(&r, c);
	near_iter(c->iter_time_s, &t, 0.0193);
	check_iterations(c);
	cleanup(&r);
}

static void test_errors_pass_through(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", NULL};
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW"), "errors", 0, 0, env);
	assert_int_equal(r.status, 0);
	cleanup(&r);
}

static void test_no_nccl_untouched(void **state)
{
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW"), "nonccl", 0, 0, NULL);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.nsnaps, 0);
	assert_string_equal(r.err, "");
	cleanup(&r);
}

/* A forked child that trains gets a record of its own; the parent keeps its. */
static void test_fork(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", "FAKENCCL_SCRIPT=allreduce=1ms", NULL};
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW"), "fork", 60, 3, env);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.nsnaps, 2);
	assert_int_not_equal(r.snaps[0].pid, r.snaps[1].pid);
	for (size_t i = 0; i < 2; i++) {
		assert_true(r.snaps[i].has_compute);
		assert_true(r.snaps[i].compute.total_iterations > 0);
	}
	cleanup(&r);
}

/* A bad CRUX_ variable: a clear message, and the job still runs unprofiled. */
static void test_bad_env(void **state)
{
	/* Regression: a bad CRUX_JOB_ID or CRUX_LOG_LEVEL used to leave profiling on. */
	static const char *const cases[][2] = {
	    {"CRUX_TIMING=gpu", "CRUX_TIMING"},
	    {"CRUX_JOB_ID=two words", "CRUX_JOB_ID"},
	    {"CRUX_LOG_LEVEL=loud", "CRUX_LOG_LEVEL"},
	};
	struct run r;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *env[] = {cases[i][0], NULL};
		run_trainer(&r, need("CRUXP_TEST_FW"), "ddp", 5, 1, env);
		assert_int_equal(r.status, 0);
		assert_int_equal(r.nsnaps, 0);
		assert_non_null(strstr(r.err, cases[i][1]));
		cleanup(&r);
	}
}

/*
 * Regression: with no shared-memory directory (no agent) the record is
 * re-tried every window; that must not log every time (here: not at all,
 * as the preload's own message reserves the warning for other failures).
 */
static void test_missing_shm_quiet(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", "CRUX_SHM_DIR=/nonexistent-cxpp/shm",
			     "CRUX_PROFILE_WINDOW=100ms", "CRUX_LOG_LEVEL=info", NULL};
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW"), "ddp", 40, 10, env);
	assert_int_equal(r.status, 0);
	assert_null(strstr(r.err, "profile record"));
	cleanup(&r);
}

/* NCCL built into the framework and bound locally: said once, at exit. */
static void test_static_nccl(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", NULL};
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW_STATIC"), "ddp", 5, 1, env);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.nsnaps, 0);
	assert_non_null(strstr(r.err, "linked statically into"));
	assert_non_null(strstr(r.err, "cruxp-test-fw-static"));
	assert_null(strstr(strstr(r.err, "linked statically") + 1, "linked statically"));
	cleanup(&r);
}

/* With crux_iteration_mark() the record exists and carries the flag. */
static void test_static_nccl_marked(void **state)
{
	const char *env[] = {"CRUX_TIMING=host", NULL};
	struct run r;

	(void)state;
	run_trainer(&r, need("CRUXP_TEST_FW_STATIC"), "mark", 100, 5, env);
	assert_int_equal(only(&r)->flags & CRUX_PROF_F_STATIC_NCCL, CRUX_PROF_F_STATIC_NCCL);
	assert_non_null(strstr(r.err, "linked statically into"));
	cleanup(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host_ddp),
	    cmocka_unit_test(test_host_ddp_global),
	    cmocka_unit_test(test_events_ddp),
	    cmocka_unit_test(test_cupti_ddp_overlap),
	    cmocka_unit_test(test_cupti_busy),
	    cmocka_unit_test(test_pipeline),
	    cmocka_unit_test(test_events_pipeline),
	    cmocka_unit_test(test_disabled),
	    cmocka_unit_test(test_marks),
	    cmocka_unit_test(test_loss_noise),
	    cmocka_unit_test(test_errors_pass_through),
	    cmocka_unit_test(test_no_nccl_untouched),
	    cmocka_unit_test(test_fork),
	    cmocka_unit_test(test_bad_env),
	    cmocka_unit_test(test_missing_shm_quiet),
	    cmocka_unit_test(test_static_nccl),
	    cmocka_unit_test(test_static_nccl_marked),
	};
	const char *only_test = getenv("CRUXP_TEST_ONLY");

	if (only_test)
		cmocka_set_test_filter(only_test);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
