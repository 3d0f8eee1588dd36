/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxctl: inspect and steer Crux on this host.
 *   status, top, set, clear, plan, probe (see usage()).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "crux/agent.h"
#include "crux/decision_writer.h"
#include "crux/env.h"
#include "crux/json.h"
#include "crux/log.h"
#include "crux/overrides.h"
#include "crux/probe.h"
#include "crux/sched_cli.h"
#include "crux_config.h"
#include "placement.h"
#include "show.h"

/* Set by SIGINT/SIGTERM during 'top': cruxctl's only global state. */
static volatile sig_atomic_t cruxctl_sig_stop;

static void on_signal(int sig)
{
	(void)sig;
	cruxctl_sig_stop = 1;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: cruxctl [--shm-dir DIR] [--json] COMMAND [options]\n"
	    "  status                      decision table, agent, jobs, routes, probed paths,\n"
	    "                              profile records with their byte counters\n"
	    "  top [--interval DUR] [--iterations N]\n"
	    "                              live view; q or Ctrl-C quits\n"
	    "  placement                   per job: GPU intensity, compute / network / intra-host\n"
	    "                              stall fractions, bytes per iteration by host pair\n"
	    "                              (--json: schema crux.placement/1, for schedulers)\n"
	    "  set --job ID --level N [--route PEER=PATH[:PORT,PORT...]]... [--timeout DUR]\n"
	    "                              override a job's level (and paths)\n"
	    "  clear [--job ID]            remove one override, or all of them\n"
	    "  plan --topology FILE --jobs FILE [--levels K] [--policy NAME] ...\n"
	    "                              offline schedule (scheduler library)\n"
	    "  probe PEER [--proto tcp|udp] [--hops N] [--expect N] [--ports LO-HI]\n"
	    "        [--per-path N] [--dst-port P] [--port P]\n"
	    "                              discover which source ports take which ECMP path\n"
	    "ID is a job id as shown by status (a bare name means CRUX_JOB_ID's 'env:NAME'),\n"
	    "or a key 0x<hex>. With an agent running, set/clear go through it (overrides file\n"
	    "%s, acknowledged in its status record); without one, they write the\n"
	    "decision table directly (--timeout sets the table's heartbeat timeout then).\n"
	    "DIR defaults to CRUX_SHM_DIR or %s.\n",
	    CRUXD_OVERRIDES_FILE, CRUX_SHM_DIR_DEFAULT);
}

struct ctx {
	char dir[CRUX_PATH_MAX];
	bool json;
	bool placement; /* cruxctl placement: the network-sensitivity view (placement.c) */
};

static int fail(const struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(const struct ctx *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->json) {
		struct crux_json j;
		crux_json_init(&j, stdout);
		crux_json_obj(&j);
		crux_json_key(&j, "ok");
		crux_json_bool(&j, false);
		crux_json_key(&j, "error");
		crux_json_str(&j, msg);
		crux_json_end_obj(&j);
		crux_json_done(&j);
	}
	fprintf(stderr, "cruxctl: %s\n", msg);
	return 1;
}

/* ---- status / top ------------------------------------------------------- */

static int cmd_status(const struct ctx *c)
{
	struct view v;
	char derr[512];
	/* An unsafe directory is said once, by itself, before anything in it is read. */
	if (crux_shm_dir_check_ex(c->dir, false, derr, sizeof(derr)) == CRUX_ERR_PERM)
		return fail(c, "%s", derr);
	crux_status_t st = view_load(&v, c->dir);

	if (st != CRUX_OK) {
		view_free(&v);
		return fail(c, "cannot read %s: %s", c->dir, crux_status_str(st));
	}
	/* The reason itself, never "see above": a table problem is not the directory's. */
	if (v.scan_st == CRUX_ERR_PERM) {
		char err[512];
		(void)crux_shm_dir_check_ex(c->dir, false, err, sizeof(err));
		view_free(&v);
		return fail(c, "%s", err);
	}
	if (v.table_st == CRUX_ERR_PERM) {
		int rc = fail(c, "%s", v.table_err);
		view_free(&v);
		return rc;
	}
	if (c->json) {
		struct crux_json j;
		crux_json_init(&j, stdout);
		if (c->placement)
			cc_placement_json(&v, &j);
		else
			view_json(&v, &j);
		crux_json_done(&j);
	} else if (c->placement) {
		cc_placement_text(&v, stdout);
	} else {
		view_text(&v, stdout, false);
	}
	view_free(&v);
	return 0;
}

