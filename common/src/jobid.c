/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/jobid.h"
#include "crux/log.h"

uint64_t crux_job_key_of(const char *id)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
	for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull; /* FNV-1a 64 prime */
	}
	return h ? h : 1;
}

const char *crux_job_source_str(enum crux_job_source src)
{
	switch (src) {
	case CRUX_JOB_SRC_ENV:
		return "CRUX_JOB_ID";
	case CRUX_JOB_SRC_SLURM:
		return "slurm";
	case CRUX_JOB_SRC_TORCHRUN:
		return "torchrun";
	case CRUX_JOB_SRC_PMIX:
		return "pmix";
	case CRUX_JOB_SRC_PMI:
		return "pmi";
	case CRUX_JOB_SRC_LOCAL:
		return "local";
	}
	return "unknown";
}

/*
 * Build the readable id. An id too long for the record keeps its head and
 * ends in a hash of the whole, so two long ids still differ.
 */
static void set_id(struct crux_job_identity *out, enum crux_job_source src, const char *full)
{
	size_t n = strlen(full);
	if (n < CRUX_JOB_ID_LEN) {
		memcpy(out->id, full, n + 1);
	} else {
		char tail[20];
		int t = snprintf(tail, sizeof(tail), "~%016llx",
				 (unsigned long long)crux_job_key_of(full));
		size_t head = CRUX_JOB_ID_LEN - 1 - (size_t)t;
		memcpy(out->id, full, head);
		memcpy(out->id + head, tail, (size_t)t + 1);
	}
	/* Non-printable bytes would garble cruxctl's table; all ranks map them alike. */
	for (char *p = out->id; *p; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			*p = '_';
	out->key = crux_job_key_of(out->id);
	out->source = src;
}

#define CRUX_JOB_ID_MAX_VALUE (CRUX_JOB_ID_LEN - 1 - 4) /* room for "env:" */

static crux_status_t check_crux_job_id(const char *v, char *err, size_t errlen)
{
	size_t n = strlen(v);
	bool ok = n <= CRUX_JOB_ID_MAX_VALUE;
	for (size_t i = 0; ok && i < n; i++)
		if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
			ok = false;
	if (!ok) {
		char shown[CRUX_ENV_SHOWN_LEN];
		crux_env_quote(v, shown, sizeof(shown));
		crux_set_err(err, errlen,
			     "CRUX_JOB_ID='%s' is not valid: expected 1 to %d printable characters "
			     "without spaces",
			     shown, CRUX_JOB_ID_MAX_VALUE);
		return CRUX_ERR_INVAL;
	}
	return CRUX_OK;
}

crux_status_t crux_job_identity_derive_ex(crux_getenv_fn fn, void *arg,
					  struct crux_job_identity *out, char *err, size_t errlen)
{
	struct crux_job_identity id;
	char full[512];
	const char *v, *w;
	memset(&id, 0, sizeof(id));

	/* 1. explicit override */
	v = crux_env_get(fn, arg, "CRUX_JOB_ID");
	if (v) {
		crux_status_t st = check_crux_job_id(v, err, errlen);
		if (st != CRUX_OK)
			return st;
		snprintf(full, sizeof(full), "env:%s", v);
		set_id(&id, CRUX_JOB_SRC_ENV, full);
		goto done;
	}
	/* 2. Slurm: job + step (two srun steps of one allocation are two jobs) */
	v = crux_env_get(fn, arg, "SLURM_JOB_ID");
	if (!v)
		v = crux_env_get(fn, arg, "SLURM_JOBID");
	if (v) {
		w = crux_env_get(fn, arg, "SLURM_STEP_ID");
		if (!w)
			w = crux_env_get(fn, arg, "SLURM_STEPID");
		if (w)
			snprintf(full, sizeof(full), "slurm:%s.%s", v, w);
		else
			snprintf(full, sizeof(full), "slurm:%s", v);
		set_id(&id, CRUX_JOB_SRC_SLURM, full);
		goto done;
	}
	/* 3. torchrun: the run id, made unique by the rendezvous master when it is "none" */
	v = crux_env_get(fn, arg, "TORCHELASTIC_RUN_ID");
	if (v) {
		if (strcmp(v, "none") != 0) {
			snprintf(full, sizeof(full), "torchrun:%s", v);
			set_id(&id, CRUX_JOB_SRC_TORCHRUN, full);
			goto done;
		}
		const char *addr = crux_env_get(fn, arg, "MASTER_ADDR");
		const char *port = crux_env_get(fn, arg, "MASTER_PORT");
		if (addr && port) {
			snprintf(full, sizeof(full), "torchrun:%s@%s:%s", v, addr, port);
			set_id(&id, CRUX_JOB_SRC_TORCHRUN, full);
			goto done;
		}
		/* "none" alone would merge every such job: try the next source. */
	}
	/* 4. Open MPI / PMIx namespace */
	v = crux_env_get(fn, arg, "PMIX_NAMESPACE");
	if (!v)
		v = crux_env_get(fn, arg, "OMPI_MCA_ess_base_jobid");
	if (v) {
		snprintf(full, sizeof(full), "pmix:%s", v);
		set_id(&id, CRUX_JOB_SRC_PMIX, full);
		goto done;
	}
	/* 5. MPICH / Hydra */
	v = crux_env_get(fn, arg, "PMI_KVSNAME");
	if (v) {
		snprintf(full, sizeof(full), "pmi:%s", v);
		set_id(&id, CRUX_JOB_SRC_PMI, full);
		goto done;
	}
	/* 6. one launcher on one host: its ranks share the parent */
	{
		char host[256];
		if (gethostname(host, sizeof(host)) != 0)
			snprintf(host, sizeof(host), "unknown");
		host[sizeof(host) - 1] = '\0';
		snprintf(full, sizeof(full), "local:%s:%d", host, (int)getppid());
		set_id(&id, CRUX_JOB_SRC_LOCAL, full);
	}
done:
	*out = id;
	return CRUX_OK;
}

crux_status_t crux_job_identity_derive(crux_getenv_fn fn, void *arg, struct crux_job_identity *out)
{
	char err[256];
	crux_status_t st = crux_job_identity_derive_ex(fn, arg, out, err, sizeof(err));
	if (st != CRUX_OK)
		crux_err("%s", err);
	return st;
}

/* A non-negative integer from a launcher variable, or -1. */
static int32_t launcher_int(crux_getenv_fn fn, void *arg, const char *name)
{
	const char *v = crux_env_get(fn, arg, name);
	long long x;
	if (!v || crux_parse_int(name, v, 0, INT32_MAX, &x, NULL, 0) != CRUX_OK)
		return -1;
	return (int32_t)x;
}

crux_status_t crux_rank_info_derive(crux_getenv_fn fn, void *arg, struct crux_rank_info *out)
{
	/* Most specific first: torchrun sets RANK for the worker even under srun/mpirun. */
	static const char *const sets[][3] = {
	    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
	    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
	    {"PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"},
	    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
	    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
	};
	struct crux_rank_info ri = {-1, -1, -1};
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		int32_t r = launcher_int(fn, arg, sets[i][0]);
		if (r < 0)
			continue;
		ri.rank = r;
		ri.world_size = launcher_int(fn, arg, sets[i][1]);
		ri.local_rank = launcher_int(fn, arg, sets[i][2]);
		break;
	}
	*out = ri;
	return CRUX_OK;
}
