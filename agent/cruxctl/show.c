/* SPDX-License-Identifier: Apache-2.0 */
/* cruxctl status / top: gather and render. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crux/log.h"
#include "crux/sched.h"
#include "placement.h"
#include "show.h"

static const char *state_name(unsigned s)
{
	switch (s) {
	case CRUX_JOB_PROFILING:
		return "profiling";
	case CRUX_JOB_SCHEDULED:
		return "scheduled";
	case CRUX_JOB_OVERRIDDEN:
		return "overridden";
	default:
		return "?";
	}
}

static const char *probe_state_name(unsigned s)
{
	switch (s) {
	case CRUXD_PROBE_NONE:
		return "pending";
	case CRUXD_PROBE_OK:
		return "ok";
	case CRUXD_PROBE_FAILED:
		return "failed";
	default:
		return "?";
	}
}

static const char *backend_name(unsigned b)
{
	static const char *const n[] = {"none", "host", "events", "cupti"};
	return b < 4 ? n[b] : "?";
}

static int add_rec(struct crux_prof_snapshot **recs, size_t *n, size_t *cap,
		   const struct crux_prof_snapshot *s)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct crux_prof_snapshot *m = realloc(*recs, nc * sizeof(*m));
		if (!m)
			return 1;
		*recs = m;
		*cap = nc;
	}
	(*recs)[*n] = *s;
	/* As cruxd does: a record the preload created names its host in the net section. */
	if (!s->id.host_addr.family && s->has_net)
		(*recs)[*n].id.host_addr = s->net.local_addr;
	(*n)++;
	return 0;
}

static int scan_cb(void *arg, const struct crux_prof_snapshot *s)
{
	struct view *v = arg;
	return add_rec(&v->recs, &v->nrecs, &v->caprecs, s);
}

static int attached_cb(void *arg, const struct crux_prof_snapshot *s)
{
	struct view *v = arg;
	return add_rec(&v->arecs, &v->narecs, &v->caparecs, s);
}

crux_status_t view_load(struct view *v, const char *dir)
{
	struct crux_dt_reader *r = NULL;

	memset(v, 0, sizeof(*v));
	snprintf(v->dir, sizeof(v->dir), "%s", dir);
	v->table = calloc(1, sizeof(*v->table));
	v->agent = calloc(1, sizeof(*v->agent));
	if (!v->table || !v->agent)
		return CRUX_ERR_NOMEM;
	/* A pread copy: nothing done to the file can fault cruxctl. */
	v->table_st = crux_dt_reader_open_copy(dir, &r, v->table_err, sizeof(v->table_err));
	v->now_ns = crux_now_ns();
	if (v->table_st == CRUX_OK) {
		v->table_st = crux_dt_read_all(r, v->table);
		if (v->table_st != CRUX_OK)
			snprintf(v->table_err, sizeof(v->table_err), "%s/%s: %s", dir, CRUX_DT_FILE,
				 crux_status_str(v->table_st));
		v->table_hb_age_ns = crux_dt_heartbeat_age(r, v->now_ns);
		v->table_stale = crux_dt_is_stale(r, v->now_ns);
		crux_dt_reader_close(r);
	}
	v->agent_st = cruxd_status_read(dir, v->agent, &v->agent_hb_age_ns);
	if (v->agent_st == CRUX_OK) {
		uint64_t timeout = v->table_st == CRUX_OK ? v->table->settings.heartbeat_timeout_ns
							  : CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS;
		uint64_t hb = v->agent_hb_age_ns;
		/* A beat after our clock read (cruxd beats while we read) is age 0, not "never". */
		v->agent_hb_age_ns = !hb ? UINT64_MAX : hb <= v->now_ns ? v->now_ns - hb : 0;
		v->agent_alive = v->agent_hb_age_ns < timeout &&
				 (kill((pid_t)v->agent->agent_pid, 0) == 0 || errno == EPERM);
	}
	v->scan_st = crux_prof_scan(dir, 0, scan_cb, v, &v->scan);
	/* Attached processes: what a live cruxd copied for us (a dead one's copies are old). */
	char adir[CRUX_PATH_MAX + 16];
	struct stat sb;
	snprintf(adir, sizeof(adir), "%s/%s", dir, CRUX_PROF_ATTACHED_DIR);
	if (v->agent_alive && lstat(adir, &sb) == 0)
		(void)crux_prof_scan(adir, CRUX_PROF_SCAN_AGENT_COPIES, attached_cb, v, NULL);
	return CRUX_OK;
}

void view_free(struct view *v)
{
	free(v->table);
	free(v->agent);
	free(v->recs);
	free(v->arecs);
	memset(v, 0, sizeof(*v));
}

static const struct cruxd_status_job *agent_job(const struct view *v, uint64_t key)
{
	if (v->agent_st != CRUX_OK)
		return NULL;
	for (uint32_t i = 0; i < v->agent->njobs; i++)
		if (v->agent->jobs[i].job_key == key)
			return &v->agent->jobs[i];
	return NULL;
}

static const struct crux_dt_job *table_job(const struct view *v, uint64_t key)
{
	if (v->table_st != CRUX_OK)
		return NULL;
	for (uint32_t i = 0; i < v->table->njobs; i++)
		if (v->table->jobs[i].job_key == key)
			return &v->table->jobs[i];
	return NULL;
}

/* One row per job: the agent's view if it runs, else aggregated from the records. */
struct row {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint32_t ranks, hosts;
	double iter, compute, comm, overlap, stall, I, k, P;
	struct crux_prof_stalls split; /* stall breakdown (placement.c) */
	bool have_metrics, have_sched;
	int level, state; /* -1 unknown */
	const struct cruxd_status_job *aj;
};

