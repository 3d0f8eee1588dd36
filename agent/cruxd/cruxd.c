/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd: the Crux agent. One per host (or one per shared-memory directory in
 * the namespace testbed). Runs in the foreground, logs to stderr (the journal
 * under systemd), reloads its configuration on SIGHUP and leaves a valid
 * decision table on SIGTERM.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conffile.h"
#include "crux/agent.h"
#include "crux/log.h"
#include "crux/sched.h"
#include "crux_config.h"
#include "metrics.h"

/* Signals are the one thing a handler may touch: this is cruxd's only global state. */
static volatile sig_atomic_t cruxd_sig_stop, cruxd_sig_reload;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		cruxd_sig_reload = 1;
	else
		cruxd_sig_stop = 1;
}

/*
 * Command-line options are CRUX_ variables set on top of the configuration
 * file's (--config), which sit on top of the environment.
 */
#define MAX_OVERLAY 16
struct overlay {
	int n;
	const char *name[MAX_OVERLAY];
	const char *value[MAX_OVERLAY];
	const struct cruxd_conffile *file;
};

static const char *overlay_get(void *arg, const char *name)
{
	const struct overlay *o = arg;
	const char *v;

	for (int i = o->n - 1; i >= 0; i--)
		if (!strcmp(o->name[i], name))
			return o->value[i];
	if (o->file && (v = cruxd_conffile_get(o->file, name)))
		return v;
	return getenv(name);
}

/* The file at 'path' into *out; a missing file is an empty one (one warning). */
static crux_status_t conf_load(const char *path, struct cruxd_conffile *out, char *err,
			       size_t errlen)
{
	crux_status_t st = cruxd_conffile_load(path, out, err, errlen);

	if (st == CRUX_ERR_NOENT) {
		crux_warn("%s does not exist: running on the environment and defaults (create it "
			  "and reload to configure)",
			  path);
		memset(out, 0, sizeof(*out));
		return CRUX_OK;
	}
	return st;
}

static void overlay_set(struct overlay *o, const char *name, const char *value)
{
	if (o->n < MAX_OVERLAY) {
		o->name[o->n] = name;
		o->value[o->n] = value;
		o->n++;
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cruxd [options]\n"
		"  --shm-dir DIR      shared-memory directory (CRUX_SHM_DIR, default %s)\n"
		"  --topology FILE    topology in the scheduler's format (CRUX_TOPOLOGY;\n"
		"                     none: single-host view)\n"
		"  --levels K         priority levels 1..8 (CRUX_LEVELS, default 4)\n"
		"  --interval DUR     pass period, e.g. 1s, 500ms (CRUX_AGENT_INTERVAL)\n"
		"  --window DUR       profiling window of a new job (CRUX_PROFILE_WINDOW)\n"
		"  --no-probe         do not probe ECMP paths (CRUX_PROBE=0)\n"
		"  --passes N         run N passes and exit (0 = until SIGTERM)\n"
		"  --log-level L      error|warn|info|debug (CRUX_LOG_LEVEL)\n"
		"  --config FILE      CRUX_NAME=value lines (e.g. /etc/crux/cruxd.conf), over the\n"
		"                     environment, under the options; re-read on SIGHUP\n"
		"  --metrics [ADDR:]PORT  serve Prometheus metrics at /metrics (CRUX_METRICS;\n"
		"                     off by default; PORT alone binds 127.0.0.1)\n"
		"  --etcd URL[,URL...]  cluster mode: coordinate with the other hosts' agents\n"
		"                     through etcd (CRUX_ETCD; none: single-host mode)\n"
		"  --cluster NAME     cluster name, the etcd prefix /crux/NAME/ (CRUX_CLUSTER)\n"
		"  --host NAME        this host's name in the cluster (CRUX_HOST; hostname)\n"
		"  --etcd-ca FILE, --etcd-cert FILE, --etcd-key FILE  TLS to etcd (CRUX_ETCD_CA,\n"
		"                     CRUX_ETCD_CERT, CRUX_ETCD_KEY)\n"
		"  --version, --help\n"
		"Signals: SIGHUP re-reads --config and reloads topology and levels;\n"
		"SIGTERM/SIGINT stop cleanly.\n",
		CRUX_SHM_DIR_DEFAULT);
}

/* Until the next pass; in cluster mode a schedule arriving meanwhile is
 * applied at once (a pass a second away would add up to that second to
 * every host's reaction). */
