/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the scheduler benchmarks share: one seeded random stream (splitmix64,
 * so every bench draws the same numbers from the same seed) and the small
 * optimality case (a 2:1 Clos of 2-4 ToRs, ring all-reduce jobs), so that
 * sched-optimality and sched-optimality-honest score the very same cases.
 */
#ifndef CRUX_BENCH_SCHED_CASES_H
#define CRUX_BENCH_SCHED_CASES_H

#include <stdint.h>

#include "crux/sched.h"

struct crux_json;
/* The "paper" member: Fig. 7's percent of optimum per mechanism, for comparison. */
void crux_bench_json_paper(struct crux_json *j);

uint64_t crux_bench_rnd(uint64_t *s);
double crux_bench_urand(uint64_t *s, double lo, double hi);

/* NJ jobs (at most 16) of 2-4 hosts each on a topology of at most 64 links;
 * NULL, or what went wrong. The caller frees *t and *js. */
const char *crux_bench_small_case(uint64_t seed, int nj, struct crux_sched_topo **t,
				  struct crux_sched_jobs *js);

/* Eleven 100 G hosts on one switch (h0..h10): jobs that all send into h0
 * share its one link. NULL, or what went wrong; the caller frees *t. */
const char *crux_bench_single_link(struct crux_sched_topo **t);

#endif