static size_t collect_rows(const struct view *v, struct row **out)
{
	size_t n = 0, cap = 16;
	struct row *rows = malloc(cap * sizeof(*rows));

#define ADD_KEY(K, ID)                                                                             \
	do {                                                                                       \
		bool found = false;                                                                \
		for (size_t q = 0; q < n && !found; q++)                                           \
			found = rows[q].key == (K);                                                \
		if (!found) {                                                                      \
			if (n == cap) {                                                            \
				struct row *nr = realloc(rows, cap * 2 * sizeof(*rows));           \
				if (!nr)                                                           \
					goto done;                                                 \
				rows = nr;                                                         \
				cap *= 2;                                                          \
			}                                                                          \
			memset(&rows[n], 0, sizeof(rows[n]));                                      \
			rows[n].key = (K);                                                         \
			snprintf(rows[n].id, sizeof(rows[n].id), "%s", (ID));                      \
			rows[n].level = rows[n].state = -1;                                        \
			n++;                                                                       \
		}                                                                                  \
	} while (0)

	if (!rows)
		return 0;
	if (v->agent_st == CRUX_OK)
		for (uint32_t i = 0; i < v->agent->njobs; i++)
			ADD_KEY(v->agent->jobs[i].job_key, v->agent->jobs[i].job_id);
	if (v->table_st == CRUX_OK)
		for (uint32_t i = 0; i < v->table->njobs; i++)
			ADD_KEY(v->table->jobs[i].job_key, v->table->jobs[i].job_id);
	for (size_t i = 0; i < v->nrecs; i++)
		ADD_KEY(v->recs[i].id.job_key, v->recs[i].id.job_id);
done:
	for (size_t i = 0; i < n; i++) {
		struct row *r = &rows[i];
		const struct cruxd_status_job *aj = agent_job(v, r->key);
		const struct crux_dt_job *tj = table_job(v, r->key);
		uint32_t nc = 0;

		r->aj = aj;
		cc_job_stalls(v, r->key, aj, &r->split);
		if (tj) {
			r->level = tj->level;
			r->state = tj->state;
		}
		if (aj) {
			r->ranks = aj->nranks;
			r->hosts = aj->nhosts;
			r->iter = aj->iter_time_s;
			r->compute = aj->compute_s;
			r->comm = aj->comm_s;
			r->overlap = aj->overlap_s;
			r->stall = aj->stall_s;
			r->I = aj->intensity;
			r->k = aj->k;
			r->P = aj->priority;
			r->have_metrics = true;
			r->have_sched = aj->state == CRUX_JOB_SCHEDULED;
			if (!tj) {
				r->level = aj->level;
				r->state = aj->state;
			}
			continue;
		}
		for (size_t q = 0; q < v->nrecs; q++) {
			const struct crux_prof_snapshot *s = &v->recs[q];
			if (s->id.job_key != r->key)
				continue;
			r->ranks++;
			if (s->has_compute) {
				nc++;
				r->iter += s->compute.iter_time_s;
				r->compute += s->compute.compute_s;
				r->comm += s->compute.comm_s;
				r->overlap += s->compute.overlap_s;
				r->stall += s->compute.stall_s;
			}
		}
		if (nc) {
			r->iter /= nc;
			r->compute /= nc;
			r->comm /= nc;
			r->overlap /= nc;
			r->stall /= nc;
			r->have_metrics = true;
		}
		{
			/* distinct hosts among the records */
			uint32_t h = 0;
			for (size_t q = 0; q < v->nrecs; q++) {
				bool dup = false;
				if (v->recs[q].id.job_key != r->key)
					continue;
				for (size_t p = 0; p < q && !dup; p++)
					dup =
					    v->recs[p].id.job_key == r->key &&
					    crux_addr_equal(&v->recs[p].id.host_addr,
							    &v->recs[q].id.host_addr) &&
					    !strcmp(v->recs[p].id.hostname, v->recs[q].id.hostname);
				h += !dup;
			}
			r->hosts = h;
		}
	}
	*out = rows;
	return n;
#undef ADD_KEY
}

static void fmt_age(uint64_t ns, char *buf, size_t len)
{
	if (ns == UINT64_MAX)
		snprintf(buf, len, "never");
	else
		snprintf(buf, len, "%.1f s ago", (double)ns / 1e9);
}

static void fmt_num(double v, bool have, char *buf, size_t len)
{
	if (!have)
		snprintf(buf, len, "-");
	else if (v != 0 && (fabs(v) >= 1e5 || fabs(v) < 1e-3))
		snprintf(buf, len, "%.2e", v);
	else
		snprintf(buf, len, "%.3f", v);
}

/* "1.35x/2x" (measured slowdown against the bound; "+N" when lifted; with
 * the guard on, "~1.20x!" / "~1.20x*": its mean, urgent / protected), "-" unknown. */
static void fmt_slowdown(const struct view *v, const struct row *r, char *buf, size_t len)
{
	const struct cruxd_status_job *aj = r->aj;
	int n;

	if (!aj || !(aj->slowdown > 0)) {
		snprintf(buf, len, "-");
		return;
	}
	n = snprintf(buf, len, "%.2fx", aj->slowdown);
	if (n > 0 && (size_t)n < len && v->agent->max_slowdown > 0)
		n += snprintf(buf + n, len - (size_t)n, "/%gx", v->agent->max_slowdown);
	if (n > 0 && (size_t)n < len && aj->lift)
		n += snprintf(buf + n, len - (size_t)n, "+%u", aj->lift);
	if (n > 0 && (size_t)n < len && v->agent->max_slowdown > 0 && aj->mean_slowdown > 0)
		snprintf(buf + n, len - (size_t)n, " ~%.2fx%s", aj->mean_slowdown,
			 aj->guard_state == CRUX_SCHED_ACCOUNT_URGENT	   ? "!"
			 : aj->guard_state == CRUX_SCHED_ACCOUNT_PROTECTED ? "*"
									   : "");
}

