/* SPDX-License-Identifier: Apache-2.0 */
/* Profile records: create/open race, names, sections, read, scan, reaping, corruption. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"
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

static void make_identity(struct crux_prof_identity *id, const char *job, int rank)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->job_id, sizeof(id->job_id), "%s", job);
	id->job_key = crux_job_key_of(job);
	snprintf(id->hostname, sizeof(id->hostname), "host-a");
	crux_addr_parse("198.18.0.1", &id->host_addr);
	id->rank = rank;
	id->world_size = 8;
	id->local_rank = rank % 4;
}

static void self_name(char *buf, size_t len)
{
	uint64_t start;
	assert_int_equal(crux_proc_start_time(getpid(), &start), CRUX_OK);
	crux_prof_name(getpid(), start, buf, len);
}

static int count_files(const char *dir, const char *prefix)
{
	DIR *dd = opendir(dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dd)) != NULL)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(dd);
	return n;
}

static void test_names(void **state)
{
	(void)state;
	char buf[96];
	pid_t pid;
	uint64_t start;
	crux_prof_name(1234, 567890, buf, sizeof(buf));
	assert_string_equal(buf, "prof-1234-567890.rec");
	assert_true(crux_prof_parse_name(buf, &pid, &start));
	assert_int_equal(pid, 1234);
	assert_true(start == 567890);
	const char *bad[] = {"prof-.rec",
			     "prof-12.rec",
			     "prof-12-.rec",
			     "prof--5.rec",
			     "prof-012-5.rec",
			     "prof-12-5.rec.tmp",
			     "prof-12-5x.rec",
			     "prof-0-5.rec",
			     "prof-99999999999-5.rec",
			     "prof-1-99999999999999999999.rec",
			     "xprof-1-2.rec",
			     "prof-+1-2.rec",
			     "prof-1-2-3.rec",
			     ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(crux_prof_parse_name(bad[i], &pid, &start));
	assert_true(crux_prof_parse_name("prof-1-0.rec", &pid, &start));
}

static void test_open_self_twice(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_prof_identity id1, id2;
	struct crux_prof_handle *preload, *plugin;
	char name[96];
	make_identity(&id1, "env:job1", 3);
	make_identity(&id2, "env:other", 5);

	mode_t old = umask(077);
	assert_int_equal(crux_prof_open_self(d->shm, &id1, &preload), CRUX_OK);
	umask(old);
	assert_int_equal(crux_prof_open_self(d->shm, &id2, &plugin), CRUX_OK);
	assert_int_equal(count_files(d->shm, "prof-"), 1);
	assert_int_equal(count_files(d->shm, ".tmp"), 0);
	self_name(name, sizeof(name));
	char path[300];
	snprintf(path, sizeof(path), "%s/%s", d->shm, name);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0644);

	struct crux_prof_compute c;
	memset(&c, 0, sizeof(c));
	c.windows = 2;
	c.iterations = 10;
	c.iter_time_s = 0.5;
	c.compute_s = 0.3;
	c.comm_s = 0.25;
	c.overlap_s = 0.1;
	c.stall_s = 0.15;
	c.bytes_per_iter[CRUX_COLL_ALLREDUCE] = 1u << 20;
	c.timing_backend = CRUX_TIMING_HOST;
	c.flags = CRUX_PROF_F_ITER_DETECTED;
	snprintf(c.device, sizeof(c.device), "cpu");

	struct crux_prof_snapshot *snap = calloc(1, sizeof(*snap));
	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	assert_false(snap->has_compute);
	assert_false(snap->has_net);
	assert_string_equal(snap->id.job_id, "env:job1"); /* the creator's identity */
	assert_int_equal(snap->id.rank, 3);
	assert_int_equal(snap->pid, getpid());
	assert_string_equal(snap->file, path);

	crux_prof_publish_compute(preload, &c);
	struct crux_prof_net *n = calloc(1, sizeof(*n));
	n->update_ns = 42;
	n->npeers = 2;
	crux_addr_parse("198.18.0.2", &n->peers[0].peer);
	crux_addr_parse("198.18.0.3", &n->peers[1].peer);
	n->peers[0].tx_bytes[3] = 1000;
	n->peers[1].rx_bytes[0] = 77;
	n->busy_ns = 9000;
	n->busy_window_ns = 5000;
	n->busy_period_ns = 1234;
	n->nbusy_hist = 2;
	n->busy_hist[0] = (struct crux_prof_busy_sample){10, 100};
	n->busy_hist[1] = (struct crux_prof_busy_sample){42, 9000};
	crux_prof_publish_net(plugin, n);

	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	/* v5: the plugin's busy time goes through publish and read */
	assert_true(snap->net.busy_ns == 9000 && snap->net.busy_window_ns == 5000 &&
		    snap->net.busy_period_ns == 1234);
	/* v6: and its history */
	assert_int_equal(snap->net.nbusy_hist, 2);
	assert_true(snap->net.busy_hist[0].t_ns == 10 && snap->net.busy_hist[1].busy_ns == 9000);
	assert_true(snap->has_compute);
	assert_true(snap->has_net);
	assert_true(snap->compute.iter_time_s == 0.5);
	assert_true(snap->compute.bytes_per_iter[CRUX_COLL_ALLREDUCE] == 1u << 20);
	assert_string_equal(snap->compute.device, "cpu");
	assert_int_equal(snap->net.npeers, 2);
	assert_true(snap->net.peers[0].tx_bytes[3] == 1000);
	assert_true(snap->net.peers[1].rx_bytes[0] == 77);

	/* too many peers are clamped at publish */
	n->npeers = 1000;
	for (int i = 0; i < CRUX_PROF_MAX_PEERS; i++)
		n->peers[i].peer.family = 4;
	crux_prof_publish_net(plugin, n);
	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	assert_int_equal(snap->net.npeers, CRUX_PROF_MAX_PEERS);

	crux_prof_close(preload);
	crux_prof_close(plugin);
	assert_int_equal(crux_prof_remove_self(d->shm), CRUX_OK);
	assert_int_equal(crux_prof_remove_self(d->shm), CRUX_ERR_NOENT);
	assert_int_equal(count_files(d->shm, "prof-"), 0);
	free(n);
	free(snap);
}

