/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the front-ends call besides start and stop: who they are, who of the
 * two publishes, and iteration marks.
 */
#include "collect_int.h"
#include "crux/clock.h"

void cruxc_set_source(enum cruxc_source source, int (*device)(void))
{
	if (device && cruxc_ctx.device_ordinal < 0)
		cruxc_ctx.device_ordinal = device();
	cruxc_ctx.source = source;
}

enum cruxc_source cruxc_source(void)
{
	return (enum cruxc_source)cruxc_ctx.source;
}

int cruxc_claim(int source, void (*mark)(void))
{
	int none = CRUXC_SRC_NONE;

	if (source != CRUXC_SRC_PRELOAD && source != CRUXC_SRC_PROFILER)
		return atomic_load(&cruxc_ctx.publisher);
	if (atomic_compare_exchange_strong(&cruxc_ctx.publisher, &none, source)) {
		if (source == CRUXC_SRC_PROFILER && mark)
			atomic_store(&cruxc_ctx.mark, mark);
		return source;
	}
	return none; /* the winner */
}

bool cruxc_stand_down(void)
{
	int uninit = CRUXC_ST_UNINIT;

	return atomic_compare_exchange_strong(&cruxc_hot.state, &uninit, CRUXC_ST_OFF);
}

int cruxc_publisher(void)
{
	return atomic_load(&cruxc_ctx.publisher);
}

void cruxc_mark(uint64_t t)
{
	struct cruxc_call c = {0};

	if (!cruxc_active())
		return;
	if (!atomic_load_explicit(&cruxc_hot.marked, memory_order_relaxed))
		atomic_store(&cruxc_hot.marked, true);
	c.t_enter = c.t_exit = t;
	c.op = CRUXC_OP_MARK;
	c.peer = -1;
	c.ev_slot = UINT32_MAX;
	cruxc_push(&c);
}

void cruxc_iteration_mark(void)
{
	void (*other)(void) = atomic_load(&cruxc_ctx.mark);

	if (other) {
		other(); /* the profiler plugin publishes this process's record */
		return;
	}
	cruxc_start(0, -1, -1);
	cruxc_mark(crux_now_ns());
}