static void job_paths(const struct view *v, const struct row *r, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	if (r->aj) {
		for (uint8_t p = 0; p < r->aj->npaths && off + 1 < len; p++) {
			char d[CRUX_ADDR_STRLEN];
			crux_addr_format(&r->aj->paths[p].dst, d, sizeof(d));
			off += (size_t)snprintf(buf + off, len - off, "%s%s:%u(%u)", off ? " " : "",
						d, r->aj->paths[p].path_id, r->aj->paths[p].nports);
		}
	} else if (v->table_st == CRUX_OK) {
		for (uint32_t i = 0; i < v->table->nroutes && off + 1 < len; i++) {
			const struct crux_dt_route *rt = &v->table->routes[i];
			char d[CRUX_ADDR_STRLEN];
			if (rt->job_key != r->key)
				continue;
			crux_addr_format(&rt->peer, d, sizeof(d));
			off += (size_t)snprintf(buf + off, len - off, "%s%s:%u(%u)", off ? " " : "",
						d, rt->path_id, rt->nports);
		}
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

/* Which components published: the compute section's source, the plugin's net section. */
static void source_of(const struct crux_prof_snapshot *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s",
		 s->has_compute
		     ? ((s->compute.flags & CRUX_PROF_F_SRC_PROFILER) ? "profiler" : "preload")
		     : "",
		 s->has_compute && s->has_net ? "+" : "", s->has_net ? "plugin" : "");
	if (!buf[0])
		snprintf(buf, len, "-");
}

/* enum crux_coll_kind as the JSON and the text name it. */
static const char *const coll_kind_names[CRUX_COLL_KINDS] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
    "alltoall",	 "gather",    "scatter",       "sendrecv"};

static void print_peers(FILE *f, const struct crux_prof_snapshot *s)
{
	bool any_kind = false;

	if (!s->has_net)
		return;
	for (int k = 0; k < CRUX_COLL_KINDS; k++)
		any_kind |= s->net.tx_bytes_by_kind[k] != 0;
	if (any_kind) {
		fprintf(f, "    sent by collective kind (NCCL's hints):");
		for (int k = 0; k < CRUX_COLL_KINDS; k++)
			if (s->net.tx_bytes_by_kind[k])
				fprintf(f, " %s %llu", coll_kind_names[k],
					(unsigned long long)s->net.tx_bytes_by_kind[k]);
		fprintf(f, "\n");
	}
	for (uint32_t p = 0; p < s->net.npeers && p < CRUX_PROF_MAX_PEERS; p++) {
		const struct crux_prof_peer *pp = &s->net.peers[p];
		char d[CRUX_ADDR_STRLEN];
		crux_addr_format(&pp->peer, d, sizeof(d));
		fprintf(f, "    peer %-16s tx by level", d);
		for (int l = 0; l < CRUX_MAX_LEVELS; l++)
			fprintf(f, " %llu", (unsigned long long)pp->tx_bytes[l]);
		fprintf(f, "  rx by level");
		for (int l = 0; l < CRUX_MAX_LEVELS; l++)
			fprintf(f, " %llu", (unsigned long long)pp->rx_bytes[l]);
		fprintf(f, "\n");
	}
}