struct race_arg {
	const char *dir;
	pthread_barrier_t *barrier;
	struct crux_prof_handle *h;
	crux_status_t st;
	struct crux_prof_identity id;
};

static void *race_thread(void *p)
{
	struct race_arg *a = p;
	pthread_barrier_wait(a->barrier);
	a->st = crux_prof_open_self_ex(a->dir, &a->id, &a->h, NULL, 0);
	return NULL;
}

static void test_open_self_race(void **state)
{
	struct tu_dirs *d = *state;
	pthread_barrier_t barrier;
	for (int round = 0; round < 50; round++) {
		struct race_arg a[2];
		pthread_t t[2];
		pthread_barrier_init(&barrier, NULL, 2);
		for (int i = 0; i < 2; i++) {
			memset(&a[i], 0, sizeof(a[i]));
			a[i].dir = d->shm;
			a[i].barrier = &barrier;
			make_identity(&a[i].id, i ? "env:plugin" : "env:preload", i);
			pthread_create(&t[i], NULL, race_thread, &a[i]);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&barrier);
		assert_int_equal(a[0].st, CRUX_OK);
		assert_int_equal(a[1].st, CRUX_OK);
		assert_int_equal(count_files(d->shm, "prof-"), 1);
		assert_int_equal(count_files(d->shm, ".tmp"), 0);
		/* both write into the same file */
		struct crux_prof_compute c;
		memset(&c, 0, sizeof(c));
		c.windows = (uint64_t)round + 1;
		crux_prof_publish_compute(a[0].h, &c);
		struct crux_prof_net n;
		memset(&n, 0, sizeof(n));
		n.update_ns = (uint64_t)round + 100;
		crux_prof_publish_net(a[1].h, &n);
		char name[96];
		self_name(name, sizeof(name));
		struct crux_prof_snapshot *snap = calloc(1, sizeof(*snap));
		assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
		assert_true(snap->compute.windows == (uint64_t)round + 1);
		assert_true(snap->net.update_ns == (uint64_t)round + 100);
		free(snap);
		crux_prof_close(a[0].h);
		crux_prof_close(a[1].h);
		assert_int_equal(crux_prof_remove_self(d->shm), CRUX_OK);
	}
}