static int cmd_top(const struct ctx *c, int argc, char **argv)
{
	uint64_t interval = 1000000000ull;
	long long iterations = 0, frame = 0;
	struct termios old, raw;
	bool tty = isatty(STDIN_FILENO) && !c->json;
	struct sigaction sa;
	char err[256];

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
			if (crux_parse_duration_ns("--interval", argv[++i], 50000000ull,
						   3600000000000ull, 1000000000ull, &interval, err,
						   sizeof(err)) != CRUX_OK)
				return fail(c, "%s", err);
		} else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
			if (crux_parse_int("--iterations", argv[++i], 1, 1000000000, &iterations,
					   err, sizeof(err)) != CRUX_OK)
				return fail(c, "%s", err);
		} else {
			return fail(c, "top: unknown option '%s'", argv[i]);
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (tty && tcgetattr(STDIN_FILENO, &old) == 0) {
		raw = old;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	} else {
		tty = false;
	}
	while (!cruxctl_sig_stop) {
		struct view v;
		uint64_t until;
		bool quit = false;

		if (view_load(&v, c->dir) == CRUX_OK) {
			if (c->json) {
				struct crux_json j;
				crux_json_init(&j, stdout);
				view_json(&v, &j);
				crux_json_done(&j);
			} else {
				time_t now = time(NULL);
				char ts[32];
				strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&now));
				fputs("\033[H\033[2J", stdout);
				printf("cruxctl top  %s  every %.1f s  (q or Ctrl-C quits)\n\n", ts,
				       (double)interval / 1e9);
				view_text(&v, stdout, true);
				fflush(stdout);
			}
		}
		view_free(&v);
		if (iterations && ++frame >= iterations)
			break;
		until = crux_now_ns() + interval;
		while (!cruxctl_sig_stop && !quit) {
			uint64_t now = crux_now_ns();
			struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
			int ms;

			if (now >= until)
				break;
			ms = (int)((until - now) / 1000000) + 1;
			if (!tty) {
				struct timespec ts = {.tv_sec = ms / 1000,
						      .tv_nsec = (long)(ms % 1000) * 1000000L};
				nanosleep(&ts, NULL);
				continue;
			}
			if (poll(&p, 1, ms) > 0) {
				char ch;
				if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
					quit = true;
			}
		}
		if (quit)
			break;
	}
	if (tty)
		tcsetattr(STDIN_FILENO, TCSANOW, &old);
	return 0;
}

/* ---- set / clear ---------------------------------------------------------- */

struct known {
	struct view v;
};

/* A job reference to (key, id), looking at the jobs this host knows. */
/* A file cruxctl or cruxd wrote, now unreadable (edited by hand, truncated). */
static bool overrides_corrupt(crux_status_t st)
{
	return st == CRUX_ERR_INVAL || st == CRUX_ERR_RANGE || st == CRUX_ERR_CORRUPT;
}

#define OVERRIDES_FIX                                                                              \
	"; fix: correct it, or run 'cruxctl clear' to replace it (drops every override)"

static int resolve_job(const struct ctx *c, const struct view *v, const char *ref, uint64_t *key,
		       char *id, size_t idlen)
{
	char err[256], alt[CRUX_JOB_ID_LEN + 8];
	const char *cands[2] = {ref, NULL};
	crux_status_t st;

	if (ref[0] == '0' && (ref[1] == 'x' || ref[1] == 'X')) {
		st = cruxd_job_ref_parse(ref, key, id, idlen, err, sizeof(err));
		if (st != CRUX_OK)
			return fail(c, "%s", err);
		/* a readable id for the key, if anyone knows it */
		if (v->table_st == CRUX_OK)
			for (uint32_t i = 0; i < v->table->njobs; i++)
				if (v->table->jobs[i].job_key == *key)
					snprintf(id, idlen, "%s", v->table->jobs[i].job_id);
		for (size_t i = 0; i < v->nrecs; i++)
			if (v->recs[i].id.job_key == *key)
				snprintf(id, idlen, "%s", v->recs[i].id.job_id);
		return 0;
	}
	if (!strchr(ref, ':')) {
		snprintf(alt, sizeof(alt), "env:%s", ref);
		cands[1] = alt;
	}
	for (int k = 0; k < 2 && cands[k]; k++) {
		const char *want = cands[k];
		if (v->table_st == CRUX_OK)
			for (uint32_t i = 0; i < v->table->njobs; i++)
				if (!strcmp(v->table->jobs[i].job_id, want)) {
					*key = v->table->jobs[i].job_key;
					snprintf(id, idlen, "%s", want);
					return 0;
				}
		for (size_t i = 0; i < v->nrecs; i++)
			if (!strcmp(v->recs[i].id.job_id, want)) {
				*key = v->recs[i].id.job_key;
				snprintf(id, idlen, "%s", want);
				return 0;
			}
	}
	/* Not running yet: the key every rank will derive from that id. */
	st = cruxd_job_ref_parse(cands[1] ? cands[1] : ref, key, id, idlen, err, sizeof(err));
	if (st != CRUX_OK)
		return fail(c, "%s", err);
	return 0;
}

static void merge_routes(struct cruxd_override *o, const struct cruxd_override_route *r, int n)
{
	for (int i = 0; i < n; i++) {
		bool done = false;
		for (uint8_t k = 0; k < o->nroutes && !done; k++)
			if (crux_addr_equal(&o->routes[k].peer, &r[i].peer)) {
				o->routes[k] = r[i];
				done = true;
			}
		if (!done && o->nroutes < CRUXD_OVR_MAX_ROUTES)
			o->routes[o->nroutes++] = r[i];
	}
}

struct change {
	bool set;
	bool all;
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	int level;
	int nroutes;
	struct cruxd_override_route routes[CRUXD_OVR_MAX_ROUTES];
	/* Cluster mode, before a clear: take into this host's file the
	 * overrides in force that another host set (from this table), so the
	 * clear that follows removes them from etcd too. */
	const struct crux_dt_contents *adopt;
};

