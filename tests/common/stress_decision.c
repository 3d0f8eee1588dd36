/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stress: one writer process publishes >= 10^6 decision-table updates while
 * reader processes look up continuously. Every field the writer publishes is
 * derived from one counter (the generation), so a reader can tell a torn
 * read from a consistent one: any successful lookup whose fields disagree
 * with each other is a torn read, and the test requires zero of them.
 * BUSY answers are allowed but must stay a small fraction. A second phase
 * does the same for the two sections of a profile record (updates / 20,
 * with a 20 us gap between publishes: a profile section is copied whole, so
 * a writer publishing back to back would keep a reader busy by design).
 *
 * CRUX_STRESS_UPDATES overrides the number of table updates (default 10^6).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"
#include "crux/shm.h"
#include "testutil.h"

#define NREADERS      3
#define NJOBS	      4
#define NPEERS	      2
#define TIME_LIMIT_NS (50ull * 1000000000ull)

struct shared {
	_Atomic int start;
	_Atomic int done;
	struct {
		_Atomic uint64_t ok, busy, torn, corrupt, read_all, read_all_busy;
	} r[NREADERS];
};

static uint64_t job_key(int j)
{
	char id[32];
	snprintf(id, sizeof(id), "env:stress-%d", j);
	return crux_job_key_of(id);
}

static void peer_addr(int p, struct crux_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->family = 4;
	a->bytes[0] = 198;
	a->bytes[1] = 18;
	a->bytes[2] = 7;
	a->bytes[3] = (uint8_t)(p + 1);
}

/* Everything published for generation g, job j, peer p follows from (g, j, p). */
static void fill(uint64_t g, struct crux_dt_job *jobs, struct crux_dt_route *routes)
{
	for (int j = 0; j < NJOBS; j++) {
		memset(&jobs[j], 0, sizeof(jobs[j]));
		jobs[j].job_key = job_key(j);
		snprintf(jobs[j].job_id, sizeof(jobs[j].job_id), "env:stress-%d", j);
		jobs[j].level = (uint8_t)((g + (uint64_t)j) % CRUX_MAX_LEVELS);
		jobs[j].state = (uint8_t)((g + (uint64_t)j) % 3);
		for (int p = 0; p < NPEERS; p++) {
			struct crux_dt_route *r = &routes[j * NPEERS + p];
			memset(r, 0, sizeof(*r));
			r->job_key = jobs[j].job_key;
			peer_addr(p, &r->peer);
			uint64_t v = g * 31 + (uint64_t)(j * NPEERS + p);
			r->path_id = (uint16_t)(v & 0x7fff);
			r->nports = (uint8_t)(1 + v % CRUX_ROUTE_MAX_PORTS);
			for (int k = 0; k < r->nports; k++)
				r->ports[k] = (uint16_t)(v + (uint64_t)k * 977);
		}
	}
}

static bool consistent(const struct crux_decision *d, int j, int p,
		       const struct crux_dt_settings *s)
{
	uint64_t g = d->generation;
	if (!d->job_found || !d->route_found)
		return false;
	if (d->level != (g + (uint64_t)j) % CRUX_MAX_LEVELS || d->state != (g + (uint64_t)j) % 3)
		return false;
	if (memcmp(&d->class_map, &s->levels[d->level], sizeof(d->class_map)) != 0)
		return false;
	uint64_t v = g * 31 + (uint64_t)(j * NPEERS + p);
	if (d->path_id != (v & 0x7fff) || d->nports != 1 + v % CRUX_ROUTE_MAX_PORTS)
		return false;
	for (int k = 0; k < d->nports; k++)
		if (d->ports[k] != (uint16_t)(v + (uint64_t)k * 977))
			return false;
	return true;
}

