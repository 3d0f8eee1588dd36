/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Job identity: every rank of one job, on every host, derives the same job
 * key from its launcher's environment, with no configuration.
 *
 * Precedence (first that applies wins):
 *   1. CRUX_JOB_ID                          "env:<value>"
 *   2. Slurm step: SLURM_JOB_ID + SLURM_STEP_ID        "slurm:<job>.<step>"
 *      (SLURM_JOBID accepted; no step id -> "slurm:<job>")
 *   3. torchrun / torch.distributed.elastic: TORCHELASTIC_RUN_ID, with
 *      MASTER_ADDR:MASTER_PORT when the run id is the default "none"
 *                                           "torchrun:<run_id>@<addr>:<port>"
 *   4. Open MPI / PMIx: PMIX_NAMESPACE (or OMPI_MCA_ess_base_jobid)
 *                                           "pmix:<nspace>"
 *   5. MPICH / Hydra: PMI_KVSNAME          "pmi:<kvsname>"
 *   6. Fallback: host name + parent pid     "local:<host>:<ppid>"  (ranks of
 *      one launcher on one host agree; documented as not cross-host)
 *
 * The key is a 64-bit FNV-1a hash of the readable id, never 0.
 */
#ifndef CRUX_JOBID_H
#define CRUX_JOBID_H

#include <stdint.h>

#include "crux/env.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_JOB_ID_LEN 64

enum crux_job_source {
	CRUX_JOB_SRC_ENV = 0,
	CRUX_JOB_SRC_SLURM,
	CRUX_JOB_SRC_TORCHRUN,
	CRUX_JOB_SRC_PMIX,
	CRUX_JOB_SRC_PMI,
	CRUX_JOB_SRC_LOCAL,
};

struct crux_job_identity {
	uint64_t key;		  /* hash of id; never 0 */
	char id[CRUX_JOB_ID_LEN]; /* readable id, NUL-terminated (truncated if long) */
	enum crux_job_source source;
};

/* This process's rank within its job, from the launcher's environment (-1 when unknown). */
struct crux_rank_info {
	int32_t rank;
	int32_t world_size;
	int32_t local_rank;
};

/* Derive the job identity through fn (NULL = getenv). */
crux_status_t crux_job_identity_derive(crux_getenv_fn fn, void *arg, struct crux_job_identity *out);

/*
 * Same, without logging: a bad CRUX_JOB_ID (more than 59 characters, or a
 * space or non-printable byte) gives CRUX_ERR_INVAL and a message in err.
 * Launcher-derived ids longer than CRUX_JOB_ID_LEN-1 keep their head and end
 * in "~<16 hex digits>" (a hash of the whole id); bytes outside 0x21..0x7e
 * become '_'. The key is crux_job_key_of(id) of that final id.
 */
crux_status_t crux_job_identity_derive_ex(crux_getenv_fn fn, void *arg,
					  struct crux_job_identity *out, char *err, size_t errlen);

/* Rank info from RANK/WORLD_SIZE/LOCAL_RANK, SLURM_PROCID/.., OMPI_COMM_WORLD_*,
 * PMI_RANK/PMIX_RANK. */
crux_status_t crux_rank_info_derive(crux_getenv_fn fn, void *arg, struct crux_rank_info *out);

/* The key of a readable id (FNV-1a, 0 mapped to 1). */
uint64_t crux_job_key_of(const char *id);

const char *crux_job_source_str(enum crux_job_source src);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_JOBID_H */