/* Apply to the overrides list; false when clearing something that is not there. */
static bool change_overrides(struct cruxd_overrides *o, const struct change *ch)
{
	if (ch->adopt) {
		bool added = false;
		for (uint32_t i = 0; i < ch->adopt->njobs; i++) {
			const struct crux_dt_job *j = &ch->adopt->jobs[i];
			struct cruxd_override x;
			if (j->state != CRUX_JOB_OVERRIDDEN ||
			    (!ch->all && j->job_key != ch->key) ||
			    cruxd_overrides_find(o, j->job_key) >= 0)
				continue;
			memset(&x, 0, sizeof(x));
			x.job_key = j->job_key;
			snprintf(x.job_id, sizeof(x.job_id), "%s", j->job_id);
			x.level = j->level;
			added |= cruxd_overrides_put(o, &x) == CRUX_OK;
		}
		return added;
	}
	if (ch->set) {
		struct cruxd_override x;
		int i = cruxd_overrides_find(o, ch->key);
		if (i >= 0)
			x = o->o[i];
		else
			memset(&x, 0, sizeof(x));
		x.job_key = ch->key;
		snprintf(x.job_id, sizeof(x.job_id), "%s", ch->id);
		x.level = (uint8_t)ch->level;
		merge_routes(&x, ch->routes, ch->nroutes);
		return cruxd_overrides_put(o, &x) == CRUX_OK;
	}
	if (ch->all) {
		o->n = 0;
		return true;
	}
	return cruxd_overrides_remove(o, ch->key);
}

/* Without an agent: edit the table itself. */
static int change_table(const struct ctx *c, struct crux_dt_writer *w, const struct change *ch)
{
	struct crux_dt_contents *t = malloc(sizeof(*t));
	uint32_t nj = 0, nr = 0;
	bool found = false;
	crux_status_t st;
	int rc = 0;

	if (!t)
		return fail(c, "out of memory");
	st = crux_dt_writer_read(w, t);
	if (st != CRUX_OK) {
		free(t);
		return fail(c, "cannot read the decision table: %s", crux_status_str(st));
	}
	for (uint32_t i = 0; i < t->njobs; i++) {
		struct crux_dt_job *j = &t->jobs[i];
		bool drop = false;
		if (j->job_key == ch->key) {
			found = true;
			if (ch->set) {
				j->level = (uint8_t)ch->level;
				j->state = CRUX_JOB_OVERRIDDEN;
				snprintf(j->job_id, sizeof(j->job_id), "%s", ch->id);
			} else {
				drop = j->state == CRUX_JOB_OVERRIDDEN;
			}
		} else if (!ch->set && ch->all) {
			drop = j->state == CRUX_JOB_OVERRIDDEN;
		}
		if (!drop)
			t->jobs[nj++] = *j;
	}
	if (ch->set && !found) {
		if (nj >= CRUX_DT_MAX_JOBS) {
			free(t);
			return fail(c, "the decision table is full (%d jobs)", CRUX_DT_MAX_JOBS);
		}
		memset(&t->jobs[nj], 0, sizeof(t->jobs[nj]));
		t->jobs[nj].job_key = ch->key;
		snprintf(t->jobs[nj].job_id, sizeof(t->jobs[nj].job_id), "%s", ch->id);
		t->jobs[nj].level = (uint8_t)ch->level;
		t->jobs[nj].state = CRUX_JOB_OVERRIDDEN;
		nj++;
	}
	for (uint32_t i = 0; i < t->nroutes; i++) {
		struct crux_dt_route *r = &t->routes[i];
		bool keep = true;
		bool job_gone = true;
		for (uint32_t k = 0; k < nj; k++)
			job_gone &= t->jobs[k].job_key != r->job_key;
		if (job_gone)
			keep = false;
		if (ch->set && r->job_key == ch->key)
			for (int k = 0; k < ch->nroutes; k++)
				if (crux_addr_equal(&ch->routes[k].peer, &r->peer))
					keep = false;
		if (keep)
			t->routes[nr++] = *r;
	}
	for (int k = 0; ch->set && k < ch->nroutes; k++) {
		struct crux_dt_route *r;
		if (nr >= CRUX_DT_MAX_ROUTES) {
			free(t);
			return fail(c, "the decision table is full (%d routes)",
				    CRUX_DT_MAX_ROUTES);
		}
		r = &t->routes[nr++];
		memset(r, 0, sizeof(*r));
		r->job_key = ch->key;
		r->peer = ch->routes[k].peer;
		r->path_id = ch->routes[k].path_id;
		r->nports = ch->routes[k].nports;
		memcpy(r->ports, ch->routes[k].ports, sizeof(r->ports));
	}
	if (!ch->set && !ch->all && !found)
		rc = fail(c, "job %s (0x%016llx) has no override (see 'cruxctl status')",
			  ch->id[0] ? ch->id : "-", (unsigned long long)ch->key);
	if (rc == 0) {
		char err[512] = "";
		st = crux_dt_publish_ex(w, t->jobs, nj, t->routes, nr, err, sizeof(err));
		if (st != CRUX_OK)
			rc = fail(c, "cannot write the decision table: %s",
				  err[0] ? err : crux_status_str(st));
		else
			crux_dt_heartbeat(w);
	}
	free(t);
	return rc;
}

