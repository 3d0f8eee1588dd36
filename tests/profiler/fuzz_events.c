/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the profiler plugin's event input. The input is a set of
 * names (what NCCL would pass as func/datatype strings) and a sequence of
 * 6-byte commands driving the core the way NCCL drives it: start (any kind,
 * any parent, including handles that are not ours), stop (live, stale or
 * foreign handles), state changes with any state value. Checks: handles are
 * NULL or inside the communicator's array, every record in the ring carries
 * a known operation and data type and a sane interval, and nothing crashes.
 *
 * Input: up to 8 NUL-terminated names, a 0xff byte, then commands
 * [verb, kind, func name, datatype name, count, parent/state].
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect_int.h"
#include "cruxf.h"

#define MAX_NAMES 8
#define MAX_LIVE  32

static void drain(void)
{
	struct cruxc_call c;

	while (cruxc_ring_pop(&cruxc_hot.ring, &c)) {
		if (c.op != CRUXC_OP_GROUP_END && c.op > CRUXC_OP_RECV)
			abort();
		if (c.dtype >= 12 || c.t_exit < c.t_enter)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cruxf_comm *comm;
	static const char *const known[MAX_NAMES] = {"AllReduce",     "Send",	     "Recv",
						     "ReduceScatter", "ncclFloat32", "ncclBfloat16",
						     "ncclInt8",      "AlltoAll"};
	char buf[256];
	const char *names[MAX_NAMES];
	void *live[MAX_LIVE];
	size_t i = 0, len = 0, nlive = 0, n = 0, start = 0;

	if (!cruxc_hot.ring.cells && cruxc_ring_init(&cruxc_hot.ring, 10) != CRUX_OK)
		return 0;
	atomic_store(&cruxc_hot.state, CRUXC_ST_ACTIVE);
	atomic_store(&cruxc_hot.backend, CRUX_TIMING_HOST);
	if (!comm && !(comm = calloc(1, sizeof(*comm))))
		return 0;
	memset(comm, 0, sizeof(*comm));
	comm->magic = CRUXF_COMM_MAGIC;
	memcpy(names, known, sizeof(names));
	for (; i < size && data[i] != 0xff && len < sizeof(buf) - 1; i++) {
		buf[len++] = (char)data[i];
		if (data[i] == 0) {
			names[n++ % MAX_NAMES] = buf + start;
			start = len;
		}
	}
	buf[len] = '\0';
	(void)cruxf_op_from_func(buf + start); /* an unterminated tail too */
	(void)cruxf_dtype_from_name(buf + start);
	for (i = i + 1; i + 6 <= size; i += 6) {
		const uint8_t *c = data + i;
		struct cruxf_desc d = {
		    .kind = c[1] % 3,
		    .v4 = c[1] & 0x80,
		    .func = names[c[2] % MAX_NAMES],
		    .datatype = names[c[3] % MAX_NAMES],
		    .count = (uint64_t)c[4] << (c[4] % 48),
		    .peer = (int8_t)c[5],
		    .stream = (void *)(uintptr_t)c[5],
		};
		void *h = NULL;

		/* A parent: one of our live handles, a foreign pointer, or none. */
		if (nlive && (c[5] & 3) == 1)
			d.parent = live[c[5] % nlive];
		else if ((c[5] & 3) == 2)
			d.parent = (void *)&d;
		switch (c[0] % 4) {
		case 0:
			cruxf_start(comm, &h, &d);
			if (h && ((struct cruxf_event *)h < comm->evs ||
				  (struct cruxf_event *)h >= comm->evs + CRUXF_EVENTS))
				abort();
			if (h && nlive < MAX_LIVE)
				live[nlive++] = h;
			break;
		case 1: /* stop a live (possibly already reused) handle */
			if (nlive) {
				size_t k = c[5] % nlive;
				cruxf_stop(live[k]);
				live[k] = live[--nlive];
			}
			break;
		case 2:
			if (nlive)
				cruxf_state_change(live[c[5] % nlive], c[4]);
			break;
		default:
			cruxf_stop(NULL);
			cruxf_state_change(NULL, c[4]);
			break;
		}
		drain();
	}
	drain();
	return 0;
}
