/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>

#include "crux/probe.h"
#include "crux_config.h"
#include "prom.h"

void cruxd_prom_put_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void num(FILE *f, double v)
{
	/* 15 digits: exact for counters, no binary noise; the specials as Prometheus spells them.
	 */
	if (v != v)
		fputs("NaN", f);
	else if (v > 1.7976931348623157e308)
		fputs("+Inf", f);
	else if (v < -1.7976931348623157e308)
		fputs("-Inf", f);
	else
		fprintf(f, "%.15g", v);
}

static void plain(FILE *f, const char *name, const char *type, const char *help, double v)
{
	head(f, name, type, help);
	fprintf(f, "%s ", name);
	num(f, v);
	fputc('\n', f);
}

static double age_s(uint64_t now, uint64_t then)
{
	return then && now >= then ? (double)(now - then) / 1e9 : -1.0;
}

static const char *job_state(uint8_t s)
{
	switch (s) {
	case CRUX_JOB_PROFILING:
		return "profiling";
	case CRUX_JOB_SCHEDULED:
		return "scheduled";
	case CRUX_JOB_OVERRIDDEN:
		return "overridden";
	default:
		return "unknown";
	}
}

static const char *probe_state(uint8_t s)
{
	switch (s) {
	case CRUXD_PROBE_NONE:
		return "pending";
	case CRUXD_PROBE_OK:
		return "ok";
	case CRUXD_PROBE_FAILED:
		return "failed";
	default:
		return "unknown";
	}
}

/* One per-job family: every job one sample, labelled by its id. */
enum job_field {
	JF_STATE,
	JF_LEVEL,
	JF_INT,
	JF_PRIO,
	JF_COMP,
	JF_COMM,
	JF_ITER,
	JF_BYTES,
	JF_RANKS,
	JF_SLOW
};

static double job_value(const struct cruxd_status_job *j, enum job_field fld)
{
	switch (fld) {
	case JF_STATE:
		return 1;
	case JF_LEVEL:
		return j->level;
	case JF_INT:
		return j->intensity;
	case JF_PRIO:
		return j->priority;
	case JF_COMP:
		return j->compute_s;
	case JF_COMM:
		return j->comm_s;
	case JF_ITER:
		return j->iter_time_s;
	case JF_BYTES:
		return j->bytes_per_iter;
	case JF_RANKS:
		return j->nranks;
	case JF_SLOW:
		return j->slowdown;
	}
	return 0;
}

static void job_family(FILE *f, const struct cruxd_status_body *b, const char *name,
		       const char *help, enum job_field fld)
{
	head(f, name, "gauge", help);
	for (uint32_t i = 0; i < b->njobs && i < CRUXD_STATUS_MAX_JOBS; i++) {
		const struct cruxd_status_job *j = &b->jobs[i];
		char id[CRUX_JOB_ID_LEN + 1];

		snprintf(id, sizeof(id), "%.*s", (int)CRUX_JOB_ID_LEN, j->job_id);
		fprintf(f, "%s{job=\"", name);
		cruxd_prom_put_label(f, id);
		if (fld == JF_STATE) { /* the state in a family of its own: no series churn */
			fprintf(f, "\",state=\"%s\"} 1\n", job_state(j->state));
		} else {
			fputs("\"} ", f);
			num(f, job_value(j, fld));
			fputc('\n', f);
		}
	}
}

static void put_job_label(FILE *f, const struct cruxd_status_job *j)
{
	char id[CRUX_JOB_ID_LEN + 1];

	snprintf(id, sizeof(id), "%.*s", (int)CRUX_JOB_ID_LEN, j->job_id);
	fputs("{job=\"", f);
	cruxd_prom_put_label(f, id);
	fputc('"', f);
}

/*
 * Stall breakdown (fractions of the iteration, mean over this host's ranks):
 * jobs without a profiled iteration have no sample; the network fraction
 * only where every rank's plugin published its busy time.
 */