static int report(const struct ctx *c, const struct change *ch, const char *via)
{
	if (c->json) {
		struct crux_json j;
		char k[24];
		crux_json_init(&j, stdout);
		crux_json_obj(&j);
		crux_json_key(&j, "ok");
		crux_json_bool(&j, true);
		crux_json_key(&j, "via");
		crux_json_str(&j, via);
		crux_json_key(&j, "action");
		crux_json_str(&j, ch->set ? "set" : "clear");
		if (!ch->all) {
			snprintf(k, sizeof(k), "0x%016llx", (unsigned long long)ch->key);
			crux_json_key(&j, "key");
			crux_json_str(&j, k);
			crux_json_key(&j, "id");
			crux_json_str(&j, ch->id);
		}
		if (ch->set) {
			crux_json_key(&j, "level");
			crux_json_i64(&j, ch->level);
		}
		crux_json_end_obj(&j);
		crux_json_done(&j);
	} else if (ch->set) {
		printf("job %s (0x%016llx) set to level %d (%s)\n", ch->id[0] ? ch->id : "-",
		       (unsigned long long)ch->key, ch->level, via);
	} else if (ch->all) {
		printf("all overrides cleared (%s)\n", via);
	} else {
		printf("override of job %s (0x%016llx) cleared (%s)\n", ch->id[0] ? ch->id : "-",
		       (unsigned long long)ch->key, via);
	}
	return 0;
}