void view_text(const struct view *v, FILE *f, bool compact)
{
	struct row *rows = NULL;
	size_t n;
	char age[32];

	if (v->table_st == CRUX_OK) {
		const struct crux_dt_settings *s = &v->table->settings;
		fmt_age(v->table_hb_age_ns, age, sizeof(age));
		fprintf(
		    f,
		    "decision table  %s/%s  generation %llu  heartbeat %s (%s, timeout %.1f s)  "
		    "writer pid %d\n",
		    v->dir, CRUX_DT_FILE, (unsigned long long)v->table->generation, age,
		    v->table_stale ? "STALE: readers use defaults" : "fresh",
		    (double)s->heartbeat_timeout_ns / 1e9, (int)v->table->writer_pid);
		fprintf(f, "levels %u (default %u):", s->nlevels, s->default_level);
		for (uint32_t l = 0; l < s->nlevels && l < CRUX_MAX_LEVELS; l++) {
			fprintf(f, "  L%u dscp %u prio %d sl %u", l, s->levels[l].dscp,
				s->levels[l].sock_prio, s->levels[l].ib_sl);
			if (s->levels[l].weight)
				fprintf(f, " weight %u", s->levels[l].weight);
		}
		fprintf(f, "\n");
	} else {
		if (v->table_st == CRUX_ERR_NOENT)
			fprintf(f, "decision table  %s/%s  absent (plugins use defaults)\n", v->dir,
				CRUX_DT_FILE);
		else /* the reader's message: the file, the problem and the fix */
			fprintf(f, "decision table  unusable: %s\n", v->table_err);
	}
	if (v->agent_st == CRUX_OK) {
		fmt_age(v->agent_hb_age_ns, age, sizeof(age));
		fprintf(f,
			"agent           pid %u %s  heartbeat %s  passes %llu  last pass %.2f ms  "
			"reschedules %llu  overrides seq %llu  topology %s\n",
			v->agent->agent_pid, v->agent_alive ? "running" : "NOT RUNNING", age,
			(unsigned long long)v->agent->passes, (double)v->agent->last_pass_ns / 1e6,
			(unsigned long long)v->agent->reschedules,
			(unsigned long long)v->agent->overrides_seq,
			v->agent->topology[0] ? v->agent->topology : "none (single-host view)");
		if (v->agent->overrides_error[0])
			fprintf(f, "                overrides file refused: %s\n",
				v->agent->overrides_error);
		if (v->agent->cluster[0])
			fprintf(f,
				"cluster         %s  host %s  leader %s%s  schedule revision %lld "
				"(from %lld)%s\n",
				v->agent->cluster, v->agent->host,
				v->agent->leader[0] ? v->agent->leader : "none",
				v->agent->term > 0 ? " (this host)" : "",
				(long long)v->agent->schedule_revision,
				(long long)v->agent->schedule_input,
				v->agent->cluster_stale
				    ? "  STALE: etcd unreachable, last schedule kept"
				    : "");
		if (v->agent->cluster[0] && v->agent->cluster_stale && v->agent->cluster_error[0])
			fprintf(f, "                etcd: %s\n", v->agent->cluster_error);
		if (v->agent->cluster[0] && v->agent->cluster_resyncs)
			fprintf(f,
				"                resynchronised %u time(s) with etcd; last: %s\n",
				v->agent->cluster_resyncs, v->agent->cluster_resync);
		if (v->agent->max_slowdown > 0)
			fprintf(f,
				"fairness guard  max slowdown %.2fx (CRUX_MAX_SLOWDOWN)  level "
				"changes %llu  infeasible jobs %u\n",
				v->agent->max_slowdown, (unsigned long long)v->agent->guard_changes,
				v->agent->guard_infeasible);
		else
			fprintf(f, "fairness guard  off (CRUX_MAX_SLOWDOWN unset)\n");
	} else {
		fprintf(f, "agent           not running\n");
	}
	fprintf(f, "records         %u valid, %u invalid, %u busy\n\n", v->scan.valid,
		v->scan.invalid, v->scan.busy);

	n = collect_rows(v, &rows);
	fprintf(f, "%-24s %-18s %5s %5s %8s %8s %8s %8s %8s %9s %6s %9s %5s %-12s %-10s %s\n",
		"JOB", "KEY", "RANKS", "HOSTS", "ITER(s)", "COMPUTE", "COMM", "OVERLAP", "STALL",
		"I", "k", "P", "LEVEL", "SLOWDOWN", "STATE", "PATHS peer:path(ports)");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		char it[16], cp[16], cm[16], ov[16], st[16], I[16], k[16], P[16], lv[8], sd[24];
		char paths[256];

		fmt_num(r->iter, r->have_metrics, it, sizeof(it));
		fmt_num(r->compute, r->have_metrics, cp, sizeof(cp));
		fmt_num(r->comm, r->have_metrics, cm, sizeof(cm));
		fmt_num(r->overlap, r->have_metrics, ov, sizeof(ov));
		fmt_num(r->stall, r->have_metrics, st, sizeof(st));
		fmt_num(r->I, r->have_sched, I, sizeof(I));
		fmt_num(r->k, r->have_sched, k, sizeof(k));
		fmt_num(r->P, r->have_sched, P, sizeof(P));
		snprintf(lv, sizeof(lv), "%s", "dflt");
		if (r->level >= 0 && r->level < 100)
			snprintf(lv, sizeof(lv), "%d", r->level % 100);
		job_paths(v, r, paths, sizeof(paths));
		fmt_slowdown(v, r, sd, sizeof(sd));
		fprintf(
		    f,
		    "%-24.24s 0x%016llx %5u %5u %8s %8s %8s %8s %8s %9s %6s %9s %5s %-12s %-10s "
		    "%s\n",
		    r->id[0] ? r->id : "-", (unsigned long long)r->key, r->ranks, r->hosts, it, cp,
		    cm, ov, st, I, k, P, lv, sd,
		    r->state >= 0 ? state_name((unsigned)r->state) : "untabled", paths);
	}
	/* what each job loses to the network and inside its hosts (cruxctl placement: more) */
	fprintf(f, "\nstall breakdown (fraction of the iteration)\n");
	for (size_t i = 0; i < n; i++) {
		char sb[160];
		cc_fmt_stalls(&rows[i].split, sb, sizeof(sb));
		fprintf(f, "  %-24.24s %s\n", rows[i].id[0] ? rows[i].id : "-", sb);
	}
	free(rows);
	if (compact)
		return;

	if (v->table_st == CRUX_OK && v->table->nroutes) {
		fprintf(f, "\nroutes\n%-18s %-40s %6s  %s\n", "KEY", "PEER", "PATH", "PORTS");
		for (uint32_t i = 0; i < v->table->nroutes; i++) {
			const struct crux_dt_route *rt = &v->table->routes[i];
			char d[CRUX_ADDR_STRLEN];
			crux_addr_format(&rt->peer, d, sizeof(d));
			fprintf(f, "0x%016llx %-40s %6u ", (unsigned long long)rt->job_key, d,
				rt->path_id);
			for (uint8_t p = 0; p < rt->nports && p < CRUX_ROUTE_MAX_PORTS; p++)
				fprintf(f, "%c%u", p ? ',' : ' ', rt->ports[p]);
			fprintf(f, "\n");
		}
	}
	if (v->agent_st == CRUX_OK && v->agent->npeers) {
		fprintf(f, "\nprobed peers\n");
		for (uint32_t i = 0; i < v->agent->npeers; i++) {
			const struct cruxd_status_peer *p = &v->agent->peers[i];
			char d[CRUX_ADDR_STRLEN];
			crux_addr_format(&p->peer, d, sizeof(d));
			if (p->age_ms == UINT64_MAX)
				snprintf(age, sizeof(age), "never");
			else
				snprintf(age, sizeof(age), "%.1f s ago", (double)p->age_ms / 1e3);
			fprintf(f, "  %s  %s  %u path(s)  probed %s  failures %u\n", d,
				probe_state_name(p->state), p->npaths, age, p->failures);
			for (uint8_t q = 0; q < p->npaths && q < CRUXD_STATUS_PEER_PATHS; q++) {
				crux_addr_format(&p->paths[q].hop, d, sizeof(d));
				fprintf(f, "    path %u via %s  ports", q, d);
				for (uint8_t k = 0;
				     k < p->paths[q].nports && k < CRUX_ROUTE_MAX_PORTS; k++)
					fprintf(f, "%c%u", k ? ',' : ' ', p->paths[q].ports[k]);
				fprintf(f, "\n");
			}
		}
	}
	fprintf(f, "\nprofile records\n%-36s %7s %-22s %9s %-16s %8s %8s %8s %8s %8s %7s %-6s\n",
		"FILE", "PID", "JOB", "RANK", "HOST", "ITER(s)", "COMPUTE", "COMM", "OVERLAP",
		"STALL", "WINDOWS", "TIMING");
	for (size_t i = 0; i < v->nrecs; i++) {
		const struct crux_prof_snapshot *s = &v->recs[i];
		const char *base = strrchr(s->file, '/');
		char host[CRUX_ADDR_STRLEN], rank[24];

		crux_addr_format(&s->id.host_addr, host, sizeof(host));
		snprintf(rank, sizeof(rank), "%d/%d", s->id.rank, s->id.world_size);
		if (s->has_compute)
			fprintf(f,
				"%-36.36s %7d %-22.22s %9s %-16.16s %8.3f %8.3f %8.3f %8.3f %8.3f "
				"%7llu %-6s\n",
				base ? base + 1 : s->file, (int)s->pid, s->id.job_id, rank,
				s->id.host_addr.family ? host : s->id.hostname,
				s->compute.iter_time_s, s->compute.compute_s, s->compute.comm_s,
				s->compute.overlap_s, s->compute.stall_s,
				(unsigned long long)s->compute.windows,
				backend_name(s->compute.timing_backend));
		else
			fprintf(f,
				"%-36.36s %7d %-22.22s %9s %-16.16s %8s %8s %8s %8s %8s %7s %-6s\n",
				base ? base + 1 : s->file, (int)s->pid, s->id.job_id, rank,
				s->id.host_addr.family ? host : s->id.hostname, "-", "-", "-", "-",
				"-", "0", "-");
		print_peers(f, s);
	}
	if (!v->agent_alive)
		return;
	fprintf(f, "\nattached processes (copied by cruxd)\n%7s %6s %-22s %9s %-16s %-16s\n", "PID",
		"UID", "JOB", "RANK", "HOST", "SOURCE");
	if (!v->narecs)
		fprintf(f, "  none\n");
	for (size_t i = 0; i < v->narecs; i++) {
		const struct crux_prof_snapshot *s = &v->arecs[i];
		char host[CRUX_ADDR_STRLEN], rank[24], src[40];
		crux_addr_format(&s->id.host_addr, host, sizeof(host));
		snprintf(rank, sizeof(rank), "%d/%d", s->id.rank, s->id.world_size);
		source_of(s, src, sizeof(src));
		fprintf(f, "%7d %6lld %-22.22s %9s %-16.16s %-16s\n", (int)s->pid,
			(long long)s->uid, s->id.job_id, rank,
			s->id.host_addr.family ? host : s->id.hostname, src);
		print_peers(f, s);
	}
}