static void stall_families(FILE *f, const struct cruxd_status_body *b)
{
	static const char *const names[4] = {
	    "crux_job_compute_fraction", "crux_job_interconnect_stall_fraction",
	    "crux_job_network_stall_fraction", "crux_job_other_fraction"};
	static const char *const helps[4] = {
	    "Fraction of the iteration the GPUs compute, mean over ranks.",
	    ("Fraction of the iteration lost to communication inside the host (exposed, not "
	     "waiting on the net plugin)."),
	    "Fraction of the iteration lost waiting on inter-host transfers through the net "
	    "plugin.",
	    "Fraction of the iteration neither computing nor communicating."};

	for (int k = 0; k < 4; k++) {
		head(f, names[k], "gauge", helps[k]);
		for (uint32_t i = 0; i < b->njobs && i < CRUXD_STATUS_MAX_JOBS; i++) {
			const struct cruxd_status_job *j = &b->jobs[i];
			const double v[4] = {j->frac_compute, j->frac_interconnect, j->frac_network,
					     j->frac_other};

			if (!j->stalls_valid || (k == 2 && !j->stalls_net_known))
				continue;
			fputs(names[k], f);
			put_job_label(f, j);
			fputs("} ", f);
			num(f, v[k]);
			fputc('\n', f);
		}
	}
	head(f, "crux_job_peer_bytes_per_iteration", "gauge",
	     "Bytes per iteration the job's ranks on this host send to a peer host (largest 16).");
	for (uint32_t i = 0; i < b->njobs && i < CRUXD_STATUS_MAX_JOBS; i++) {
		const struct cruxd_status_job *j = &b->jobs[i];

		for (uint8_t p = 0; p < j->npeer_bytes && p < CRUXD_STATUS_JOB_PEERS; p++) {
			char s[CRUX_ADDR_STRLEN], d[CRUX_ADDR_STRLEN];

			crux_addr_format(&j->peer_bytes[p].src, s, sizeof(s));
			crux_addr_format(&j->peer_bytes[p].dst, d, sizeof(d));
			fputs("crux_job_peer_bytes_per_iteration", f);
			put_job_label(f, j);
			fprintf(f, ",src=\"%s\",dst=\"%s\"} ", s, d);
			num(f, j->peer_bytes[p].bytes_per_iter);
			fputc('\n', f);
		}
	}
}

static void jobs(FILE *f, const struct cruxd_status_body *b)
{
	job_family(f, b, "crux_job_state",
		   "1 for each job, labelled with its state (profiling, scheduled, overridden).",
		   JF_STATE);
	job_family(f, b, "crux_job_level",
		   "Priority level the job's traffic is sent at (0 = lowest).", JF_LEVEL);
	job_family(f, b, "crux_job_intensity",
		   "GPU intensity I = W / t: compute work per second of bottleneck transfer.",
		   JF_INT);
	job_family(f, b, "crux_job_priority", "Scheduling priority P = k * I.", JF_PRIO);
	job_family(f, b, "crux_job_compute_seconds",
		   "Profiled compute time per iteration, mean over ranks.", JF_COMP);
	job_family(f, b, "crux_job_comm_seconds",
		   "Profiled communication time per iteration, mean over ranks.", JF_COMM);
	job_family(f, b, "crux_job_iteration_seconds", "Profiled iteration time, mean over ranks.",
		   JF_ITER);
	job_family(f, b, "crux_job_bytes_per_iteration",
		   "Bytes the job sends across hosts per iteration.", JF_BYTES);
	job_family(f, b, "crux_job_ranks", "Ranks publishing a profile for the job.", JF_RANKS);
	job_family(f, b, "crux_job_slowdown",
		   "Measured iteration time over the isolated estimate (0 = no estimate yet).",
		   JF_SLOW);
	stall_families(f, b);

	double per_level[CRUX_MAX_LEVELS] = {0};
	for (uint32_t i = 0; i < b->njobs && i < CRUXD_STATUS_MAX_JOBS; i++)
		if (b->jobs[i].level < CRUX_MAX_LEVELS)
			per_level[b->jobs[i].level] += b->jobs[i].bytes_per_iter;
	head(f, "crux_level_bytes_per_iteration", "gauge",
	     "Bytes per iteration of the jobs at each level, summed.");
	for (uint32_t l = 0; l < b->nlevels && l < CRUX_MAX_LEVELS; l++) {
		fprintf(f, "crux_level_bytes_per_iteration{level=\"%u\"} ", l);
		num(f, per_level[l]);
		fputc('\n', f);
	}
}

static void peers(FILE *f, const struct cruxd_status_body *b)
{
	static const char *const names[3] = {"crux_probe_peer_up", "crux_probe_peer_paths",
					     "crux_probe_peer_failures_total"};
	static const char *const helps[3] = {"1 when the last probe run for the peer found paths.",
					     "ECMP paths the prober found to the peer.",
					     "Probe runs for the peer that found nothing."};
	static const char *const types[3] = {"gauge", "gauge", "counter"};

	for (int k = 0; k < 4; k++) {
		const char *name = k < 3 ? names[k] : "crux_probe_peer_age_seconds";

		if (k < 3)
			head(f, name, types[k], helps[k]);
		else
			head(f, name, "gauge",
			     "Seconds since the last successful probe of the peer (-1 = never).");
		for (uint32_t i = 0; i < b->npeers && i < CRUXD_STATUS_MAX_PEERS; i++) {
			const struct cruxd_status_peer *p = &b->peers[i];
			char addr[CRUX_ADDR_STRLEN];
			double v;

			crux_addr_format(&p->peer, addr, sizeof(addr));
			if (k == 0)
				v = p->state == CRUXD_PROBE_OK;
			else if (k == 1)
				v = p->npaths;
			else if (k == 2)
				v = p->failures;
			else
				v = p->age_ms == UINT64_MAX ? -1.0 : (double)p->age_ms / 1e3;
			fprintf(f, "%s{peer=\"", name);
			cruxd_prom_put_label(f, addr);
			fprintf(f, "\",state=\"%s\"} ", probe_state(p->state));
			num(f, v);
			fputc('\n', f);
		}
	}
}

