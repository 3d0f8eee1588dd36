/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the strict parsers of environment values and names.
 * Byte 0 picks bounds, the rest is the value (cut at the first NUL). Every
 * parser runs on it; a parser that says CRUX_OK must have produced a value
 * inside its bounds, one that refuses must have written a message naming
 * the variable. Either rule broken aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/addr.h"
#include "crux/env.h"
#include "crux/jobid.h"
#include "crux/log.h"
#include "crux/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct one_env {
	const char *name;
	const char *value;
};

static const char *one_getenv(void *arg, const char *name)
{
	const struct one_env *e = arg;
	return strcmp(e->name, name) == 0 ? e->value : NULL;
}

static void check_err(crux_status_t st, const char *err, const char *name)
{
	if (st != CRUX_OK && !strstr(err, name))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *v = malloc(size);
	if (!v)
		return 0;
	memcpy(v, data + 1, size - 1);
	v[size - 1] = '\0';
	char err[256];
	unsigned sel = data[0];

	long long lo = (sel & 1) ? -1000 : 0, hi = (sel & 2) ? INT64_MAX : 1000, li = 0;
	err[0] = '\0';
	crux_status_t st = crux_parse_int("CRUX_FUZZ_INT", v, lo, hi, &li, err, sizeof(err));
	if (st == CRUX_OK && (li < lo || li > hi))
		abort();
	check_err(st, err, "CRUX_FUZZ_INT");

	double dl = (sel & 4) ? -1e300 : 0, dh = (sel & 8) ? 1e300 : 1, dv = 0;
	err[0] = '\0';
	st = crux_parse_double("CRUX_FUZZ_DBL", v, dl, dh, &dv, err, sizeof(err));
	if (st == CRUX_OK && !(dv >= dl && dv <= dh))
		abort();
	check_err(st, err, "CRUX_FUZZ_DBL");

	uint64_t u = 0, umin = (sel & 1) ? 16 : 0, umax = (sel & 2) ? UINT64_MAX : 1000000;
	err[0] = '\0';
	st = crux_parse_u64("CRUX_FUZZ_U64", v, umin, umax, &u, err, sizeof(err));
	if (st == CRUX_OK && (u < umin || u > umax || v[0] == '-' || v[0] == ' '))
		abort();
	check_err(st, err, "CRUX_FUZZ_U64");

	uint64_t ns = 0, nmin = (sel & 16) ? 1000 : 0,
		 nmax = (sel & 32) ? UINT64_MAX : 60000000000ull;
	uint64_t unit = (sel & 64) ? 1000000ull : 1ull;
	err[0] = '\0';
	st = crux_parse_duration_ns("CRUX_FUZZ_DUR", v, nmin, nmax, unit, &ns, err, sizeof(err));
	if (st == CRUX_OK && (ns < nmin || ns > nmax))
		abort();
	check_err(st, err, "CRUX_FUZZ_DUR");

	bool b;
	err[0] = '\0';
	st = crux_parse_bool("CRUX_FUZZ_BOOL", v, &b, err, sizeof(err));
	check_err(st, err, "CRUX_FUZZ_BOOL");

	static const char *const choices[] = {"auto", "cupti", "events", "host", NULL};
	struct one_env e = {"CRUX_FUZZ_ENUM", v};
	int idx = -1;
	err[0] = '\0';
	st = crux_env_enum(one_getenv, &e, "CRUX_FUZZ_ENUM", choices, 0, &idx, err, sizeof(err));
	if (st == CRUX_OK && (idx < 0 || idx > 3))
		abort();
	if (v[0])
		check_err(st, err, "CRUX_FUZZ_ENUM");

	struct one_env le = {"CRUX_LOG_LEVEL", v};
	enum crux_log_level lvl;
	err[0] = '\0';
	st = crux_log_parse_level(one_getenv, &le, &lvl, err, sizeof(err));
	if (st == CRUX_OK && (lvl < CRUX_LOG_ERROR || lvl > CRUX_LOG_DEBUG))
		abort();
	check_err(st, err, "CRUX_LOG_LEVEL");

	struct crux_addr a;
	if (crux_addr_parse(v, &a) == CRUX_OK) {
		char buf[CRUX_ADDR_STRLEN];
		struct crux_addr back;
		crux_addr_format(&a, buf, sizeof(buf));
		if (crux_addr_parse(buf, &back) != CRUX_OK || !crux_addr_equal(&a, &back))
			abort();
	}

	pid_t pid;
	uint64_t start;
	if (crux_prof_parse_name(v, &pid, &start)) {
		char buf[96];
		crux_prof_name(pid, start, buf, sizeof(buf));
		if (strcmp(buf, v) != 0)
			abort(); /* a name must have exactly one spelling */
	}

	static const char *const job_vars[] = {"CRUX_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID",
					       "PMIX_NAMESPACE", "PMI_KVSNAME"};
	struct one_env je = {job_vars[sel % 5], v};
	struct crux_job_identity id;
	err[0] = '\0';
	st = crux_job_identity_derive_ex(one_getenv, &je, &id, err, sizeof(err));
	if (st == CRUX_OK) {
		size_t n = strnlen(id.id, sizeof(id.id));
		if (n == sizeof(id.id) || id.key == 0 || id.key != crux_job_key_of(id.id))
			abort();
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)id.id[i] < 0x21 || (unsigned char)id.id[i] > 0x7e)
				abort();
	} else {
		check_err(st, err, "CRUX_JOB_ID");
	}
	free(v);
	return 0;
}
