/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the iteration detector and the interval accounting on
 * arbitrary call sequences, and the preload's CRUX_ variable parsing on
 * arbitrary values. Checks the results' invariants, not just "no crash".
 * Input: byte 0 picks the alphabet size; then pairs (signature, gap) bytes;
 * the tail after a 0xff byte, split at NUL bytes, gives CRUX_ITERATION_MARK,
 * CRUX_PROFILE_WINDOW and CRUX_TIMING values.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect_int.h"

struct fz_env {
	const char *mark, *window, *timing;
};

static const char *fz_getenv(void *arg, const char *name)
{
	const struct fz_env *e = arg;

	if (strcmp(name, "CRUX_ITERATION_MARK") == 0)
		return e->mark;
	if (strcmp(name, "CRUX_PROFILE_WINDOW") == 0)
		return e->window;
	if (strcmp(name, "CRUX_TIMING") == 0)
		return e->timing;
	if (strcmp(name, "CRUX_SHM_DIR") == 0)
		return "/tmp/crux-fuzz-none";
	return NULL;
}

static void fuzz_config(const uint8_t *data, size_t size)
{
	char buf[256];
	char *parts[3] = {NULL, NULL, NULL};
	struct fz_env e;
	struct cruxc_config cfg;
	bool on;
	size_t len = size < sizeof(buf) - 1 ? size : sizeof(buf) - 1;
	int k = 0;

	memcpy(buf, data, len);
	buf[len] = '\0';
	parts[k++] = buf;
	for (size_t i = 0; i < len && k < 3; i++) {
		if (buf[i] == '\0')
			parts[k++] = &buf[i + 1];
	}
	e = (struct fz_env){parts[0], parts[1], parts[2]};
	if (cruxc_config_parse(fz_getenv, &e, &cfg, &on) == CRUX_OK) {
		if (cfg.window_ns < 100000000ull || cfg.timing < 0 || cfg.timing > 3)
			abort();
		if (cfg.mark == CRUXC_MARK_OP && (cfg.mark_op < 0 || cfg.mark_op > CRUXC_OP_RECV))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint32_t sig[CRUXC_DET_MAX_CALLS];
	static uint64_t t[CRUXC_DET_MAX_CALLS];
	static struct cruxc_iv iv[CRUXC_DET_MAX_CALLS];
	static struct cruxc_iv_event ev[2 * CRUXC_DET_MAX_CALLS];
	struct cruxc_det_scratch *s;
	struct cruxc_det_result r;
	struct cruxc_span span;
	struct cruxc_busy b;
	size_t n = 0, i = 1;
	uint32_t alphabet;
	uint64_t now = 0;

	if (size < 1)
		return 0;
	alphabet = (uint32_t)data[0] % 16 + 1;
	for (; i + 1 < size && data[i] != 0xff && n < CRUXC_DET_MAX_CALLS; i += 2) {
		sig[n] = data[i] % alphabet;
		now += (uint64_t)data[i + 1] * 1000 + 1;
		t[n] = now;
		iv[n] = (struct cruxc_iv){now, now + (uint64_t)data[i] * 700, data[i + 1] & 1, 0};
		n++;
	}
	if (i < size && data[i] == 0xff)
		fuzz_config(data + i + 1, size - i - 1);
	if (cruxc_det_scratch_new(&s) != CRUX_OK)
		return 0;
	for (int timed = 0; timed < 2; timed++) {
		if (cruxc_detect(sig, timed ? t : NULL, n, s, &r) != CRUX_OK)
			continue;
		if (r.length < 1 || r.length > n || r.gram < 1 || r.gram > CRUXC_DET_MAX_GRAM ||
		    r.repeats < 2 || r.share < 0.5 || r.share > 1.0 || r.coverage > 1.0 + 1e-9)
			abort();
	}
	cruxc_det_scratch_free(s);
	span = (struct cruxc_span){0, now + 1000000};
	if (cruxc_iv_account(iv, n, &span, 1, ev, &b) != CRUX_OK)
		abort();
	if (b.overlap_ns > b.compute_ns || b.overlap_ns > b.comm_ns ||
	    b.compute_ns > span.end - span.start || b.comm_ns > span.end - span.start)
		abort();
	return 0;
}