static void sleep_until(struct cruxd_agent *agent, uint64_t deadline)
{
	int fd = cruxd_agent_wake_fd(agent);

	for (;;) {
		uint64_t now = crux_now_ns();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t left;
		int ms, rc;

		if (now >= deadline || cruxd_sig_stop || cruxd_sig_reload)
			return;
		left = deadline - now;
		ms = (int)((left + 999999u) / 1000000u);
		rc = poll(&p, fd >= 0 ? 1 : 0, ms);
		if (rc > 0)
			cruxd_agent_apply_received(agent, crux_now_ns());
		else if (rc < 0 && errno != EINTR)
			return;
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"shm-dir", required_argument, NULL, 'd'},
	    {"topology", required_argument, NULL, 't'},
	    {"levels", required_argument, NULL, 'k'},
	    {"interval", required_argument, NULL, 'i'},
	    {"window", required_argument, NULL, 'w'},
	    {"no-probe", no_argument, NULL, 'P'},
	    {"passes", required_argument, NULL, 'n'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"metrics", required_argument, NULL, 'm'},
	    {"config", required_argument, NULL, 'c'},
	    {"etcd", required_argument, NULL, 'E'},
	    {"cluster", required_argument, NULL, 'C'},
	    {"host", required_argument, NULL, 'H'},
	    {"etcd-ca", required_argument, NULL, 'A'},
	    {"etcd-cert", required_argument, NULL, 'T'},
	    {"etcd-key", required_argument, NULL, 'K'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct overlay ov = {0};
	struct cruxd_conffile conf = {0};
	const char *conf_path = NULL;
	crux_status_t st = CRUX_OK;
	struct cruxd_config cfg;
	struct cruxd_agent *agent = NULL;
	struct cruxd_metrics *metrics = NULL;
	const char *metrics_spec;
	struct sigaction sa;
	long long passes = 0, done = 0;
	char err[512];
	pid_t holder = 0;
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, "d:t:k:i:w:Pn:l:m:c:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			overlay_set(&ov, "CRUX_SHM_DIR", optarg);
			break;
		case 't':
			overlay_set(&ov, "CRUX_TOPOLOGY", optarg);
			break;
		case 'k':
			overlay_set(&ov, "CRUX_LEVELS", optarg);
			break;
		case 'i':
			overlay_set(&ov, "CRUX_AGENT_INTERVAL", optarg);
			break;
		case 'w':
			overlay_set(&ov, "CRUX_PROFILE_WINDOW", optarg);
			break;
		case 'P':
			overlay_set(&ov, "CRUX_PROBE", "0");
			break;
		case 'l':
			overlay_set(&ov, "CRUX_LOG_LEVEL", optarg);
			break;
		case 'm':
			overlay_set(&ov, "CRUX_METRICS", optarg);
			break;
		case 'c':
			conf_path = optarg;
			break;
		case 'E':
			overlay_set(&ov, "CRUX_ETCD", optarg);
			break;
		case 'C':
			overlay_set(&ov, "CRUX_CLUSTER", optarg);
			break;
		case 'H':
			overlay_set(&ov, "CRUX_HOST", optarg);
			break;
		case 'A':
			overlay_set(&ov, "CRUX_ETCD_CA", optarg);
			break;
		case 'T':
			overlay_set(&ov, "CRUX_ETCD_CERT", optarg);
			break;
		case 'K':
			overlay_set(&ov, "CRUX_ETCD_KEY", optarg);
			break;
		case 'n':
			if (crux_parse_int("--passes", optarg, 0, 1000000000, &passes, err,
					   sizeof(err)) != CRUX_OK) {
				fprintf(stderr, "cruxd: %s\n", err);
				return 2;
			}
			break;
		case 'V':
			printf("cruxd %s\n", CRUX_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cruxd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (conf_path) {
		st = cruxd_conffile_load(conf_path, &conf, err, sizeof(err));
		if (st != CRUX_OK && st != CRUX_ERR_NOENT) {
			fprintf(stderr, "cruxd: --config %s\n", err);
			return 2;
		}
		ov.file = &conf;
	}
	if (overlay_get(&ov, "CRUX_LOG_LEVEL"))
		setenv("CRUX_LOG_LEVEL", overlay_get(&ov, "CRUX_LOG_LEVEL"), 1);
	/* journald stamps lines itself; a terminal or a file needs our stamps. */
	crux_log_set_timestamps(getenv("JOURNAL_STREAM") == NULL);
	/* Like every other invalid CRUX_ variable: a message, exit 2, nothing started. */
	if (crux_log_init("cruxd") != CRUX_OK) {
		cruxd_conffile_free(&conf);
		return 2;
	}
	if (conf_path && st == CRUX_ERR_NOENT)
		crux_warn("%s does not exist: running on the environment and defaults (create it "
			  "and reload to configure)",
			  conf_path);
	st = cruxd_config_env(overlay_get, &ov, &cfg, err, sizeof(err));
	if (st != CRUX_OK) {
		crux_err("%s", err);
		return 2;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cfg.topology[0]) {
		/* A bad topology is a bad setting, as a bad variable: exit 2. */
		struct crux_sched_topo *t = NULL;
		struct crux_sched_err terr;
		if (crux_sched_topo_load(cfg.topology, &t, &terr) != CRUX_OK) {
			crux_err("topology %s refused: %s", cfg.topology, terr.msg);
			return 2;
		}
		crux_sched_topo_free(t);
	}
	st = cruxd_agent_open(&cfg, &agent, &holder);
	if (st == CRUX_ERR_BUSY) {
		crux_err("another process (pid %d) holds the decision table in %s: one agent per "
			 "directory; stop it first",
			 (int)holder, cfg.shm_dir);
		return 1;
	}
	if (st != CRUX_OK) {
		/*
		 * The cause is logged where it was found; this line says what it stopped
		 * and names no generic cause that could hide the real one.
		 */
		crux_err("cruxd not started on %s (because of the error above)", cfg.shm_dir);
		return 1;
	}
	if (cruxd_agent_join(agent, err, sizeof(err)) != CRUX_OK) {
		crux_err("cannot join cluster %s through %s: %s", cfg.cluster, cfg.etcd, err);
		rc = 2;
		goto out;
	}
	if (cfg.etcd[0])
		crux_info("cluster mode: cluster %s, host %s, etcd %s, lease %.0f s", cfg.cluster,
			  cfg.host, cfg.etcd, (double)cfg.cluster_ttl_ns / 1e9);
	metrics_spec = overlay_get(&ov, "CRUX_METRICS");
	if (metrics_spec && *metrics_spec &&
	    cruxd_metrics_start(metrics_spec, crux_now_ns(), &metrics, err, sizeof(err)) !=
		CRUX_OK) {
		crux_err("%s", err);
		rc = 2;
		goto out;
	}
	if (cruxd_agent_start_probing(agent) != CRUX_OK)
		goto out;
	/* Logged at every level: the operator always sees what this agent runs with. */
	crux_log_msg(CRUX_LOG_INFO, NULL, 0,
		     "cruxd %s started (pid %d) on %s: %u levels, pass every %.3f s, heartbeat "
		     "timeout %.1f s, profiling window %.1f s, topology %s, probing %s, metrics %s",
		     CRUX_VERSION, (int)getpid(), cfg.shm_dir, cfg.settings.nlevels,
		     (double)cfg.interval_ns / 1e9, (double)cfg.settings.heartbeat_timeout_ns / 1e9,
		     (double)cfg.profile_window_ns / 1e9, cfg.topology[0] ? cfg.topology : "none",
		     cfg.probe ? "on" : "off", metrics ? cruxd_metrics_url(metrics) : "off");

	while (!cruxd_sig_stop) {
		uint64_t start = crux_now_ns();

		if (cruxd_sig_reload) {
			struct cruxd_config ncfg;
			struct cruxd_conffile nconf = {0};
			struct overlay nov = ov;
			cruxd_sig_reload = 0;
			st = CRUX_OK;
			if (conf_path) {
				st = conf_load(conf_path, &nconf, err, sizeof(err));
				nov.file = &nconf;
			}
			if (st == CRUX_OK)
				st = cruxd_config_env(overlay_get, &nov, &ncfg, err, sizeof(err));
			if (st != CRUX_OK) {
				crux_err("reload refused, keeping the running configuration: %s",
					 err);
				cruxd_conffile_free(&nconf);
			} else if (cruxd_agent_reload(agent, &ncfg) == CRUX_OK) {
				cfg = ncfg;
				cruxd_conffile_free(&conf);
				conf = nconf; /* ov.file points at conf */
			} else {
				cruxd_conffile_free(&nconf);
			}
		}
		cruxd_agent_pass(agent, start);
		if (metrics)
			cruxd_metrics_publish(metrics, cruxd_agent_status(agent), crux_now_ns());
		if (passes && ++done >= passes)
			break;
		sleep_until(agent, start + cfg.interval_ns);
	}
	crux_info("stopping: the decision table stays valid until its heartbeat times out");
	rc = 0;
out:
	cruxd_metrics_stop(metrics);
	cruxd_agent_close(agent);
	cruxd_conffile_free(&conf);
	return rc;
}