static int through_agent(const struct ctx *c, const struct change *ch, pid_t holder,
			 uint64_t timeout_ns)
{
	struct cruxd_overrides *o = calloc(1, sizeof(*o)), *old = calloc(1, sizeof(*old));
	struct cruxd_status_body *sb = malloc(sizeof(*sb));
	bool had_file = false, replaced = false;
	char prior_error[sizeof(sb->overrides_error)];
	uint64_t hb = 0, deadline, seq;
	char err[256];
	crux_status_t st;
	int rc = 1;

	if (!o || !old || !sb) {
		rc = fail(c, "out of memory");
		goto out;
	}
	st = cruxd_status_read(c->dir, sb, &hb);
	if (st != CRUX_OK || !hb || crux_now_ns() - hb > timeout_ns ||
	    (kill((pid_t)sb->agent_pid, 0) != 0 && errno != EPERM)) {
		rc = fail(c,
			  "the decision table in %s is held by pid %d, but no agent answers (%s): "
			  "if cruxd is starting or another cruxctl is writing, retry; if pid %d "
			  "hangs, restart cruxd",
			  c->dir, (int)holder,
			  st != CRUX_OK ? "no agent status record" : "its status heartbeat is old",
			  (int)holder);
		goto out;
	}
	if (sb->cluster[0] && sb->cluster_stale) {
		/* Nothing could reach the other hosts: say so now, change nothing. */
		rc = fail(c,
			  "etcd is unreachable from this host's agent (cluster %s: %s): the change "
			  "cannot reach the other hosts and was not made; retry when etcd is "
			  "back ('cruxctl status' says STALE until then)",
			  sb->cluster, sb->cluster_error[0] ? sb->cluster_error : "no answer");
		goto out;
	}
	st = cruxd_overrides_load(c->dir, old, err, sizeof(err));
	if (st == CRUX_OK) {
		had_file = true;
	} else if (overrides_corrupt(st) && ch->all) {
		/* Clearing everything needs nothing from an unreadable file: replace it. */
		fprintf(stderr, "cruxctl: %s: replaced by an empty overrides file\n", err);
		memset(old, 0, sizeof(*old));
		replaced = true;
	} else if (st != CRUX_ERR_NOENT) {
		rc = fail(c, "%s%s", err, overrides_corrupt(st) ? OVERRIDES_FIX : "");
		goto out;
	}
	*o = *old;
	if (ch->adopt && !change_overrides(o, ch)) {
		rc = 0; /* every override in force is in this host's file already */
		goto out;
	}
	if (!ch->adopt && !change_overrides(o, ch) && !replaced) {
		rc = ch->set ? fail(c, "too many overrides (%d)", CRUXD_MAX_OVERRIDES)
			     : fail(c,
				    "job %s (0x%016llx) has no override on this host (see "
				    "'cruxctl status')",
				    ch->id[0] ? ch->id : "-", (unsigned long long)ch->key);
		goto out;
	}
	seq = (old->seq > sb->overrides_seq ? old->seq : sb->overrides_seq) + 1;
	o->seq = seq;
	st = cruxd_overrides_store(c->dir, o);
	if (st != CRUX_OK) {
		rc = fail(c, "cannot write %s/%s: %s", c->dir, CRUXD_OVERRIDES_FILE,
			  crux_status_str(st));
		goto out;
	}
	/* An error the agent already had (a corrupt file we replaced) is not about our file. */
	snprintf(prior_error, sizeof(prior_error), "%s", sb->overrides_error);
	deadline = crux_now_ns() + 3000000000ull + 4 * sb->interval_ns;
	while (crux_now_ns() < deadline) {
		struct timespec ts = {0, 50000000L};
		nanosleep(&ts, NULL);
		if (cruxd_status_read(c->dir, sb, NULL) != CRUX_OK)
			continue;
		if (sb->overrides_seq >= seq) {
			rc = ch->adopt ? 0
				       : report(c, ch,
						sb->cluster[0] ? "applied by the agent, "
								 "in etcd for every host"
							       : "applied by the agent");
			goto out;
		}
		if (sb->overrides_error[0] && strcmp(sb->overrides_error, prior_error)) {
			rc = fail(c, "the agent refused the overrides: %s", sb->overrides_error);
			break;
		}
		if (sb->cluster[0] && sb->cluster_stale) {
			rc = fail(
			    c,
			    "etcd became unreachable from this host's agent (cluster %s: %s): "
			    "the change cannot reach the other hosts: change withdrawn; retry "
			    "when etcd is back",
			    sb->cluster, sb->cluster_error[0] ? sb->cluster_error : "no answer");
			break;
		}
	}
	if (rc != 0 && !(sb->cluster[0] && sb->cluster_stale) &&
	    (!sb->overrides_error[0] || !strcmp(sb->overrides_error, prior_error)))
		rc = fail(c,
			  "the agent (pid %u) did not apply the change within %.1f s: change "
			  "withdrawn",
			  sb->agent_pid, (double)(3000000000ull + 4 * sb->interval_ns) / 1e9);
	/* Withdraw what the agent did not take, so the file matches what runs. */
	if (had_file) {
		old->seq = seq + 1;
		cruxd_overrides_store(c->dir, old);
	} else {
		char path[CRUX_PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/%s", c->dir, CRUXD_OVERRIDES_FILE);
		unlink(path);
	}
out:
	free(o);
	free(old);
	free(sb);
	return rc;
}

static void quiet_sink(void *arg, enum crux_log_level level, const char *file, int line,
		       const char *msg)
{
	(void)arg;
	(void)file;
	(void)line;
	if (level == CRUX_LOG_ERROR && !strstr(msg, "held by another writer"))
		fprintf(stderr, "cruxctl: %s\n", msg);
}

static int cmd_change(const struct ctx *c, bool set, int argc, char **argv)
{
	struct change ch;
	struct view v;
	struct crux_dt_settings settings;
	struct crux_dt_writer *w = NULL;
	const char *jobref = NULL;
	uint64_t timeout_ns = 0;
	char err[512];
	long long lv = -1;
	pid_t holder = 0;
	crux_status_t st;
	int rc;

	memset(&ch, 0, sizeof(ch));
	ch.set = set;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--job") && i + 1 < argc) {
			jobref = argv[++i];
		} else if (set && !strcmp(a, "--level") && i + 1 < argc) {
			if (crux_parse_int("--level", argv[++i], 0, CRUX_MAX_LEVELS - 1, &lv, err,
					   sizeof(err)) != CRUX_OK)
				return fail(c, "%s", err);
		} else if (set && !strcmp(a, "--route") && i + 1 < argc) {
			if (ch.nroutes >= CRUXD_OVR_MAX_ROUTES)
				return fail(c, "at most %d --route options", CRUXD_OVR_MAX_ROUTES);
			if (cruxd_route_parse(argv[++i], &ch.routes[ch.nroutes], err,
					      sizeof(err)) != CRUX_OK)
				return fail(c, "%s", err);
			for (int k = 0; k < ch.nroutes; k++)
				if (crux_addr_equal(&ch.routes[k].peer,
						    &ch.routes[ch.nroutes].peer))
					return fail(c, "two --route options for the same peer");
			ch.nroutes++;
		} else if (!strcmp(a, "--timeout") && i + 1 < argc) {
			if (crux_parse_duration_ns("--timeout", argv[++i], 100000000ull,
						   10000000000000000ull, 1000000000ull, &timeout_ns,
						   err, sizeof(err)) != CRUX_OK)
				return fail(c, "%s", err);
		} else {
			return fail(c, "%s: unknown or incomplete option '%s' (see cruxctl --help)",
				    set ? "set" : "clear", a);
		}
	}
	if (set && (!jobref || lv < 0))
		return fail(c, "set needs --job ID and --level N");
	ch.all = !set && !jobref;
	ch.level = (int)lv;

	st = crux_shm_dir_check_ex(c->dir, set, err, sizeof(err));
	if (st != CRUX_OK)
		return fail(c, "%s", err);
	if (geteuid() != 0 && access(c->dir, W_OK) != 0) {
		/* Both ways (the agent's overrides file, the table itself) write in
		 * the directory: say so, not "Permission denied" on the table. */
		struct cruxd_status_body *sb = calloc(1, sizeof(*sb));
		uint64_t hb = 0;
		bool agent = sb && cruxd_status_read(c->dir, sb, &hb) == CRUX_OK && hb &&
			     (kill((pid_t)sb->agent_pid, 0) == 0 || errno == EPERM);
		int rc2 = agent
			      ? fail(c,
				     "%s needs root: cruxd (pid %u) takes overrides only from "
				     "root through %s/%s; run 'sudo cruxctl %s ...'",
				     set ? "set" : "clear", sb->agent_pid, c->dir,
				     CRUXD_OVERRIDES_FILE, set ? "set" : "clear")
			      : fail(c,
				     "%s needs root: %s is not writable by this user (uid %u); run "
				     "'sudo cruxctl %s ...'",
				     set ? "set" : "clear", c->dir, (unsigned)geteuid(),
				     set ? "set" : "clear");
		free(sb);
		return rc2;
	}
	st = view_load(&v, c->dir);
	if (st != CRUX_OK) {
		view_free(&v);
		return fail(c, "cannot read %s: %s", c->dir, crux_status_str(st));
	}
	if (v.table_st != CRUX_OK && v.table_st != CRUX_ERR_NOENT)
		fprintf(stderr, "cruxctl: warning: %s\n", v.table_err);
	if (jobref && (rc = resolve_job(c, &v, jobref, &ch.key, ch.id, sizeof(ch.id))) != 0)
		goto out;
	if (set) {
		bool running = false;
		for (size_t i = 0; i < v.nrecs; i++)
			running |= v.recs[i].id.job_key == ch.key;
		/* ranks attached to cruxd over its socket, and the agent's own view */
		for (size_t i = 0; i < v.narecs; i++)
			running |= v.arecs[i].id.job_key == ch.key;
		for (uint32_t i = 0;
		     v.agent_alive && v.agent && i < v.agent->njobs && i < CRUXD_STATUS_MAX_JOBS;
		     i++)
			running |=
			    v.agent->jobs[i].job_key == ch.key && v.agent->jobs[i].nranks > 0;
		if (!running)
			fprintf(stderr,
				"cruxctl: warning: no running process publishes job %s: the entry "
				"waits for it (check the id with 'cruxctl status')\n",
				ch.id);
	}
	if (v.table_st == CRUX_OK) {
		settings = v.table->settings;
	} else {
		struct cruxd_config cfg;
		if (cruxd_config_env(NULL, NULL, &cfg, err, sizeof(err)) != CRUX_OK) {
			rc = fail(c, "%s", err);
			goto out;
		}
		settings = cfg.settings;
	}
	if (set && (uint32_t)ch.level >= settings.nlevels) {
		rc = fail(c, "level %d does not exist: the table has %u levels (0..%u)", ch.level,
			  settings.nlevels, settings.nlevels - 1);
		goto out;
	}
	if (timeout_ns)
		settings.heartbeat_timeout_ns = timeout_ns;

	/* "Held by another writer" is the normal case with an agent: not an error here. */
	crux_log_set_sink(quiet_sink, NULL);
	err[0] = '\0';
	st = crux_dt_writer_open_shadow(c->dir, &settings, &w, &holder, err, sizeof(err));
	crux_log_set_sink(NULL, NULL);
	if (st == CRUX_ERR_BUSY && timeout_ns) {
		rc = fail(c,
			  "--timeout applies only without a running agent (it sets how long "
			  "plugins trust a table nobody refreshes); cruxd (pid %d) keeps the "
			  "heartbeat itself: drop --timeout",
			  (int)holder);
		goto out;
	}
	if (st == CRUX_ERR_BUSY) {
		uint64_t hbt = v.table_st == CRUX_OK ? v.table->settings.heartbeat_timeout_ns
						     : CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS;
		if (!set && v.table_st == CRUX_OK && v.agent_st == CRUX_OK && v.agent->cluster[0]) {
			/* An override another host set is in force here but not in this
			 * host's file: take it in first, so the clear reaches etcd. */
			struct change ad = ch;
			ad.adopt = v.table;
			if ((rc = through_agent(c, &ad, holder, hbt)) != 0)
				goto out;
		}
		rc = through_agent(c, &ch, holder, hbt);
		goto out;
	}
	if (st != CRUX_OK) {
		/* The writer's own message names the file, the problem and the fix. */
		rc = err[0] ? fail(c, "cannot write the decision table: %s", err)
			    : fail(c, "cannot open the decision table in %s for writing: %s",
				   c->dir, crux_status_str(st));
		goto out;
	}
	for (int k = 0; k < ch.nroutes; k++)
		if (!ch.routes[k].nports) {
			rc = fail(c, "without a running agent no prober fills in ports: give them "
				     "as PEER=PATH:PORT,PORT...");
			goto out;
		}
	rc = change_table(c, w, &ch);
	if (rc == 0) {
		/* Keep a left-over overrides file consistent for the next agent start. */
		struct cruxd_overrides *o = calloc(1, sizeof(*o));
		st = o ? cruxd_overrides_load(c->dir, o, err, sizeof(err)) : CRUX_ERR_NOMEM;
		if (st == CRUX_OK) {
			change_overrides(o, &ch);
			o->seq++;
			cruxd_overrides_store(c->dir, o);
		} else if (overrides_corrupt(st) && ch.all) {
			/* clear really clears: an unreadable left-over file is replaced */
			memset(o, 0, sizeof(*o));
			o->seq = 1;
			if (cruxd_overrides_store(c->dir, o) == CRUX_OK)
				fprintf(stderr,
					"cruxctl: %s: replaced by an empty overrides file\n", err);
		} else if (overrides_corrupt(st)) {
			fprintf(stderr, "cruxctl: warning: %s%s\n", err, OVERRIDES_FIX);
		}
		free(o);
		if (set)
			fprintf(
			    stderr,
			    "cruxctl: warning: no agent refreshes the table's heartbeat: plugins "
			    "drop this entry %.0f s from now (--timeout DUR sets how long; start "
			    "cruxd to keep it)\n",
			    (double)settings.heartbeat_timeout_ns / 1e9);
		rc = report(c, &ch, "table written directly: no agent running");
	}