static int reader(const char *dir, struct shared *sh, int idx, const struct crux_dt_settings *s)
{
	struct crux_dt_reader *r;
	struct crux_dt_contents *c = malloc(sizeof(*c));
	if (!c || crux_dt_reader_open(dir, &r) != CRUX_OK)
		return 2;
	struct crux_addr peers[NPEERS];
	uint64_t keys[NJOBS];
	for (int p = 0; p < NPEERS; p++)
		peer_addr(p, &peers[p]);
	for (int j = 0; j < NJOBS; j++)
		keys[j] = job_key(j);
	while (!atomic_load(&sh->start))
		;
	uint64_t n = 0, last_gen = 0;
	while (!atomic_load_explicit(&sh->done, memory_order_relaxed)) {
		int j = (int)(n % NJOBS), p = (int)((n / NJOBS) % NPEERS);
		struct crux_decision d;
		crux_status_t st = crux_dt_lookup(r, keys[j], &peers[p], &d);
		if (st == CRUX_OK) {
			/* Consistent and never older than what this reader already saw. */
			if (d.generation > 1 &&
			    (!consistent(&d, j, p, s) || d.generation < last_gen))
				atomic_fetch_add(&sh->r[idx].torn, 1);
			else
				atomic_fetch_add_explicit(&sh->r[idx].ok, 1, memory_order_relaxed);
			last_gen = d.generation;
		} else if (st == CRUX_ERR_BUSY) {
			atomic_fetch_add(&sh->r[idx].busy, 1);
		} else {
			atomic_fetch_add(&sh->r[idx].corrupt, 1);
		}
		if (++n % 4096 == 0) {
			st = crux_dt_read_all(r, c);
			if (st == CRUX_OK) {
				atomic_fetch_add(&sh->r[idx].read_all, 1);
				bool good = c->njobs == NJOBS || c->generation <= 1;
				for (uint32_t k = 0; good && c->generation > 1 && k < c->njobs; k++)
					good = c->jobs[k].level ==
					       (c->generation + k) % CRUX_MAX_LEVELS;
				if (!good)
					atomic_fetch_add(&sh->r[idx].torn, 1);
			} else if (st == CRUX_ERR_BUSY) {
				atomic_fetch_add(&sh->r[idx].read_all_busy, 1);
			} else {
				atomic_fetch_add(&sh->r[idx].corrupt, 1);
			}
		}
	}
	crux_dt_reader_close(r);
	free(c);
	return 0;
}

static int table_phase(const char *dir, uint64_t updates)
{
	struct crux_dt_settings s;
	crux_dt_settings_default(CRUX_MAX_LEVELS, &s);
	struct crux_dt_writer *w;
	if (crux_dt_writer_open(dir, &s, &w, NULL) != CRUX_OK)
		return 1;
	struct shared *sh =
	    mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	pid_t kids[NREADERS];
	for (int i = 0; i < NREADERS; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			/* Readers spin; on a 2-core machine they must not starve the writer. */
			if (nice(10) == -1)
				perror("nice");
			_exit(reader(dir, sh, i, &s));
		}
	}
	struct crux_dt_job jobs[NJOBS];
	struct crux_dt_route routes[NJOBS * NPEERS];
	uint64_t t0 = crux_now_ns(), published = 0;
	atomic_store(&sh->start, 1);
	for (uint64_t i = 0; i < updates; i++) {
		/* The generation this publish will carry (writer_open published 1). */
		uint64_t g = published + 2;
		fill(g, jobs, routes);
		if (crux_dt_publish(w, jobs, NJOBS, routes, NJOBS * NPEERS) != CRUX_OK) {
			fprintf(stderr, "publish failed at %llu\n", (unsigned long long)i);
			break;
		}
		published++;
		if ((i & 1023) == 0) {
			crux_dt_heartbeat(w);
			if (crux_now_ns() - t0 > TIME_LIMIT_NS) {
				fprintf(stderr, "time limit reached after %llu updates\n",
					(unsigned long long)published);
				break;
			}
		}
	}
	uint64_t t1 = crux_now_ns();
	atomic_store(&sh->done, 1);
	int fail = 0;
	for (int i = 0; i < NREADERS; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "reader %d failed (status 0x%x)\n", i, st);
			fail = 1;
		}
	}
	uint64_t ok = 0, busy = 0, torn = 0, corrupt = 0, ra = 0, rab = 0;
	for (int i = 0; i < NREADERS; i++) {
		ok += sh->r[i].ok;
		busy += sh->r[i].busy;
		torn += sh->r[i].torn;
		corrupt += sh->r[i].corrupt;
		ra += sh->r[i].read_all;
		rab += sh->r[i].read_all_busy;
	}
	printf("decision table: %llu updates in %.2f s; %d readers: %llu consistent lookups, "
	       "%llu busy (%.4f%%), %llu torn, %llu corrupt; read_all %llu ok %llu busy\n",
	       (unsigned long long)published, (double)(t1 - t0) / 1e9, NREADERS,
	       (unsigned long long)ok, (unsigned long long)busy,
	       ok + busy ? 100.0 * (double)busy / (double)(ok + busy) : 0.0,
	       (unsigned long long)torn, (unsigned long long)corrupt, (unsigned long long)ra,
	       (unsigned long long)rab);
	if (published < updates) {
		fprintf(stderr, "FAIL: only %llu of %llu updates\n", (unsigned long long)published,
			(unsigned long long)updates);
		fail = 1;
	}
	if (torn || corrupt) {
		fprintf(stderr, "FAIL: %llu torn and %llu corrupt reads\n",
			(unsigned long long)torn, (unsigned long long)corrupt);
		fail = 1;
	}
	if (ok < 1000) {
		fprintf(stderr, "FAIL: readers made too few lookups (%llu)\n",
			(unsigned long long)ok);
		fail = 1;
	}
	if (busy * 100 > ok + busy) {
		fprintf(stderr, "FAIL: busy answers above 1%%\n");
		fail = 1;
	}
	munmap(sh, sizeof(*sh));
	crux_dt_writer_close(w);
	return fail;
}