static void test_open_self_errors(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_prof_identity id;
	struct crux_prof_handle *h = NULL;
	char err[512], missing[200];
	make_identity(&id, "env:x", 0);
	snprintf(missing, sizeof(missing), "%s/absent", d->base);
	assert_int_equal(crux_prof_open_self_ex(missing, &id, &h, err, sizeof(err)),
			 CRUX_ERR_NOENT);
	assert_null(h);
	struct stat sb;
	assert_int_equal(stat(missing, &sb), -1); /* never created by a training process */
	chmod(d->shm, 0777);
	assert_int_equal(crux_prof_open_self_ex(d->shm, &id, &h, err, sizeof(err)), CRUX_ERR_PERM);
	chmod(d->shm, 0755);
	/* a foreign file under our name is replaced by the record (written, never mapped) */
	char name[96], path[300];
	self_name(name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", d->shm, name);
	tu_write_file(path, "garbage", 7, 0644);
	assert_int_equal(crux_prof_open_self_ex(d->shm, &id, &h, err, sizeof(err)), CRUX_OK);
	struct crux_prof_snapshot *snap = calloc(1, sizeof(*snap));
	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	assert_string_equal(snap->id.job_id, "env:x");
	/* truncated, then removed: each costs one mirror write */
	struct crux_prof_compute c;
	memset(&c, 0, sizeof(c));
	assert_int_equal(truncate(path, 100), 0);
	c.windows = 7;
	crux_prof_publish_compute(h, &c);
	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	assert_true(snap->compute.windows == 7);
	assert_int_equal(unlink(path), 0);
	c.windows = 8;
	crux_prof_publish_compute(h, &c);
	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	assert_true(snap->compute.windows == 8);
	/* grown: rewritten whole at the next publish */
	assert_int_equal(truncate(path, 1 << 20), 0);
	c.windows = 9;
	crux_prof_publish_compute(h, &c);
	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	assert_true(snap->compute.windows == 9);
	/* scribbled in place (identity and the other section): repaired by the next publish */
	char junk[2048];
	memset(junk, 0xa5, sizeof(junk));
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof(junk), 64), (ssize_t)sizeof(junk));
	assert_int_equal(pwrite(fd, junk, sizeof(junk), 6000), (ssize_t)sizeof(junk));
	close(fd);
	assert_int_not_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	c.windows = 10;
	crux_prof_publish_compute(h, &c);
	assert_int_equal(crux_prof_read(d->shm, name, snap), CRUX_OK);
	assert_true(snap->compute.windows == 10);
	assert_string_equal(snap->id.job_id, "env:x");
	free(snap);
	crux_prof_close(h);
	unlink(path);
}

struct visit {
	int calls;
	int stop_after;
	pid_t pids[8];
};

static int visit_fn(void *arg, const struct crux_prof_snapshot *snap)
{
	struct visit *v = arg;
	if (v->calls < 8)
		v->pids[v->calls] = snap->pid;
	v->calls++;
	return v->stop_after && v->calls >= v->stop_after;
}