static void json_addr(struct crux_json *j, const struct crux_addr *a)
{
	char b[CRUX_ADDR_STRLEN];
	if (!a->family) {
		crux_json_null(j);
		return;
	}
	crux_addr_format(a, b, sizeof(b));
	crux_json_str(j, b);
}

static void json_keyhex(struct crux_json *j, uint64_t key)
{
	char b[24];
	snprintf(b, sizeof(b), "0x%016llx", (unsigned long long)key);
	crux_json_str(j, b);
}

/* One record: a v1 file's, or an attached process's as cruxd copied it. */
static void json_record(struct crux_json *j, const struct crux_prof_snapshot *s)
{
	crux_json_obj(j);
	if (!s->attached) {
		crux_json_key(j, "file");
		crux_json_str(j, s->file);
	}
	crux_json_key(j, "pid");
	crux_json_i64(j, s->pid);
	crux_json_key(j, "uid");
	crux_json_i64(j, s->uid);
	crux_json_key(j, "job_key");
	json_keyhex(j, s->id.job_key);
	crux_json_key(j, "job_id");
	crux_json_str(j, s->id.job_id);
	crux_json_key(j, "hostname");
	crux_json_str(j, s->id.hostname);
	crux_json_key(j, "host_addr");
	json_addr(j, &s->id.host_addr);
	crux_json_key(j, "rank");
	crux_json_i64(j, s->id.rank);
	crux_json_key(j, "world_size");
	crux_json_i64(j, s->id.world_size);
	crux_json_key(j, "compute");
	if (s->has_compute) {
		const struct crux_prof_compute *c = &s->compute;
		crux_json_obj(j);
		crux_json_key(j, "windows");
		crux_json_u64(j, c->windows);
		crux_json_key(j, "iterations");
		crux_json_u64(j, c->total_iterations);
		crux_json_key(j, "iter_time_s");
		crux_json_num(j, c->iter_time_s);
		crux_json_key(j, "compute_s");
		crux_json_num(j, c->compute_s);
		crux_json_key(j, "comm_s");
		crux_json_num(j, c->comm_s);
		crux_json_key(j, "overlap_s");
		crux_json_num(j, c->overlap_s);
		crux_json_key(j, "stall_s");
		crux_json_num(j, c->stall_s);
		crux_json_key(j, "window_end_ns"); /* CLOCK_MONOTONIC */
		crux_json_u64(j, c->window_end_ns);
		crux_json_key(j, "window_s");
		crux_json_num(j, c->window_s);
		crux_json_key(j, "timing");
		crux_json_str(j, backend_name(c->timing_backend));
		/* Which component measured it: the preload or the NCCL profiler plugin. */
		crux_json_key(j, "source");
		crux_json_str(j, (c->flags & CRUX_PROF_F_SRC_PROFILER) ? "profiler" : "preload");
		crux_json_key(j, "flags");
		crux_json_u64(j, c->flags);
		crux_json_end_obj(j);
	} else {
		crux_json_null(j);
	}
	if (s->attached) {
		char src[40];
		source_of(s, src, sizeof(src));
		crux_json_key(j, "source");
		crux_json_str(j, src);
	}
	crux_json_key(j, "peers");
	crux_json_arr(j);
	for (uint32_t p = 0; s->has_net && p < s->net.npeers && p < CRUX_PROF_MAX_PEERS; p++) {
		const struct crux_prof_peer *pp = &s->net.peers[p];
		crux_json_obj(j);
		crux_json_key(j, "peer");
		json_addr(j, &pp->peer);
		crux_json_key(j, "tx_bytes");
		crux_json_arr(j);
		for (int l = 0; l < CRUX_MAX_LEVELS; l++)
			crux_json_u64(j, pp->tx_bytes[l]);
		crux_json_end_arr(j);
		crux_json_key(j, "rx_bytes");
		crux_json_arr(j);
		for (int l = 0; l < CRUX_MAX_LEVELS; l++)
			crux_json_u64(j, pp->rx_bytes[l]);
		crux_json_end_arr(j);
		crux_json_end_obj(j);
	}
	crux_json_end_arr(j);
	/* Bytes the plugin sent by the collective kind NCCL announced (net ABI v11/v12 hints). */
	crux_json_key(j, "net_tx_bytes_by_kind");
	if (s->has_net) {
		crux_json_obj(j);
		for (int k = 0; k < CRUX_COLL_KINDS; k++) {
			crux_json_key(j, coll_kind_names[k]);
			crux_json_u64(j, s->net.tx_bytes_by_kind[k]);
		}
		crux_json_end_obj(j);
	} else {
		crux_json_null(j);
	}
	{
		/* the plugin's busy time (v5) and this rank's stall breakdown */
		struct crux_prof_stalls sb;
		crux_json_key(j, "net_busy");
		if (s->has_net && s->net.busy_window_ns) {
			crux_json_obj(j);
			crux_json_key(j, "total_s");
			crux_json_num(j, (double)s->net.busy_ns / 1e9);
			crux_json_key(j, "period_s");
			crux_json_num(j, (double)s->net.busy_window_ns / 1e9);
			crux_json_key(j, "busy_s");
			crux_json_num(j, (double)s->net.busy_period_ns / 1e9);
			crux_json_end_obj(j);
		} else {
			crux_json_null(j);
		}
		crux_prof_stalls_of(&s->compute, s->has_compute, &s->net, s->has_net, &sb);
		crux_json_key(j, "stalls");
		cc_json_stalls(j, &sb);
	}
	crux_json_end_obj(j);
}

