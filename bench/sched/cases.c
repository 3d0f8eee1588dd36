/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler benchmarks' random stream and small optimality case (cases.h). */
#include <string.h>

#include "cases.h"
#include "crux/json.h"

uint64_t crux_bench_rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	uint64_t x = *s;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

double crux_bench_urand(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (double)(crux_bench_rnd(s) >> 11) / 9007199254740992.0;
}

const char *crux_bench_small_case(uint64_t seed, int nj, struct crux_sched_topo **t,
				  struct crux_sched_jobs *js)
{
	static const double ov[4] = {0, 0.25, 0.5, 0.75};
	static struct crux_sched_err err;
	struct crux_sched_clos2_params cp;
	int used[20] = {0};

	if (nj < 1 || nj > 16)
		return "the case needs 1 to 16 jobs";
	cp.n_tor = 2 + (int)(crux_bench_rnd(&seed) % 3);
	cp.n_agg = 2;
	int hosts = cp.n_tor * 2 + (int)(crux_bench_rnd(&seed) % (unsigned)(20 - cp.n_tor * 2 + 1));

	cp.hosts_per_tor = hosts / cp.n_tor;
	cp.tor_uplinks = 1;
	cp.host_gbps = 100;
	cp.tor_gbps = 100;
	if (crux_sched_topo_clos2(&cp, t, &err))
		return err.msg;
	if (crux_sched_topo_n_links(*t) > 64)
		return "more than 64 links";
	int nh = crux_sched_topo_n_hosts(*t), free_hosts = nh;

	crux_sched_jobs_init(js);
	for (int j = 0; j < nj; j++) {
		int k = 2 + (int)(crux_bench_rnd(&seed) % 3), h[4];

		/* distinct hosts within a job; a used host only once every free one is taken */
		for (int a = 0; a < k; a++) {
			int ok;

			do {
				h[a] = (int)(crux_bench_rnd(&seed) % (unsigned)nh);
				ok = !(free_hosts >= k - a && used[h[a]]);
				for (int b = 0; b < a; b++)
					ok &= h[b] != h[a];
			} while (!ok);
			if (!used[h[a]]) {
				used[h[a]] = 1;
				free_hosts--;
			}
		}
		struct crux_sched_job jb = {.id = (uint64_t)j + 1,
					    .gpus = 8 * k,
					    .n_hosts = k,
					    .hosts = h,
					    .compute = crux_bench_urand(&seed, 0.05, 0.5),
					    .overlap = ov[crux_bench_rnd(&seed) % 4]};

		jb.work = jb.gpus * jb.compute;
		if (crux_sched_jobs_add(js, &jb) ||
		    crux_sched_jobs_add_ring(js, js->n - 1, crux_bench_urand(&seed, 1e8, 2e9)))
			return "out of memory";
	}
	return NULL;
}

const char *crux_bench_single_link(struct crux_sched_topo **t)
{
	static struct crux_sched_err err;
	const char *txt = "host h0 h1 h2 h3 h4 h5 h6 h7 h8 h9 h10\nswitch s\n"
			  "link h0 s 100\nlink h1 s 100\nlink h2 s 100\nlink h3 s 100\n"
			  "link h4 s 100\nlink h5 s 100\nlink h6 s 100\nlink h7 s 100\n"
			  "link h8 s 100\nlink h9 s 100\nlink h10 s 100\n";

	return crux_sched_topo_parse(txt, strlen(txt), "single", t, &err) ? err.msg : NULL;
}

void crux_bench_json_paper(struct crux_json *j)
{
	crux_json_key(j, "paper");
	crux_json_obj(j);
	crux_json_key(j, "paths");
	crux_json_numf(j, "%.2f", 97.69);
	crux_json_key(j, "priority");
	crux_json_numf(j, "%.2f", 97.24);
	crux_json_key(j, "compression");
	crux_json_numf(j, "%.2f", 97.12);
	crux_json_end_obj(j);
}