/* Profile record: the preload's and the plugin's sections, each from its own counter. */
static int profile_phase(const char *dir, uint64_t updates)
{
	struct crux_prof_identity id;
	memset(&id, 0, sizeof(id));
	snprintf(id.job_id, sizeof(id.job_id), "env:stress");
	id.job_key = crux_job_key_of(id.job_id);
	struct crux_prof_handle *h;
	if (crux_prof_open_self(dir, &id, &h) != CRUX_OK)
		return 1;
	char name[96], path[300];
	uint64_t start;
	crux_proc_start_time(getpid(), &start);
	crux_prof_name(getpid(), start, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	struct shared *sh =
	    mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	pid_t kid = fork();
	if (kid == 0) {
		if (nice(10) == -1)
			perror("nice");
		int fd = open(path, O_RDONLY);
		size_t size = crux_prof_file_size();
		void *base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		struct crux_prof_snapshot *s = malloc(sizeof(*s));
		if (fd < 0 || base == MAP_FAILED || !s)
			_exit(2);
		while (!atomic_load(&sh->start))
			;
		while (!atomic_load_explicit(&sh->done, memory_order_relaxed)) {
			crux_status_t st =
			    crux_prof_validate_buffer(base, size, getppid(), start, s, NULL, 0);
			if (st == CRUX_ERR_BUSY) {
				atomic_fetch_add(&sh->r[0].busy, 1);
				continue;
			}
			bool good = st == CRUX_OK;
			uint64_t c = s->compute.windows;
			good = good && s->compute.iterations == c * 3 &&
			       s->compute.total_iterations == c * 7 &&
			       s->compute.bytes_per_iter[CRUX_COLL_KINDS - 1] == c * 11;
			uint64_t n = s->net.update_ns;
			good = good && s->net.npeers == n % CRUX_PROF_MAX_PEERS;
			for (uint32_t i = 0; good && i < s->net.npeers; i++)
				good = s->net.peers[i].tx_bytes[i % CRUX_MAX_LEVELS] == n + i;
			if (good)
				atomic_fetch_add(&sh->r[0].ok, 1);
			else
				atomic_fetch_add(&sh->r[0].torn, 1);
		}
		_exit(0);
	}
	struct crux_prof_compute c;
	struct crux_prof_net *n = calloc(1, sizeof(*n));
	memset(&c, 0, sizeof(c));
	atomic_store(&sh->start, 1);
	for (uint64_t i = 1; i <= updates; i++) {
		c.windows = i;
		c.iterations = i * 3;
		c.total_iterations = i * 7;
		c.bytes_per_iter[CRUX_COLL_KINDS - 1] = i * 11;
		crux_prof_publish_compute(h, &c);
		n->update_ns = i;
		n->npeers = (uint32_t)(i % CRUX_PROF_MAX_PEERS);
		for (uint32_t k = 0; k < n->npeers; k++) {
			n->peers[k].peer.family = 4;
			n->peers[k].tx_bytes[k % CRUX_MAX_LEVELS] = i + k;
		}
		crux_prof_publish_net(h, n);
		/* Real writers publish every few ms at most; a 20 us gap still
		 * publishes ~5*10^4 times per second per section. */
		uint64_t until = crux_now_ns() + 20000;
		while (crux_now_ns() < until)
			;
	}
	atomic_store(&sh->done, 1);
	int st;
	waitpid(kid, &st, 0);
	printf("profile record: %llu updates per section: %llu consistent reads, %llu busy, "
	       "%llu torn\n",
	       (unsigned long long)updates, (unsigned long long)sh->r[0].ok,
	       (unsigned long long)sh->r[0].busy, (unsigned long long)sh->r[0].torn);
	int fail = !WIFEXITED(st) || WEXITSTATUS(st) != 0 || sh->r[0].torn != 0 ||
		   sh->r[0].ok < 100 || sh->r[0].busy * 100 > sh->r[0].ok + sh->r[0].busy;
	free(n);
	crux_prof_close(h);
	munmap(sh, sizeof(*sh));
	return fail;
}

int main(void)
{
	long long updates = 1000000;
	char err[256];
	if (crux_env_int(NULL, NULL, "CRUX_STRESS_UPDATES", 1000000, 1, 1000000000, &updates, err,
			 sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct tu_dirs d;
	tu_dirs_make(&d);
	int fail = table_phase(d.shm, (uint64_t)updates);
	if (!fail)
		fail = profile_phase(d.shm, (uint64_t)updates / 20);
	tu_dirs_remove(&d);
	printf("%s\n", fail ? "FAIL" : "PASS");
	return fail;
}