crux_status_t cruxd_prom_render(const struct cruxd_prom_snapshot *snap, uint64_t now_ns,
				char **text, size_t *len)
{
	const struct cruxd_status_body *b = &snap->body;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return CRUX_ERR_NOMEM;
	head(f, "crux_agent_info", "gauge", "Constant 1; labels: the agent's version.");
	fputs("crux_agent_info{version=\"", f);
	cruxd_prom_put_label(f, CRUX_VERSION);
	fputs("\"} 1\n", f);
	plain(f, "crux_agent_uptime_seconds", "gauge", "Seconds since cruxd started.",
	      age_s(now_ns, snap->started_ns));
	plain(f, "crux_agent_heartbeat_age_seconds", "gauge",
	      "Seconds since the last pass published its status (-1 = none yet).",
	      age_s(now_ns, snap->published_ns));
	plain(f, "crux_agent_schedule_age_seconds", "gauge",
	      "Seconds since the decision table last changed (-1 = not since start).",
	      age_s(now_ns, snap->schedule_ns));
	plain(f, "crux_agent_passes_total", "counter", "Scheduling passes run.", (double)b->passes);
	plain(f, "crux_agent_reschedules_total", "counter", "Passes that ran the scheduler.",
	      (double)b->reschedules);
	plain(f, "crux_agent_guard_changes_total", "counter",
	      "Level lifts and returns made by the fairness guard.", (double)b->guard_changes);
	plain(f, "crux_agent_guard_infeasible_jobs", "gauge",
	      "Jobs the last plan found no schedule for within CRUX_MAX_SLOWDOWN (reported, "
	      "not enforced).",
	      b->guard_infeasible);
	plain(f, "crux_agent_last_pass_seconds", "gauge", "Duration of the last pass.",
	      (double)b->last_pass_ns / 1e9);
	plain(f, "crux_agent_interval_seconds", "gauge", "Configured pass period.",
	      (double)b->interval_ns / 1e9);
	plain(f, "crux_agent_levels", "gauge", "Priority levels in use.", b->nlevels);
	plain(f, "crux_agent_table_generation", "gauge",
	      "Generation of the published decision table.", (double)b->table_generation);
	plain(f, "crux_agent_jobs", "gauge", "Jobs the agent sees.", b->njobs);
	if (b->cluster[0]) {
		/* Cluster mode only (cruxd --etcd). */
		plain(f, "crux_cluster_leader", "gauge", "1 while this host leads its cluster.",
		      b->term > 0);
		plain(f, "crux_cluster_schedule_revision", "gauge",
		      "etcd revision of the schedule this host applied (0: none yet).",
		      (double)b->schedule_revision);
		plain(f, "crux_cluster_stale", "gauge",
		      "1 while etcd is unreachable (the last schedule stays in force).",
		      b->cluster_stale);
		plain(f, "crux_cluster_schedules_written_total", "counter",
		      "Schedules this host wrote as leader.", (double)b->schedules_written);
		plain(f, "crux_cluster_resyncs_total", "counter",
		      "Times this host found another etcd store (restored, rebuilt) and "
		      "resynchronised.",
		      (double)b->cluster_resyncs);
	}
	plain(f, "crux_agent_overrides_error", "gauge",
	      "1 when the last overrides file was refused (cruxctl status says why).",
	      b->overrides_error[0] != 0);
	head(f, "crux_agent_profile_records", "gauge",
	     "Profile records in the last scan, by outcome (invalid and reaped are errors).");
	fprintf(f, "crux_agent_profile_records{result=\"valid\"} %u\n", b->records_valid);
	fprintf(f, "crux_agent_profile_records{result=\"invalid\"} %u\n", b->records_invalid);
	fprintf(f, "crux_agent_profile_records{result=\"busy\"} %u\n", b->records_busy);
	fprintf(f, "crux_agent_profile_records{result=\"reaped\"} %u\n", b->records_reaped);
	jobs(f, b);
	peers(f, b);
	if (fclose(f) != 0 || !buf) {
		free(buf);
		return CRUX_ERR_NOMEM;
	}
	*text = buf;
	*len = n;
	return CRUX_OK;
}
