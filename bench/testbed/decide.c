/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-tb-decide: a fixed decision table for the testbed, for runs without
 * the agent (run.sh --decider static). It owns the table in CRUX_SHM_DIR
 * like cruxd would, publishes one level per job (job ids as given to the
 * trainers through CRUX_JOB_ID) and keeps the heartbeat fresh until SIGTERM.
 *
 *   crux-tb-decide --dir SHMDIR [--levels K] JOB=LEVEL ...
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/attach.h"
#include "crux/broker.h"
#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/env.h"
#include "crux/jobid.h"
#include "crux/log.h"

struct crux_tb_decide {
	volatile sig_atomic_t stop;
	const char *job_id; /* what the fixture getenv answers for CRUX_JOB_ID */
};

static struct crux_tb_decide crux_tb_dc;

static void crux_tb_dc_signal(int sig)
{
	(void)sig;
	crux_tb_dc.stop = 1;
}

static const char *crux_tb_dc_getenv(void *arg, const char *name)
{
	(void)arg;
	return strcmp(name, "CRUX_JOB_ID") ? NULL : crux_tb_dc.job_id;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"levels", required_argument, NULL, 'k'},
	    {NULL, 0, NULL, 0},
	};
	struct crux_dt_job jobs[64];
	struct crux_dt_settings settings;
	struct crux_dt_writer *w = NULL;
	struct sigaction sa;
	const char *dir = NULL;
	long long levels = CRUX_DEFAULT_LEVELS;
	char err[512];
	pid_t holder = 0;
	uint32_t njobs = 0;
	crux_status_t st;
	int c;

	crux_log_init("crux-tb-decide");
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'k':
			if (crux_parse_int("--levels", optarg, 1, CRUX_MAX_LEVELS, &levels, err,
					   sizeof(err)) != CRUX_OK) {
				fprintf(stderr, "crux-tb-decide: %s\n", err);
				return 2;
			}
			break;
		default:
			fprintf(stderr,
				"usage: crux-tb-decide --dir SHMDIR [--levels K] JOB=LEVEL ...\n");
			return 2;
		}
	}
	if (!dir || optind >= argc) {
		fprintf(stderr, "usage: crux-tb-decide --dir SHMDIR [--levels K] JOB=LEVEL ...\n");
		return 2;
	}
	memset(jobs, 0, sizeof(jobs));
	for (int i = optind; i < argc; i++) {
		char name[CRUX_JOB_ID_LEN];
		const char *eq = strchr(argv[i], '=');
		struct crux_job_identity id;
		long long lvl;

		if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof(name) || njobs == 64) {
			fprintf(stderr, "crux-tb-decide: '%s' is not JOB=LEVEL (at most 64 jobs)\n",
				argv[i]);
			return 2;
		}
		if (crux_parse_int("level", eq + 1, 0, levels - 1, &lvl, err, sizeof(err)) !=
		    CRUX_OK) {
			fprintf(stderr, "crux-tb-decide: %s: %s\n", argv[i], err);
			return 2;
		}
		memcpy(name, argv[i], (size_t)(eq - argv[i]));
		name[eq - argv[i]] = '\0';
		/* The same derivation the preload and the plugin run on CRUX_JOB_ID. */
		crux_tb_dc.job_id = name;
		st = crux_job_identity_derive(crux_tb_dc_getenv, NULL, &id);
		if (st != CRUX_OK) {
			fprintf(stderr, "crux-tb-decide: job id '%s': %s\n", name,
				crux_status_str(st));
			return 2;
		}
		jobs[njobs].job_key = id.key;
		memcpy(jobs[njobs].job_id, id.id, sizeof(jobs[njobs].job_id));
		jobs[njobs].level = (uint8_t)lvl;
		jobs[njobs].state = CRUX_JOB_OVERRIDDEN;
		njobs++;
	}
	crux_dt_settings_default((uint32_t)levels, &settings);
	/* As cruxd does (contract v2): a sealed memfd served on cruxd.sock, the file only written.
	 */
	struct crux_broker *b = NULL;
	st = crux_dt_writer_open_shadow(dir, &settings, &w, &holder, err, sizeof(err));
	if (st != CRUX_OK) {
		fprintf(stderr, "crux-tb-decide: cannot own the decision table in %s: %s\n", dir,
			err);
		return 1;
	}
	if (crux_broker_open(dir, NULL, crux_dt_writer_fd(w), &b, err, sizeof(err)) != CRUX_OK)
		fprintf(stderr, "crux-tb-decide: %s (ranks fall back to the file)\n", err);
	st = crux_dt_publish(w, jobs, njobs, NULL, 0);
	if (st != CRUX_OK) {
		fprintf(stderr, "crux-tb-decide: publish failed: %s\n", crux_status_str(st));
		crux_broker_close(b);
		crux_dt_writer_close(w);
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = crux_tb_dc_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	while (!crux_tb_dc.stop) {
		struct timespec ts = {0, 250000000};

		crux_dt_heartbeat(w);
		nanosleep(&ts, NULL);
	}
	crux_broker_close(b);
	crux_dt_writer_close(w);
	return 0;
}