out:
	if (w)
		crux_dt_writer_close(w);
	view_free(&v);
	return rc;
}

/* ---- probe ------------------------------------------------------------------ */

static int cmd_probe(const struct ctx *c, int argc, char **argv)
{
	struct cruxd_probe_config cfg;
	struct cruxd_probe_result *r;
	struct crux_addr peer;
	const char *peer_s = NULL;
	long long v, single = 0;
	char err[256];
	crux_status_t st;

	cruxd_probe_config_default(&cfg);
	if (cruxd_probe_config_env(NULL, NULL, &cfg, err, sizeof(err)) != CRUX_OK)
		return fail(c, "%s", err);
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (a[0] != '-') {
			if (peer_s)
				return fail(c, "probe: one peer only ('%s')", a);
			peer_s = a;
			continue;
		}
		if (!val)
			return fail(c, "probe: '%s' needs a value", a);
		i++;
		if (!strcmp(a, "--proto")) {
			if (!strcmp(val, "tcp")) {
				cfg.proto = CRUXD_PROBE_TCP;
			} else if (!strcmp(val, "udp")) {
				cfg.proto = CRUXD_PROBE_UDP;
				cfg.dst_port = CRUXD_ROCE_PORT;
			} else {
				return fail(c, "--proto '%s': expected tcp or udp", val);
			}
		} else if (!strcmp(a, "--hops")) {
			if (crux_parse_int(a, val, 1, 32, &v, err, sizeof(err)))
				return fail(c, "%s", err);
			cfg.hops = (uint8_t)v;
		} else if (!strcmp(a, "--expect")) {
			if (crux_parse_int(a, val, 0, CRUXD_PROBE_MAX_PATHS, &v, err, sizeof(err)))
				return fail(c, "%s", err);
			cfg.expect_paths = (uint32_t)v;
		} else if (!strcmp(a, "--per-path")) {
			if (crux_parse_int(a, val, 1, CRUX_ROUTE_MAX_PORTS, &v, err, sizeof(err)))
				return fail(c, "%s", err);
			cfg.ports_per_path = (uint32_t)v;
		} else if (!strcmp(a, "--dst-port")) {
			if (crux_parse_int(a, val, 1, 65535, &v, err, sizeof(err)))
				return fail(c, "%s", err);
			cfg.dst_port = (uint16_t)v;
		} else if (!strcmp(a, "--port")) {
			if (crux_parse_int(a, val, 1, 65535, &single, err, sizeof(err)))
				return fail(c, "%s", err);
		} else if (!strcmp(a, "--ports")) {
			if (cruxd_probe_parse_range(a, val, &cfg.port_lo, &cfg.port_hi, err,
						    sizeof(err)))
				return fail(c, "%s", err);
		} else {
			return fail(c, "probe: unknown option '%s'", a);
		}
	}
	if (!peer_s || crux_addr_parse(peer_s, &peer) != CRUX_OK)
		return fail(c, "probe needs a peer address (IPv4 or IPv6), got '%s'",
			    peer_s ? peer_s : "");
	if (single) {
		struct crux_addr hop;
		char hb[CRUX_ADDR_STRLEN];
		st = cruxd_probe_port(&cfg, &peer, (uint16_t)single, &hop);
		if (st != CRUX_OK)
			return fail(c, "probe from port %lld: %s", single, crux_status_str(st));
		crux_addr_format(&hop, hb, sizeof(hb));
		if (c->json) {
			struct crux_json j;
			crux_json_init(&j, stdout);
			crux_json_obj(&j);
			crux_json_key(&j, "ok");
			crux_json_bool(&j, true);
			crux_json_key(&j, "port");
			crux_json_i64(&j, single);
			crux_json_key(&j, "hop");
			crux_json_str(&j, hb);
			crux_json_end_obj(&j);
			crux_json_done(&j);
		} else
			printf("port %lld -> %s\n", single, hb);
		return 0;
	}
	r = malloc(sizeof(*r));
	if (!r)
		return fail(c, "out of memory");
	st = cruxd_probe_peer(&cfg, &peer, r);
	if (st != CRUX_OK) {
		free(r);
		return fail(c, "probing %s: %s%s", peer_s, crux_status_str(st),
			    st == CRUX_ERR_RANGE ? " (probes reached the peer: use fewer --hops)"
			    : st == CRUX_ERR_NOENT
				? " (no router answered: check --hops, ICMP rate limits)"
				: "");
	}
	if (c->json) {
		struct crux_json j;
		crux_json_init(&j, stdout);
		crux_json_obj(&j);
		crux_json_key(&j, "ok");
		crux_json_bool(&j, true);
		crux_json_key(&j, "peer");
		crux_json_str(&j, peer_s);
		crux_json_key(&j, "sent");
		crux_json_u64(&j, r->sent);
		crux_json_key(&j, "answered");
		crux_json_u64(&j, r->answered);
		crux_json_key(&j, "paths");
		crux_json_arr(&j);
		for (uint32_t i = 0; i < r->npaths; i++) {
			char hb[CRUX_ADDR_STRLEN];
			crux_addr_format(&r->paths[i].hop, hb, sizeof(hb));
			crux_json_obj(&j);
			crux_json_key(&j, "path");
			crux_json_u64(&j, i);
			crux_json_key(&j, "hop");
			crux_json_str(&j, hb);
			crux_json_key(&j, "ports");
			crux_json_arr(&j);
			for (uint8_t k = 0; k < r->paths[i].nports; k++)
				crux_json_u64(&j, r->paths[i].ports[k]);
			crux_json_end_arr(&j);
			crux_json_end_obj(&j);
		}
		crux_json_end_arr(&j);
		crux_json_end_obj(&j);
		crux_json_done(&j);
	} else {
		printf("peer %s: %u path(s) (%u probes, %u answered, %u ports busy)\n", peer_s,
		       r->npaths, r->sent, r->answered, r->bind_failed);
		for (uint32_t i = 0; i < r->npaths; i++) {
			char hb[CRUX_ADDR_STRLEN];
			crux_addr_format(&r->paths[i].hop, hb, sizeof(hb));
			printf("  path %u via %-16s ports", i, hb);
			for (uint8_t k = 0; k < r->paths[i].nports; k++)
				printf("%c%u", k ? ',' : ' ', r->paths[i].ports[k]);
			printf("\n");
		}
	}
	free(r);
	return 0;
}

