/* SPDX-License-Identifier: Apache-2.0 */
/* Job identity from each launcher's environment, precedence, rank info. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include "crux/jobid.h"
#include "testutil.h"

static struct crux_job_identity derive(struct tu_env *env)
{
	struct crux_job_identity id;
	memset(&id, 0, sizeof(id));
	assert_int_equal(crux_job_identity_derive(tu_getenv, env, &id), CRUX_OK);
	assert_true(id.key != 0);
	assert_true(id.key == crux_job_key_of(id.id));
	return id;
}

static void test_key(void **state)
{
	(void)state;
	/* FNV-1a 64 reference values */
	assert_true(crux_job_key_of("") == 0xcbf29ce484222325ull);
	assert_true(crux_job_key_of("a") == 0xaf63dc4c8601ec8cull);
	assert_true(crux_job_key_of("env:x") != crux_job_key_of("env:y"));
	assert_string_equal(crux_job_source_str(CRUX_JOB_SRC_SLURM), "slurm");
	assert_string_equal(crux_job_source_str(CRUX_JOB_SRC_ENV), "CRUX_JOB_ID");
	assert_string_equal(crux_job_source_str((enum crux_job_source)77), "unknown");
}

static void test_crux_job_id(void **state)
{
	(void)state;
	struct tu_env env[] = {{"CRUX_JOB_ID", "resnet-7"},    {"SLURM_JOB_ID", "12"},
			       {"TORCHELASTIC_RUN_ID", "abc"}, {"PMIX_NAMESPACE", "ns"},
			       {"PMI_KVSNAME", "kvs"},	       {NULL, NULL}};
	struct crux_job_identity id = derive(env);
	assert_string_equal(id.id, "env:resnet-7");
	assert_int_equal(id.source, CRUX_JOB_SRC_ENV);

	struct tu_env bad[] = {{"CRUX_JOB_ID", "has space"}, {NULL, NULL}};
	char err[256];
	struct crux_job_identity keep = {.key = 5};
	assert_int_equal(crux_job_identity_derive_ex(tu_getenv, bad, &keep, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_true(keep.key == 5);
	assert_string_equal(err, "CRUX_JOB_ID='has space' is not valid: expected 1 to 59 "
				 "printable characters without spaces");
	char longv[80];
	memset(longv, 'j', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	struct tu_env lng[] = {{"CRUX_JOB_ID", longv}, {NULL, NULL}};
	assert_int_equal(crux_job_identity_derive_ex(tu_getenv, lng, &keep, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	/* exactly 59 is fine */
	longv[59] = '\0';
	id = derive(lng);
	assert_int_equal(strlen(id.id), 63);
	/* empty counts as unset: falls through to Slurm */
	struct tu_env empty[] = {{"CRUX_JOB_ID", ""}, {"SLURM_JOB_ID", "12"}, {NULL, NULL}};
	id = derive(empty);
	assert_int_equal(id.source, CRUX_JOB_SRC_SLURM);
}

static void test_slurm(void **state)
{
	(void)state;
	struct tu_env step[] = {{"SLURM_JOB_ID", "4242"},
				{"SLURM_STEP_ID", "3"},
				{"TORCHELASTIC_RUN_ID", "r"},
				{"PMIX_NAMESPACE", "slurm.pmix.4242.3"},
				{NULL, NULL}};
	struct crux_job_identity id = derive(step);
	assert_string_equal(id.id, "slurm:4242.3");
	assert_int_equal(id.source, CRUX_JOB_SRC_SLURM);
	/* another step of the same allocation is another job */
	struct tu_env step2[] = {{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "4"}, {NULL, NULL}};
	assert_true(derive(step2).key != id.key);
	/* old names; no step */
	struct tu_env old[] = {{"SLURM_JOBID", "77"}, {"SLURM_STEPID", "0"}, {NULL, NULL}};
	assert_string_equal(derive(old).id, "slurm:77.0");
	struct tu_env nostep[] = {{"SLURM_JOB_ID", "77"}, {NULL, NULL}};
	assert_string_equal(derive(nostep).id, "slurm:77");
	/* every rank on every host (same variables) gets the same key */
	struct tu_env rank1[] = {{"SLURM_JOB_ID", "4242"},
				 {"SLURM_STEP_ID", "3"},
				 {"SLURM_PROCID", "17"},
				 {"SLURMD_NODENAME", "node9"},
				 {NULL, NULL}};
	assert_true(derive(rank1).key == id.key);
}

static void test_torchrun(void **state)
{
	(void)state;
	struct tu_env named[] = {{"TORCHELASTIC_RUN_ID", "job-abc"},
				 {"MASTER_ADDR", "10.0.0.1"},
				 {"MASTER_PORT", "29500"},
				 {"PMIX_NAMESPACE", "x"},
				 {NULL, NULL}};
	struct crux_job_identity id = derive(named);
	assert_string_equal(id.id, "torchrun:job-abc");
	assert_int_equal(id.source, CRUX_JOB_SRC_TORCHRUN);

	struct tu_env none[] = {{"TORCHELASTIC_RUN_ID", "none"},
				{"MASTER_ADDR", "10.0.0.1"},
				{"MASTER_PORT", "29500"},
				{NULL, NULL}};
	id = derive(none);
	assert_string_equal(id.id, "torchrun:none@10.0.0.1:29500");
	struct tu_env none2[] = {{"TORCHELASTIC_RUN_ID", "none"},
				 {"MASTER_ADDR", "10.0.0.1"},
				 {"MASTER_PORT", "29501"},
				 {NULL, NULL}};
	assert_true(derive(none2).key != id.key);
	/* "none" without a master: next source, never a shared "torchrun:none" */
	struct tu_env nomaster[] = {
	    {"TORCHELASTIC_RUN_ID", "none"}, {"PMI_KVSNAME", "kvs_1"}, {NULL, NULL}};
	id = derive(nomaster);
	assert_string_equal(id.id, "pmi:kvs_1");
}

static void test_mpi(void **state)
{
	(void)state;
	struct tu_env pmix[] = {{"PMIX_NAMESPACE", "prterun-host-1234@1"},
				{"OMPI_MCA_ess_base_jobid", "99"},
				{"PMI_KVSNAME", "k"},
				{NULL, NULL}};
	struct crux_job_identity id = derive(pmix);
	assert_string_equal(id.id, "pmix:prterun-host-1234@1");
	assert_int_equal(id.source, CRUX_JOB_SRC_PMIX);
	struct tu_env ompi[] = {{"OMPI_MCA_ess_base_jobid", "3623878657"}, {NULL, NULL}};
	assert_string_equal(derive(ompi).id, "pmix:3623878657");
	struct tu_env mpich[] = {{"PMI_KVSNAME", "kvs_5133_0"}, {"PMI_RANK", "1"}, {NULL, NULL}};
	id = derive(mpich);
	assert_string_equal(id.id, "pmi:kvs_5133_0");
	assert_int_equal(id.source, CRUX_JOB_SRC_PMI);
}

static void test_fallback_and_long(void **state)
{
	(void)state;
	struct tu_env none[] = {{NULL, NULL}};
	struct crux_job_identity id = derive(none);
	assert_int_equal(id.source, CRUX_JOB_SRC_LOCAL);
	char host[256];
	gethostname(host, sizeof(host));
	char expect[300];
	snprintf(expect, sizeof(expect), "local:%s:%d", host, (int)getppid());
	expect[CRUX_JOB_ID_LEN - 1] = '\0';
	if (strlen(expect) < CRUX_JOB_ID_LEN - 1)
		assert_string_equal(id.id, expect);

	/* long launcher ids keep their head and a hash of the whole */
	char ns1[200], ns2[200];
	memset(ns1, 'n', sizeof(ns1) - 1);
	ns1[sizeof(ns1) - 1] = '\0';
	memcpy(ns2, ns1, sizeof(ns1));
	ns2[150] = 'm';
	struct tu_env l1[] = {{"PMIX_NAMESPACE", ns1}, {NULL, NULL}};
	struct tu_env l2[] = {{"PMIX_NAMESPACE", ns2}, {NULL, NULL}};
	struct crux_job_identity a = derive(l1), b = derive(l2);
	assert_int_equal(strlen(a.id), CRUX_JOB_ID_LEN - 1);
	assert_memory_equal(a.id, "pmix:nnn", 8);
	assert_non_null(strchr(a.id, '~'));
	assert_true(a.key != b.key);
	/* spaces and control bytes are mapped */
	struct tu_env sp[] = {{"PMI_KVSNAME", "a b\tc"}, {NULL, NULL}};
	assert_string_equal(derive(sp).id, "pmi:a_b_c");
}

static void test_rank_info(void **state)
{
	(void)state;
	struct crux_rank_info ri;
	struct tu_env torch[] = {{"RANK", "5"},
				 {"WORLD_SIZE", "16"},
				 {"LOCAL_RANK", "1"},
				 {"SLURM_PROCID", "0"},
				 {NULL, NULL}};
	assert_int_equal(crux_rank_info_derive(tu_getenv, torch, &ri), CRUX_OK);
	assert_int_equal(ri.rank, 5);
	assert_int_equal(ri.world_size, 16);
	assert_int_equal(ri.local_rank, 1);
	struct tu_env ompi[] = {{"OMPI_COMM_WORLD_RANK", "3"},
				{"OMPI_COMM_WORLD_SIZE", "4"},
				{"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
				{NULL, NULL}};
	assert_int_equal(crux_rank_info_derive(tu_getenv, ompi, &ri), CRUX_OK);
	assert_int_equal(ri.rank, 3);
	assert_int_equal(ri.world_size, 4);
	struct tu_env slurm[] = {
	    {"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "12"}, {"SLURM_LOCALID", "1"}, {NULL, NULL}};
	assert_int_equal(crux_rank_info_derive(tu_getenv, slurm, &ri), CRUX_OK);
	assert_int_equal(ri.rank, 9);
	assert_int_equal(ri.local_rank, 1);
	struct tu_env pmi[] = {{"PMI_RANK", "2"}, {"PMI_SIZE", "x"}, {NULL, NULL}};
	assert_int_equal(crux_rank_info_derive(tu_getenv, pmi, &ri), CRUX_OK);
	assert_int_equal(ri.rank, 2);
	assert_int_equal(ri.world_size, -1);
	assert_int_equal(ri.local_rank, -1);
	struct tu_env nothing[] = {{"RANK", "-1"}, {NULL, NULL}};
	assert_int_equal(crux_rank_info_derive(tu_getenv, nothing, &ri), CRUX_OK);
	assert_int_equal(ri.rank, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key),	      cmocka_unit_test(test_crux_job_id),
	    cmocka_unit_test(test_slurm),     cmocka_unit_test(test_torchrun),
	    cmocka_unit_test(test_mpi),	      cmocka_unit_test(test_fallback_and_long),
	    cmocka_unit_test(test_rank_info),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