void view_json(const struct view *v, struct crux_json *j)
{
	struct row *rows = NULL;
	size_t n;

	crux_json_obj(j);
	crux_json_key(j, "shm_dir");
	crux_json_str(j, v->dir);
	crux_json_key(j, "table");
	if (v->table_st == CRUX_OK) {
		const struct crux_dt_settings *s = &v->table->settings;
		crux_json_obj(j);
		crux_json_key(j, "generation");
		crux_json_u64(j, v->table->generation);
		crux_json_key(j, "heartbeat_age_s");
		if (v->table_hb_age_ns == UINT64_MAX)
			crux_json_null(j);
		else
			crux_json_num(j, (double)v->table_hb_age_ns / 1e9);
		crux_json_key(j, "stale");
		crux_json_bool(j, v->table_stale);
		crux_json_key(j, "heartbeat_timeout_s");
		crux_json_num(j, (double)s->heartbeat_timeout_ns / 1e9);
		crux_json_key(j, "writer_pid");
		crux_json_i64(j, v->table->writer_pid);
		crux_json_key(j, "nlevels");
		crux_json_u64(j, s->nlevels);
		crux_json_key(j, "default_level");
		crux_json_u64(j, s->default_level);
		crux_json_key(j, "levels");
		crux_json_arr(j);
		for (uint32_t l = 0; l < s->nlevels && l < CRUX_MAX_LEVELS; l++) {
			crux_json_obj(j);
			crux_json_key(j, "level");
			crux_json_u64(j, l);
			crux_json_key(j, "dscp");
			crux_json_u64(j, s->levels[l].dscp);
			crux_json_key(j, "sock_prio");
			crux_json_i64(j, s->levels[l].sock_prio);
			crux_json_key(j, "ib_sl");
			crux_json_u64(j, s->levels[l].ib_sl);
			crux_json_key(j, "weight");
			crux_json_u64(j, s->levels[l].weight);
			crux_json_end_obj(j);
		}
		crux_json_end_arr(j);
		crux_json_key(j, "jobs");
		crux_json_arr(j);
		for (uint32_t i = 0; i < v->table->njobs; i++) {
			const struct crux_dt_job *tj = &v->table->jobs[i];
			crux_json_obj(j);
			crux_json_key(j, "key");
			json_keyhex(j, tj->job_key);
			crux_json_key(j, "id");
			crux_json_str(j, tj->job_id);
			crux_json_key(j, "level");
			crux_json_u64(j, tj->level);
			crux_json_key(j, "state");
			crux_json_str(j, state_name(tj->state));
			crux_json_end_obj(j);
		}
		crux_json_end_arr(j);
		crux_json_key(j, "routes");
		crux_json_arr(j);
		for (uint32_t i = 0; i < v->table->nroutes; i++) {
			const struct crux_dt_route *rt = &v->table->routes[i];
			crux_json_obj(j);
			crux_json_key(j, "key");
			json_keyhex(j, rt->job_key);
			crux_json_key(j, "peer");
			json_addr(j, &rt->peer);
			crux_json_key(j, "path");
			crux_json_u64(j, rt->path_id);
			crux_json_key(j, "ports");
			crux_json_arr(j);
			for (uint8_t p = 0; p < rt->nports && p < CRUX_ROUTE_MAX_PORTS; p++)
				crux_json_u64(j, rt->ports[p]);
			crux_json_end_arr(j);
			crux_json_end_obj(j);
		}
		crux_json_end_arr(j);
		crux_json_end_obj(j);
	} else {
		crux_json_obj(j);
		crux_json_key(j, "error");
		crux_json_str(j, v->table_st == CRUX_ERR_NOENT ? "absent"
							       : crux_status_str(v->table_st));
		crux_json_key(j, "message");
		crux_json_str(j, v->table_st == CRUX_ERR_NOENT ? "" : v->table_err);
		crux_json_end_obj(j);
	}
	crux_json_key(j, "agent");
	if (v->agent_st == CRUX_OK) {
		crux_json_obj(j);
		crux_json_key(j, "pid");
		crux_json_u64(j, v->agent->agent_pid);
		crux_json_key(j, "running");
		crux_json_bool(j, v->agent_alive);
		crux_json_key(j, "heartbeat_age_s");
		if (v->agent_hb_age_ns == UINT64_MAX)
			crux_json_null(j);
		else
			crux_json_num(j, (double)v->agent_hb_age_ns / 1e9);
		crux_json_key(j, "passes");
		crux_json_u64(j, v->agent->passes);
		crux_json_key(j, "last_pass_ms");
		crux_json_num(j, (double)v->agent->last_pass_ns / 1e6);
		crux_json_key(j, "reschedules");
		crux_json_u64(j, v->agent->reschedules);
		crux_json_key(j, "max_slowdown");
		if (v->agent->max_slowdown > 0)
			crux_json_num(j, v->agent->max_slowdown);
		else
			crux_json_null(j);
		crux_json_key(j, "guard_changes");
		crux_json_u64(j, v->agent->guard_changes);
		crux_json_key(j, "guard_infeasible");
		crux_json_u64(j, v->agent->guard_infeasible);
		crux_json_key(j, "overrides_seq");
		crux_json_u64(j, v->agent->overrides_seq);
		crux_json_key(j, "overrides_error");
		crux_json_str(j, v->agent->overrides_error);
		crux_json_key(j, "topology");
		crux_json_str(j, v->agent->topology);
		crux_json_key(j, "cluster");
		if (v->agent->cluster[0]) {
			crux_json_obj(j);
			crux_json_key(j, "name");
			crux_json_str(j, v->agent->cluster);
			crux_json_key(j, "host");
			crux_json_str(j, v->agent->host);
			crux_json_key(j, "leader");
			crux_json_str(j, v->agent->leader);
			crux_json_key(j, "leading");
			crux_json_bool(j, v->agent->term > 0);
			crux_json_key(j, "schedule_revision");
			crux_json_u64(j, (uint64_t)v->agent->schedule_revision);
			crux_json_key(j, "schedule_input_revision");
			crux_json_u64(j, (uint64_t)v->agent->schedule_input);
			crux_json_key(j, "stale");
			crux_json_bool(j, v->agent->cluster_stale);
			crux_json_key(j, "error");
			crux_json_str(j, v->agent->cluster_error);
			crux_json_key(j, "resyncs");
			crux_json_u64(j, v->agent->cluster_resyncs);
			crux_json_key(j, "last_resync");
			crux_json_str(j, v->agent->cluster_resync);
			crux_json_end_obj(j);
		} else {
			crux_json_null(j);
		}
		crux_json_key(j, "peers");
		crux_json_arr(j);
		for (uint32_t i = 0; i < v->agent->npeers; i++) {
			const struct cruxd_status_peer *p = &v->agent->peers[i];
			crux_json_obj(j);
			crux_json_key(j, "peer");
			json_addr(j, &p->peer);
			crux_json_key(j, "state");
			crux_json_str(j, probe_state_name(p->state));
			crux_json_key(j, "failures");
			crux_json_u64(j, p->failures);
			crux_json_key(j, "age_s");
			if (p->age_ms == UINT64_MAX)
				crux_json_null(j);
			else
				crux_json_num(j, (double)p->age_ms / 1e3);
			crux_json_key(j, "paths");
			crux_json_arr(j);
			for (uint8_t q = 0; q < p->npaths && q < CRUXD_STATUS_PEER_PATHS; q++) {
				crux_json_obj(j);
				crux_json_key(j, "hop");
				json_addr(j, &p->paths[q].hop);
				crux_json_key(j, "ports");
				crux_json_arr(j);
				for (uint8_t k = 0;
				     k < p->paths[q].nports && k < CRUX_ROUTE_MAX_PORTS; k++)
					crux_json_u64(j, p->paths[q].ports[k]);
				crux_json_end_arr(j);
				crux_json_end_obj(j);
			}
			crux_json_end_arr(j);
			crux_json_end_obj(j);
		}
		crux_json_end_arr(j);
		crux_json_end_obj(j);
	} else {
		crux_json_null(j);
	}
	crux_json_key(j, "jobs");
	crux_json_arr(j);
	n = collect_rows(v, &rows);
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		crux_json_obj(j);
		crux_json_key(j, "key");
		json_keyhex(j, r->key);
		crux_json_key(j, "id");
		crux_json_str(j, r->id);
		crux_json_key(j, "ranks");
		crux_json_u64(j, r->ranks);
		crux_json_key(j, "hosts");
		crux_json_arr(j);
		if (r->aj)
			for (uint32_t h = 0; h < r->aj->nhosts && h < CRUXD_STATUS_JOB_HOSTS; h++)
				json_addr(j, &r->aj->hosts[h]);
		crux_json_end_arr(j);
		crux_json_key(j, "nhosts");
		crux_json_u64(j, r->hosts);
#define NUM(name, val, have)                                                                       \
	do {                                                                                       \
		crux_json_key(j, name);                                                            \
		if (have)                                                                          \
			crux_json_num(j, val);                                                     \
		else                                                                               \
			crux_json_null(j);                                                         \
	} while (0)
		NUM("iter_time_s", r->iter, r->have_metrics);
		NUM("compute_s", r->compute, r->have_metrics);
		NUM("comm_s", r->comm, r->have_metrics);
		NUM("overlap_s", r->overlap, r->have_metrics);
		NUM("stall_s", r->stall, r->have_metrics);
		NUM("work_gpu_s", r->aj ? r->aj->work : 0, r->aj != NULL);
		NUM("bytes_per_iter", r->aj ? r->aj->bytes_per_iter : 0, r->aj != NULL);
		NUM("comm_time_s", r->aj ? r->aj->comm_time_s : 0, r->have_sched);
		NUM("intensity", r->I, r->have_sched);
		NUM("k", r->k, r->have_sched);
		NUM("priority", r->P, r->have_sched);
#undef NUM
		crux_json_key(j, "stalls");
		cc_json_stalls(j, &r->split);
		crux_json_key(j, "level");
		if (r->level >= 0)
			crux_json_i64(j, r->level);
		else
			crux_json_null(j);
		crux_json_key(j, "state");
		crux_json_str(j, r->state >= 0 ? state_name((unsigned)r->state) : "untabled");
		crux_json_key(j, "clamped");
		crux_json_bool(j, r->aj && r->aj->clamped);
		crux_json_key(j, "iso_iter_s");
		if (r->aj && r->aj->iso_iter_s > 0)
			crux_json_num(j, r->aj->iso_iter_s);
		else
			crux_json_null(j);
		crux_json_key(j, "slowdown");
		if (r->aj && r->aj->slowdown > 0)
			crux_json_num(j, r->aj->slowdown);
		else
			crux_json_null(j);
		crux_json_key(j, "guard_lift");
		crux_json_u64(j, r->aj ? r->aj->lift : 0);
		crux_json_key(j, "mean_slowdown");
		if (r->aj && r->aj->mean_slowdown > 0)
			crux_json_num(j, r->aj->mean_slowdown);
		else
			crux_json_null(j);
		crux_json_key(j, "guard_state");
		if (r->aj && v->agent->max_slowdown > 0)
			crux_json_str(j, crux_sched_account_state_name(r->aj->guard_state));
		else
			crux_json_null(j);
		crux_json_key(j, "profiling_left_s");
		crux_json_num(j, r->aj ? (double)r->aj->profiling_left_ms / 1e3 : 0);
		crux_json_key(j, "paths");
		crux_json_arr(j);
		for (uint8_t p = 0; r->aj && p < r->aj->npaths && p < CRUXD_STATUS_JOB_PATHS; p++) {
			const struct cruxd_status_path *sp = &r->aj->paths[p];
			crux_json_obj(j);
			crux_json_key(j, "src");
			json_addr(j, &sp->src);
			crux_json_key(j, "dst");
			json_addr(j, &sp->dst);
			crux_json_key(j, "path");
			crux_json_u64(j, sp->path_id);
			crux_json_key(j, "ports");
			crux_json_u64(j, sp->nports);
			crux_json_key(j, "bytes_per_iter");
			crux_json_num(j, sp->bytes_per_iter);
			crux_json_end_obj(j);
		}
		crux_json_end_arr(j);
		crux_json_end_obj(j);
	}
	free(rows);
	crux_json_end_arr(j);
	crux_json_key(j, "records");
	crux_json_obj(j);
	crux_json_key(j, "valid");
	crux_json_u64(j, v->scan.valid);
	crux_json_key(j, "invalid");
	crux_json_u64(j, v->scan.invalid);
	crux_json_key(j, "busy");
	crux_json_u64(j, v->scan.busy);
	crux_json_key(j, "list");
	crux_json_arr(j);
	for (size_t i = 0; i < v->nrecs; i++)
		json_record(j, &v->recs[i]);
	crux_json_end_arr(j);
	crux_json_end_obj(j);
	/* Processes attached to a running cruxd (null: no agent runs). */
	crux_json_key(j, "attached");
	if (v->agent_alive) {
		crux_json_arr(j);
		for (size_t i = 0; i < v->narecs; i++)
			json_record(j, &v->arecs[i]);
		crux_json_end_arr(j);
	} else {
		crux_json_null(j);
	}
	crux_json_end_obj(j);
}