/* Copy a file's bytes (test fixtures). */
static void *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	void *buf = malloc((size_t)n);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void test_scan_and_reap(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_prof_identity id;
	struct crux_prof_handle *h;
	struct crux_prof_scan_stats st;
	struct visit v;
	make_identity(&id, "env:me", 0);
	assert_int_equal(crux_prof_open_self(d->shm, &id, &h), CRUX_OK);

	/* a child creates its record and exits */
	pid_t child = fork();
	if (child == 0) {
		struct crux_prof_identity cid;
		struct crux_prof_handle *ch;
		make_identity(&cid, "env:child", 1);
		if (crux_prof_open_self(d->shm, &cid, &ch) != CRUX_OK)
			_exit(1);
		struct crux_prof_compute c;
		memset(&c, 0, sizeof(c));
		c.windows = 9;
		crux_prof_publish_compute(ch, &c);
		crux_prof_close(ch);
		_exit(0);
	}
	int status;
	waitpid(child, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(count_files(d->shm, "prof-"), 2);

	/* without REAP both are valid */
	memset(&v, 0, sizeof(v));
	assert_int_equal(crux_prof_scan(d->shm, 0, visit_fn, &v, &st), CRUX_OK);
	assert_int_equal(st.valid, 2);
	assert_int_equal(st.reaped, 0);
	assert_int_equal(v.calls, 2);
	/* stop early */
	memset(&v, 0, sizeof(v));
	v.stop_after = 1;
	assert_int_equal(crux_prof_scan(d->shm, 0, visit_fn, &v, NULL), CRUX_OK);
	assert_int_equal(v.calls, 1);

	/* a temp file of a dead creator */
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%d-%d-0-prof-x", d->shm, (int)child, (int)child);
	tu_write_file(tmp, "x", 1, 0644);

	memset(&v, 0, sizeof(v));
	assert_int_equal(crux_prof_scan(d->shm, CRUX_PROF_SCAN_REAP, visit_fn, &v, &st), CRUX_OK);
	assert_int_equal(st.valid, 1);
	assert_int_equal(st.reaped, 1);
	assert_int_equal(st.invalid, 0);
	assert_int_equal(v.calls, 1);
	assert_int_equal(v.pids[0], getpid());
	assert_int_equal(count_files(d->shm, "prof-"), 1);
	assert_int_equal(count_files(d->shm, ".tmp"), 0);
	crux_prof_close(h);
}

static void test_scan_invalid(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_prof_identity id;
	struct crux_prof_handle *h;
	struct crux_prof_scan_stats st;
	struct tu_log cap = {0};
	char path[300], name[96], err[768];
	make_identity(&id, "env:me", 0);
	assert_int_equal(crux_prof_open_self(d->shm, &id, &h), CRUX_OK);
	struct crux_prof_net n;
	memset(&n, 0, sizeof(n));
	n.update_ns = 0x1122334455667788ull;
	n.npeers = 1;
	n.peers[0].peer.family = 4;
	crux_prof_publish_net(h, &n);
	self_name(name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", d->shm, name);
	size_t len;
	unsigned char *good = slurp(path, &len);
	assert_true(len == crux_prof_file_size());

	/* Invalid records must have the name of a live process, or REAP removes them:
	 * use the parent's identity (alive while this test runs). */
	pid_t pp = getppid();
	uint64_t pstart;
	assert_int_equal(crux_proc_start_time(pp, &pstart), CRUX_OK);
	char pname[96], ppath[300];
	crux_prof_name(pp, pstart, pname, sizeof(pname));
	snprintf(ppath, sizeof(ppath), "%s/%s", d->shm, pname);

	struct crux_prof_snapshot *snap = calloc(1, sizeof(*snap));
	crux_log_once_reset();
	crux_log_set_sink(tu_log_sink, &cap);

	/* our record copied under the parent's name: header names another process */
	tu_write_file(ppath, good, len, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "header names process"));
	assert_int_equal(crux_prof_scan(d->shm, CRUX_PROF_SCAN_REAP, NULL, NULL, &st), CRUX_OK);
	assert_int_equal(st.valid, 1);
	assert_int_equal(st.invalid, 1);
	assert_int_equal(cap.lines, 1);
	assert_non_null(strstr(cap.last, pname));
	/* logged once per file, not on every scan */
	assert_int_equal(crux_prof_scan(d->shm, CRUX_PROF_SCAN_REAP, NULL, NULL, &st), CRUX_OK);
	assert_int_equal(st.invalid, 1);
	assert_int_equal(cap.lines, 1);

	/* fix the header pid/start: valid */
	unsigned char *bad = malloc(len);
	memcpy(bad, good, len);
	struct crux_shm_header hh;
	memcpy(&hh, bad, sizeof(hh));
	hh.writer_pid = (uint32_t)pp;
	hh.writer_start_time = pstart;
	memcpy(bad, &hh, sizeof(hh));
	tu_write_file(ppath, bad, len, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)), CRUX_OK);

	/* npeers out of bounds: find the net section by its marker */
	size_t off = 0;
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t x;
		memcpy(&x, bad + i, 8);
		if (x == 0x1122334455667788ull) {
			off = i + 8;
			break;
		}
	}
	assert_true(off > 0);
	uint32_t huge = 100000;
	memcpy(bad + off, &huge, 4);
	tu_write_file(ppath, bad, len, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "100000 peers"));
	uint32_t one = 1;
	memcpy(bad + off, &one, 4);
	/* unterminated strings in the identity */
	memset(bad + 64 + 8, 'A', CRUX_JOB_ID_LEN);
	tu_write_file(ppath, bad, len, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	/* wrong version */
	memcpy(bad, good, len);
	memcpy(bad, &hh, sizeof(hh));
	((struct crux_shm_header *)(void *)bad)->layout_version = CRUX_PROF_VERSION + 1;
	tu_write_file(ppath, bad, len, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_VERSION);
	/*
	 * Records of the previous layouts (v4: no busy time in the net section,
	 * 10,368 bytes; v5: no busy history, 10,432 bytes) are refused by their
	 * version, with the fix named.
	 */
	((struct crux_shm_header *)(void *)bad)->layout_version = 4;
	tu_write_file(ppath, bad, 10368, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_VERSION);
	assert_non_null(strstr(err, "layout version 4, but this build reads version 6"));
	assert_non_null(strstr(err, "same version everywhere"));
	((struct crux_shm_header *)(void *)bad)->layout_version = 5;
	tu_write_file(ppath, bad, 10432, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_VERSION);
	assert_non_null(strstr(err, "layout version 5, but this build reads version 6"));
	/* wrong magic */
	((struct crux_shm_header *)(void *)bad)->layout_version = CRUX_PROF_VERSION;
	((struct crux_shm_header *)(void *)bad)->magic = 0x12345678;
	tu_write_file(ppath, bad, len, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "wrong magic"));
	/* truncated */
	tu_write_file(ppath, good, len / 2, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "bytes"));
	/* garbage */
	for (size_t i = 0; i < len; i++)
		bad[i] = (unsigned char)(i * 7919u >> 3);
	tu_write_file(ppath, bad, len, 0644);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);

	/* a bad name, a symlink and a directory among the records */
	char junk[300];
	snprintf(junk, sizeof(junk), "%s/prof-abc.rec", d->shm);
	tu_write_file(junk, "x", 1, 0644);
	char link[300];
	snprintf(link, sizeof(link), "%s/prof-%d-%llu.rec", d->shm, (int)pp,
		 (unsigned long long)pstart + 0);
	/* (that is ppath itself: replace it with a symlink to our good record) */
	unlink(ppath);
	assert_int_equal(symlink(path, link), 0);
	cap.lines = 0;
	crux_log_once_reset();
	assert_int_equal(crux_prof_scan(d->shm, 0, NULL, NULL, &st), CRUX_OK);
	assert_int_equal(st.valid, 1);
	assert_int_equal(st.invalid, 2);
	assert_int_equal(cap.lines, 2);
	assert_int_equal(crux_prof_read_ex(d->shm, pname, snap, err, sizeof(err)), CRUX_ERR_PERM);
	assert_non_null(strstr(err, "symbolic link"));
	crux_log_set_sink(NULL, NULL);

	/* validate on a buffer: any prefix of a good record is refused without a crash */
	uint64_t *al = aligned_alloc(64, (len + 63) / 64 * 64);
	memcpy(al, good, len);
	assert_int_equal(crux_prof_validate_buffer(al, len, 0, 0, snap, NULL, 0), CRUX_OK);
	for (size_t cut = 0; cut < len; cut += 97)
		assert_int_equal(crux_prof_validate_buffer(al, cut, 0, 0, snap, NULL, 0),
				 CRUX_ERR_CORRUPT);
	free(al);
	free(bad);
	free(good);
	free(snap);
	crux_prof_close(h);
}