/* ---- plan's default levels ---------------------------------------------------- */

static bool plan_has_levels(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--levels") || !strncmp(argv[i], "--levels=", 9))
			return true;
	return false;
}

/* The level count of the agent's status in dir (or CRUX_SHM_DIR); -1 when none runs. */
static int plan_agent_levels(const char *dir, char *out, size_t len)
{
	char d[CRUX_PATH_MAX];
	struct cruxd_status_body *b;
	uint64_t hb = 0;
	int rc = -1;

	if (dir)
		snprintf(d, sizeof(d), "%s", dir);
	else if (crux_shm_dir(NULL, NULL, d, sizeof(d)) != CRUX_OK)
		return -1;
	b = calloc(1, sizeof(*b));
	if (b && cruxd_status_read(d, b, &hb) == CRUX_OK && hb && b->nlevels >= 1 &&
	    b->nlevels <= CRUX_MAX_LEVELS) {
		snprintf(out, len, "%u", b->nlevels);
		fprintf(stderr,
			"cruxctl: plan: %u levels, as the agent in %s (--levels K to choose)\n",
			b->nlevels, d);
		rc = 0;
	}
	free(b);
	return rc;
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct ctx c;
	char *rest[256];
	const char *cmd = NULL, *dir = NULL;
	int nrest = 0, cmd_at = -1;

	memset(&c, 0, sizeof(c));
	if (crux_log_init("cruxctl") != CRUX_OK)
		fprintf(stderr, "cruxctl: going on with log level warn\n");
	for (int i = 1; i < argc; i++) {
		if (cmd && !strcmp(cmd, "plan"))
			break; /* plan parses its own options */
		if (!strcmp(argv[i], "--json")) {
			c.json = true;
		} else if (!strcmp(argv[i], "--shm-dir") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version")) {
			printf("cruxctl %s\n", CRUX_VERSION);
			return 0;
		} else if (!cmd) {
			cmd = argv[i];
			cmd_at = i;
		} else if (nrest < (int)(sizeof(rest) / sizeof(rest[0]))) {
			rest[nrest++] = argv[i];
		}
	}
	if (!cmd) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(cmd, "plan")) {
		/* the scheduler's own parser; a global --json is passed on */
		char **pv = calloc((size_t)(argc - cmd_at + 4), sizeof(*pv));
		char levels[16];
		int pc = 0, rc;
		if (!pv)
			return 1;
		for (int i = cmd_at; i < argc; i++)
			pv[pc++] = argv[i];
		if (c.json)
			pv[pc++] = "--json";
		/* --levels, else CRUX_LEVELS (as cruxd reads it), else the running
		 * agent's levels. */
		bool has = plan_has_levels(argc - cmd_at, argv + cmd_at);
		if (!has && getenv("CRUX_LEVELS")) {
			long long k;
			char err[256];
			if (crux_env_int(NULL, NULL, "CRUX_LEVELS", CRUX_DEFAULT_LEVELS, 1,
					 CRUX_MAX_LEVELS, &k, err, sizeof(err)) != CRUX_OK) {
				fprintf(stderr, "cruxctl: plan: %s\n", err);
				free(pv);
				return 2;
			}
			snprintf(levels, sizeof(levels), "%lld", k);
			pv[pc++] = "--levels";
			pv[pc++] = levels;
			has = true;
		}
		if (!has && plan_agent_levels(dir, levels, sizeof(levels)) == 0) {
			pv[pc++] = "--levels";
			pv[pc++] = levels;
		}
		rc = crux_sched_plan_cli(pc, pv);
		free(pv);
		return rc;
	}
	if (dir) {
		size_t dl = strlen(dir);
		while (dl > 1 && dir[dl - 1] == '/')
			dl--;
		if (dir[0] != '/' || dl > CRUX_SHM_DIR_MAX)
			return fail(&c,
				    "--shm-dir '%s': expected an absolute path of at most %d "
				    "characters (as CRUX_SHM_DIR)",
				    dir, CRUX_SHM_DIR_MAX);
		snprintf(c.dir, sizeof(c.dir), "%s", dir);
	} else if (crux_shm_dir(NULL, NULL, c.dir, sizeof(c.dir)) != CRUX_OK) {
		return fail(&c, "CRUX_SHM_DIR is not valid: expected an absolute path");
	}
	if (!strcmp(cmd, "status") && nrest == 0)
		return cmd_status(&c);
	if (!strcmp(cmd, "status"))
		return fail(&c, "status takes no arguments ('%s')", rest[0]);
	if (!strcmp(cmd, "top"))
		return cmd_top(&c, nrest, rest);
	if (!strcmp(cmd, "placement")) {
		if (nrest)
			return fail(&c, "placement takes no arguments ('%s')", rest[0]);
		c.placement = true;
		return cmd_status(&c);
	}
	if (!strcmp(cmd, "set"))
		return cmd_change(&c, true, nrest, rest);
	if (!strcmp(cmd, "clear"))
		return cmd_change(&c, false, nrest, rest);
	if (!strcmp(cmd, "probe"))
		return cmd_probe(&c, nrest, rest);
	fprintf(stderr, "cruxctl: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