static void test_scan_dir_errors(void **state)
{
	struct tu_dirs *d = *state;
	char missing[200];
	struct crux_prof_scan_stats st = {1, 1, 1, 1};
	snprintf(missing, sizeof(missing), "%s/absent", d->base);
	assert_int_equal(crux_prof_scan(missing, 0, NULL, NULL, &st), CRUX_ERR_NOENT);
	assert_int_equal(st.valid, 1); /* untouched */
	chmod(d->shm, 0757);
	assert_int_equal(crux_prof_scan(d->shm, 0, NULL, NULL, &st), CRUX_ERR_PERM);
	chmod(d->shm, 0755);
	assert_int_equal(crux_prof_scan(d->shm, 0, NULL, NULL, &st), CRUX_OK);
	assert_int_equal(st.valid + st.invalid + st.busy + st.reaped, 0);
}

/*
 * A training process of another user than the agent (root here): it can read
 * the decision table but not write it, and is told why it cannot create its
 * profile record. Needs root to switch users; skipped otherwise.
 */
static void test_other_user(void **state)
{
	struct tu_dirs *d = *state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	crux_dt_settings_default(4, &s);
	assert_int_equal(crux_dt_writer_open(d->shm, &s, &w, NULL), CRUX_OK);
	struct crux_dt_job j;
	memset(&j, 0, sizeof(j));
	snprintf(j.job_id, sizeof(j.job_id), "env:u");
	j.job_key = crux_job_key_of(j.job_id);
	j.level = 3;
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	chmod(d->base, 0755);
	pid_t child = fork();
	if (child == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(10);
		struct crux_dt_reader *r;
		struct crux_decision dec;
		char err[512];
		if (crux_dt_reader_open_ex(d->shm, &r, err, sizeof(err)) != CRUX_OK)
			_exit(11);
		if (crux_dt_lookup(r, j.job_key, NULL, &dec) != CRUX_OK || dec.level != 3)
			_exit(12);
		crux_dt_reader_close(r);
		struct crux_dt_writer *w2;
		if (crux_dt_writer_open_ex(d->shm, &s, &w2, NULL, err, sizeof(err)) !=
		    CRUX_ERR_PERM)
			_exit(13);
		struct crux_prof_identity id;
		struct crux_prof_handle *h;
		make_identity(&id, "env:u", 0);
		if (crux_prof_open_self_ex(d->shm, &id, &h, err, sizeof(err)) != CRUX_ERR_PERM ||
		    !strstr(err, "chown 65534"))
			_exit(14);
		_exit(0);
	}
	int status = 0;
	waitpid(child, &status, 0);
	chmod(d->base, 0700);
	crux_dt_writer_close(w);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int copies_cb(void *arg, const struct crux_prof_snapshot *s)
{
	struct crux_prof_snapshot *out = arg;
	*out = *s;
	return 0;
}

/*
 * cruxd's copies of attached records: written with the kernel's pid, start
 * time and uid, rewritten when damaged, removed when the process is gone.
 */
static void test_agent_copies(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_prof_copies *c = NULL;
	struct crux_prof_snapshot *s = calloc(1, sizeof(*s)), *got = calloc(1, sizeof(*got));
	struct crux_prof_scan_stats st;
	char err[512], adir[300], path[400];
	assert_int_equal(crux_prof_copies_open(d->shm, &c, err, sizeof(err)), CRUX_OK);
	snprintf(adir, sizeof(adir), "%s/%s", d->shm, CRUX_PROF_ATTACHED_DIR);
	make_identity(&s->id, "env:copied", 3);
	s->pid = 4242;
	s->start_time = 77;
	s->uid = 1234;
	s->has_net = true;
	s->net.npeers = 1;
	s->net.peers[0].peer.family = 4;
	s->net.peers[0].tx_bytes[2] = 999;
	for (int pass = 0; pass < 3; pass++) {
		crux_prof_copies_begin(c);
		crux_prof_copies_put(c, s);
		crux_prof_copies_end(c);
		memset(got, 0, sizeof(*got));
		assert_int_equal(
		    crux_prof_scan(adir, CRUX_PROF_SCAN_AGENT_COPIES, copies_cb, got, &st),
		    CRUX_OK);
		assert_int_equal(st.valid, 1);
		assert_int_equal(got->pid, 4242);
		assert_true(got->uid == 1234 && got->attached);
		assert_string_equal(got->id.job_id, "env:copied");
		assert_true(got->net.peers[0].tx_bytes[2] == 999);
		/* damage between passes: truncated, then scribbled over */
		snprintf(path, sizeof(path), "%s/prof-4242-77.rec", adir);
		if (pass == 0)
			assert_int_equal(truncate(path, 10), 0);
		else if (pass == 1)
			tu_write_file(path, "junk", 4, 0644);
	}
	/* the process detached: its copy goes at the end of the next pass */
	crux_prof_copies_begin(c);
	crux_prof_copies_end(c);
	assert_int_equal(crux_prof_scan(adir, CRUX_PROF_SCAN_AGENT_COPIES, copies_cb, got, &st),
			 CRUX_OK);
	assert_int_equal(st.valid + st.invalid, 0);
	crux_prof_copies_close(c, true);
	struct stat sb;
	assert_int_equal(stat(adir, &sb), -1);
	free(s);
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test_setup_teardown(test_open_self_twice, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_self_race, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_self_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_and_reap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_invalid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_dir_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_user, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_agent_copies, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
