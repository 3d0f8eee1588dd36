/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agent side of the attach protocol (crux/attach.h): one thread accepts
 * processes on CRUX_SHM_DIR/cruxd.sock, checks who they are with the
 * kernel's word (SO_PEERCRED, /proc), keeps their sealed profile memfds
 * mapped read-only while their connection lives, and hands out the table.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/broker.h"
#include "crux/log.h"

#define BROKER_MAX_PEERS 4096
#define BROKER_POLL_MS	 250

struct peer {
	int sock;
	bool greeted;  /* hello handled */
	bool has_prof; /* a rank with a mapped record */
	bool dup;      /* same record as an earlier connection of this process */
	bool reported; /* an invalid record was logged once */
	struct crux_broker_peer_info who;
	uint64_t job_key;
	dev_t dev;
	ino_t ino;
	struct crux_shm_map prof;
};

#define BROKER_GONE_MAX 256

struct crux_broker {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lsock;
	dev_t sock_dev;
	ino_t sock_ino;
	int table_fd;
	int wake[2];
	struct crux_broker_policy pol;
	pthread_t thread;
	pthread_mutex_t mu;
	struct peer *peers;
	uint32_t npeers;
	uint32_t closed; /* since the last scan */
	/*
	 * Records whose last connection closed since the last scan, still
	 * mapped: the next scan delivers them once more, so what a process
	 * published before it closed (the plugin's final counters at finalize)
	 * reaches the agent even when it closes right after.
	 */
	struct peer gone[BROKER_GONE_MAX];
	uint32_t ngone;
	uint64_t refused;
	uint64_t last_check_ns;
	int sock_err_logged, full_logged;
};

/* ---- policy ---- */

static crux_status_t parse_ids(const char *name, const char *v, bool groups, uint32_t *n,
			       uint32_t *ids, char *err, size_t errlen)
{
	char buf[1024], *save = NULL;
	if (strlen(v) >= sizeof(buf)) {
		crux_set_err(err, errlen, "%s is too long (at most %zu characters)", name,
			     sizeof(buf) - 1);
		return CRUX_ERR_INVAL;
	}
	strcpy(buf, v);
	*n = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end, sbuf[4096];
		unsigned long id = strtoul(t, &end, 10);
		if (*n == 32) {
			crux_set_err(err, errlen, "%s names more than 32 entries", name);
			return CRUX_ERR_RANGE;
		}
		if (*t && !*end && t[0] != '-' && id < UINT32_MAX) {
			ids[(*n)++] = (uint32_t)id;
			continue;
		}
		if (groups) {
			struct group g, *gp = NULL;
			if (getgrnam_r(t, &g, sbuf, sizeof(sbuf), &gp) == 0 && gp) {
				ids[(*n)++] = (uint32_t)gp->gr_gid;
				continue;
			}
		} else {
			struct passwd p, *pp = NULL;
			if (getpwnam_r(t, &p, sbuf, sizeof(sbuf), &pp) == 0 && pp) {
				ids[(*n)++] = (uint32_t)pp->pw_uid;
				continue;
			}
		}
		crux_set_err(err, errlen,
			     "%s: no such %s '%.64s'; fix: list existing %s names or numeric ids, "
			     "separated by commas",
			     name, groups ? "group" : "user", t, groups ? "group" : "user");
		return CRUX_ERR_INVAL;
	}
	return CRUX_OK;
}

crux_status_t crux_broker_policy_env(crux_getenv_fn fn, void *arg, struct crux_broker_policy *out,
				     char *err, size_t errlen)
{
	struct crux_broker_policy p;
	uint32_t ids[32];
	crux_status_t st;
	const char *v;

	memset(&p, 0, sizeof(p));
	if ((v = crux_env_get(fn, arg, "CRUX_ALLOW_USERS"))) {
		st = parse_ids("CRUX_ALLOW_USERS", v, false, &p.nusers, ids, err, errlen);
		if (st != CRUX_OK)
			return st;
		for (uint32_t i = 0; i < p.nusers; i++)
			p.users[i] = (uid_t)ids[i];
	}
	if ((v = crux_env_get(fn, arg, "CRUX_ALLOW_GROUPS"))) {
		st = parse_ids("CRUX_ALLOW_GROUPS", v, true, &p.ngroups, ids, err, errlen);
		if (st != CRUX_OK)
			return st;
		for (uint32_t i = 0; i < p.ngroups; i++)
			p.groups[i] = (gid_t)ids[i];
	}
	st = crux_env_bool(fn, arg, "CRUX_ALLOW_SHARED_JOBS", false, &p.shared_jobs, err, errlen);
	if (st != CRUX_OK)
		return st;
	*out = p;
	return CRUX_OK;
}

/* A "Name:\t..." line of /proc/PID/status into buf; false when absent. */
static bool status_line(pid_t pid, const char *key, char *buf, size_t len)
{
	char path[64], line[1024];
	size_t klen = strlen(key);
	bool found = false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			snprintf(buf, len, "%s", line + klen + 1);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static bool policy_allows(const struct crux_broker_policy *p, const struct ucred *cr)
{
	char groups[1024];
	if ((p->nusers == 0 && p->ngroups == 0) || cr->uid == 0)
		return true;
	for (uint32_t i = 0; i < p->nusers; i++)
		if (p->users[i] == cr->uid)
			return true;
	for (uint32_t i = 0; i < p->ngroups; i++)
		if (p->groups[i] == cr->gid)
			return true;
	if (p->ngroups && status_line(cr->pid, "Groups", groups, sizeof(groups))) {
		char *s = groups, *end;
		for (unsigned long g; (g = strtoul(s, &end, 10)), end != s; s = end)
			for (uint32_t i = 0; i < p->ngroups; i++)
				if (p->groups[i] == (gid_t)g)
					return true;
	}
	return false;
}

/* The pid 'pid' has in its own (innermost) pid namespace: the last NSpid field. */
static bool inner_pid(pid_t pid, long *out)
{
	char buf[256], *s = buf, *end;
	long last = -1;
	if (!status_line(pid, "NSpid", buf, sizeof(buf))) {
		*out = pid; /* kernels before 4.1: no namespaces to translate */
		return true;
	}
	for (long v; (v = strtol(s, &end, 10)), end != s; s = end)
		last = v;
	*out = last;
	return last > 0;
}

/* ---- socket ---- */

static crux_status_t listen_sock(struct crux_broker *b, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat sb;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", b->path);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		crux_set_err(err, errlen, "socket: %s", strerror(errno));
		return CRUX_ERR_IO;
	}
	if (lstat(b->path, &sb) == 0) {
		/* A live agent answers; a stale socket from a dead one is ours to replace. */
		if (S_ISSOCK(sb.st_mode) && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			crux_set_err(err, errlen,
				     "another cruxd already serves %s; fix: stop it first",
				     b->path);
			close(s);
			return CRUX_ERR_BUSY;
		}
		close(s);
		s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (s < 0 || (unlink(b->path) != 0 && errno != ENOENT)) {
			crux_set_err(err, errlen, "cannot replace %s: %s", b->path,
				     strerror(errno));
			if (s >= 0)
				close(s);
			return CRUX_ERR_IO;
		}
	}
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(b->path, 0666) != 0 ||
	    listen(s, 128) != 0 || stat(b->path, &sb) != 0) {
		crux_set_err(err, errlen, "cannot listen on %s: %s", b->path, strerror(errno));
		close(s);
		return CRUX_ERR_IO;
	}
	if (b->lsock >= 0)
		close(b->lsock);
	b->lsock = s;
	b->sock_dev = sb.st_dev;
	b->sock_ino = sb.st_ino;
	return CRUX_OK;
}

/* Recreate the socket when someone removed or replaced it. */
static void check_sock(struct crux_broker *b)
{
	struct stat sb;
	char err[256];
	uint64_t now = crux_now_ns();
	if (now - b->last_check_ns < 1000000000ull)
		return;
	b->last_check_ns = now;
	if (lstat(b->path, &sb) == 0 && sb.st_dev == b->sock_dev && sb.st_ino == b->sock_ino)
		return;
	if (listen_sock(b, err, sizeof(err)) == CRUX_OK) {
		b->sock_err_logged = 0;
		crux_warn("%s was removed or replaced: listening on a new socket", b->path);
	} else
		crux_log_once(&b->sock_err_logged, CRUX_LOG_ERROR, "%s", err);
}

/* ---- peers ---- */

static void peer_drop(struct crux_broker *b, uint32_t i)
{
	struct peer *p = &b->peers[i];
	bool keep = false;
	if (p->has_prof && !p->dup) {
		/* The process's other connection (preload and plugin) now carries the record. */
		for (uint32_t k = 0; k < b->npeers && !keep; k++) {
			struct peer *o = &b->peers[k];
			if (k != i && o->has_prof && o->dup && o->who.pid == p->who.pid &&
			    o->who.start_time == p->who.start_time) {
				o->dup = false;
				keep = true;
			}
		}
		if (!keep) {
			b->closed++;
			/* Its last connection: one more look at the record at the next scan. */
			if (b->ngone < BROKER_GONE_MAX) {
				b->gone[b->ngone] = *p;
				b->gone[b->ngone++].sock = -1;
				keep = true;
			}
		}
	}
	close(p->sock);
	if (p->has_prof && !keep)
		crux_shm_unmap(&p->prof);
	b->peers[i] = b->peers[--b->npeers];
}

static void gone_release(struct crux_broker *b)
{
	for (uint32_t i = 0; i < b->ngone; i++)
		crux_shm_unmap(&b->gone[i].prof);
	b->ngone = 0;
}

static void reply(struct crux_broker *b, struct peer *p, crux_status_t st, const char *reason)
{
	struct crux_wire_reply r;
	memset(&r, 0, sizeof(r));
	r.magic = CRUX_WIRE_MAGIC;
	r.version = CRUX_WIRE_VERSION;
	r.size = sizeof(r);
	r.agent_pid = (uint32_t)getpid();
	if (st == CRUX_OK) {
		r.type = CRUX_WIRE_WELCOME;
		r.table_size = crux_dt_file_size();
	} else {
		r.type = CRUX_WIRE_REFUSE;
		r.status = (int32_t)st;
		snprintf(r.reason, sizeof(r.reason), "%s", reason);
		b->refused++;
		crux_warn("refused pid %d (uid %u): %s", (int)p->who.pid, (unsigned)p->who.uid,
			  reason);
	}
	crux_sock_send(p->sock, &r, sizeof(r), st == CRUX_OK ? b->table_fd : -1);
}

/* Check a hello against the kernel and the policy; map the record. */
static crux_status_t greet(struct crux_broker *b, struct peer *p, const struct ucred *cr,
			   const struct crux_wire_hello *h, int fd, char *why, size_t len)
{
	long inner;
	struct crux_prof_snapshot *snap = NULL;
	crux_status_t st;

	if (!policy_allows(&b->pol, cr)) {
		snprintf(why, len,
			 "user %u (group %u) may not attach; fix: add it to CRUX_ALLOW_USERS or "
			 "CRUX_ALLOW_GROUPS of cruxd",
			 (unsigned)cr->uid, (unsigned)cr->gid);
		return CRUX_ERR_PERM;
	}
	if (!inner_pid(cr->pid, &inner) || inner != h->pid || p->who.start_time != h->start_time) {
		snprintf(why, len,
			 "claims pid %d (start %" PRIu64 ") but is pid %ld (start %" PRIu64 ")",
			 (int)h->pid, h->start_time, inner, p->who.start_time);
		return CRUX_ERR_PERM;
	}
	if (h->role == CRUX_ROLE_OBSERVER)
		return CRUX_OK;
	st = crux_prof_map_fd(fd, &p->prof, why, len);
	if (st != CRUX_OK)
		return st;
	p->has_prof = true;
	snap = malloc(sizeof(*snap));
	if (!snap)
		return CRUX_ERR_NOMEM;
	const struct crux_shm_header *hd = p->prof.base;
	st = crux_prof_validate_buffer(p->prof.base, p->prof.size, 0, 0, snap, why, len);
	if (st == CRUX_OK &&
	    (__atomic_load_n(&hd->writer_pid, __ATOMIC_RELAXED) != (uint32_t)h->pid ||
	     __atomic_load_n(&hd->writer_start_time, __ATOMIC_RELAXED) != h->start_time)) {
		snprintf(why, len, "its profile record names another process");
		st = CRUX_ERR_PERM;
	}
	if (st == CRUX_OK && snap->id.job_key != h->job_key) {
		snprintf(why, len, "its profile record names another job than its hello");
		st = CRUX_ERR_PERM;
	}
	free(snap);
	if (st != CRUX_OK)
		return st;
	struct stat sb;
	fstat(p->prof.fd, &sb);
	p->dev = sb.st_dev;
	p->ino = sb.st_ino;
	p->job_key = h->job_key;
	for (uint32_t i = 0; i < b->npeers; i++) {
		const struct peer *o = &b->peers[i];
		if (o == p || !o->has_prof)
			continue;
		if (o->who.pid == p->who.pid && o->who.start_time == p->who.start_time) {
			if (o->dev != p->dev || o->ino != p->ino) {
				snprintf(why, len, "this process already attached another record");
				return CRUX_ERR_EXIST;
			}
			p->dup = true; /* preload and plugin: one record, two connections */
			continue;
		}
		if (o->job_key == h->job_key && o->who.uid != cr->uid && !b->pol.shared_jobs &&
		    cr->uid != 0 && o->who.uid != 0) {
			snprintf(
			    why, len,
			    "job %s belongs to user %u; fix: run all its ranks as one user, or "
			    "start cruxd with CRUX_ALLOW_SHARED_JOBS=1",
			    h->job_id, (unsigned)o->who.uid);
			return CRUX_ERR_PERM;
		}
	}
	return CRUX_OK;
}

static void on_hello(struct crux_broker *b, uint32_t i)
{
	struct peer *p = &b->peers[i];
	struct crux_wire_hello h;
	char buf[sizeof(h) + 1], why[CRUX_WIRE_REASON_LEN];
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int fd, nfds;
	crux_status_t st;

	ssize_t n = crux_sock_recv(p->sock, buf, sizeof(buf), &fd, &nfds);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0 || getsockopt(p->sock, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
		if (fd >= 0)
			close(fd);
		peer_drop(b, i);
		return;
	}
	p->greeted = true;
	p->who.pid = cr.pid;
	p->who.uid = cr.uid;
	p->who.gid = cr.gid;
	st = crux_proc_start_time(cr.pid, &p->who.start_time);
	if (st != CRUX_OK)
		snprintf(why, sizeof(why), "process %d is gone", (int)cr.pid);
	else
		st = crux_wire_decode_hello(buf, (size_t)n, nfds, &h, why, sizeof(why));
	if (st == CRUX_OK)
		st = greet(b, p, &cr, &h, fd, why, sizeof(why));
	if (fd >= 0)
		close(fd);
	reply(b, p, st, why);
	if (st == CRUX_OK)
		crux_info("pid %d (uid %u) attached%s%s", (int)cr.pid, (unsigned)cr.uid,
			  p->has_prof ? ": job " : " as an observer", p->has_prof ? h.job_id : "");
	if (st != CRUX_OK) {
		if (p->has_prof)
			crux_shm_unmap(&p->prof);
		p->has_prof = false;
		peer_drop(b, i);
	}
}

static void on_accept(struct crux_broker *b)
{
	for (;;) {
		int s = accept4(b->lsock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s < 0)
			return;
		if (b->npeers == BROKER_MAX_PEERS) {
			crux_log_once(&b->full_logged, CRUX_LOG_WARN,
				      "more than %d processes attached: refusing new ones",
				      BROKER_MAX_PEERS);
			close(s);
			continue;
		}
		struct peer *p = &b->peers[b->npeers++];
		memset(p, 0, sizeof(*p));
		p->sock = s;
		p->prof.fd = -1;
	}
}

static void *broker_main(void *arg)
{
	struct crux_broker *b = arg;
	struct pollfd *pf = calloc(BROKER_MAX_PEERS + 2, sizeof(*pf));
	if (!pf) {
		crux_err("attach socket: out of memory; no process can attach");
		return NULL;
	}
	for (;;) {
		pthread_mutex_lock(&b->mu);
		check_sock(b);
		uint32_t n = b->npeers;
		pf[0] = (struct pollfd){.fd = b->wake[0], .events = POLLIN};
		pf[1] = (struct pollfd){.fd = b->lsock, .events = POLLIN};
		for (uint32_t i = 0; i < n; i++)
			pf[i + 2] = (struct pollfd){.fd = b->peers[i].sock, .events = POLLIN};
		pthread_mutex_unlock(&b->mu);

		if (poll(pf, n + 2, BROKER_POLL_MS) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
		pthread_mutex_lock(&b->mu);
		/* Back to front: dropping a peer moves the last one into its slot. */
		for (uint32_t i = n; i-- > 0;) {
			if (!pf[i + 2].revents || i >= b->npeers)
				continue;
			if (!b->peers[i].greeted)
				on_hello(b, i);
			else
				peer_drop(b, i); /* hang-up, or bytes after the hello: garbage */
		}
		if (pf[1].revents)
			on_accept(b);
		pthread_mutex_unlock(&b->mu);
	}
	free(pf);
	return NULL;
}

crux_status_t crux_broker_open(const char *dir, const struct crux_broker_policy *pol, int table_fd,
			       struct crux_broker **out, char *err, size_t errlen)
{
	crux_status_t st;
	struct crux_broker *b = calloc(1, sizeof(*b));
	if (!b)
		return CRUX_ERR_NOMEM;
	b->lsock = -1;
	b->wake[0] = b->wake[1] = -1;
	b->table_fd = table_fd;
	if (pol)
		b->pol = *pol;
	_Static_assert(CRUX_SHM_DIR_MAX + sizeof("/" CRUX_AGENT_SOCK) <= sizeof(b->path),
		       "CRUX_SHM_DIR_MAX leaves room for the socket's name");
	if ((size_t)snprintf(b->path, sizeof(b->path), "%s/%s", dir, CRUX_AGENT_SOCK) >=
	    sizeof(b->path)) {
		crux_set_err(err, errlen,
			     "%s/%s is longer than a socket path may be (%zu characters); fix: "
			     "set a shorter CRUX_SHM_DIR",
			     dir, CRUX_AGENT_SOCK, sizeof(b->path) - 1);
		free(b);
		return CRUX_ERR_INVAL;
	}
	b->peers = calloc(BROKER_MAX_PEERS, sizeof(*b->peers));
	if (!b->peers) {
		st = CRUX_ERR_NOMEM;
		goto fail;
	}
	pthread_mutex_init(&b->mu, NULL);
	if (pipe2(b->wake, O_CLOEXEC) != 0) {
		crux_set_err(err, errlen, "pipe: %s", strerror(errno));
		st = CRUX_ERR_IO;
		goto fail_mu;
	}
	st = listen_sock(b, err, errlen);
	if (st != CRUX_OK)
		goto fail_mu;
	b->last_check_ns = crux_now_ns();
	if (pthread_create(&b->thread, NULL, broker_main, b) != 0) {
		crux_set_err(err, errlen, "cannot start the attach thread");
		st = CRUX_ERR_IO;
		unlink(b->path);
		goto fail_mu;
	}
	*out = b;
	return CRUX_OK;

fail_mu:
	pthread_mutex_destroy(&b->mu);
fail:
	if (b->lsock >= 0)
		close(b->lsock);
	if (b->wake[0] >= 0) {
		close(b->wake[0]);
		close(b->wake[1]);
	}
	free(b->peers);
	free(b);
	return st;
}

crux_status_t crux_broker_scan(struct crux_broker *b, crux_prof_scan_fn fn, void *arg,
			       struct crux_prof_scan_stats *stats)
{
	struct crux_prof_scan_stats s = {0};
	char why[256];
	struct crux_prof_snapshot *snap = malloc(sizeof(*snap));
	if (!snap)
		return CRUX_ERR_NOMEM;
	pthread_mutex_lock(&b->mu);
	s.reaped = b->closed;
	b->closed = 0;
	/* The attached ones, then (once) those whose connection closed since the last scan. */
	for (uint32_t i = 0; i < b->npeers + b->ngone; i++) {
		struct peer *p = i < b->npeers ? &b->peers[i] : &b->gone[i - b->npeers];
		if (!p->has_prof || p->dup)
			continue;
		memset(snap, 0, sizeof(*snap));
		crux_status_t st = crux_prof_validate_buffer(p->prof.base, p->prof.size, 0, 0, snap,
							     why, sizeof(why));
		if (st == CRUX_ERR_BUSY) {
			s.busy++;
			continue;
		}
		if (st != CRUX_OK) {
			if (!p->reported)
				crux_warn("profile of pid %d (uid %u) skipped: %s", (int)p->who.pid,
					  (unsigned)p->who.uid, why);
			p->reported = true;
			s.invalid++;
			continue;
		}
		/* The kernel's identity, never the record's. */
		snap->pid = p->who.pid;
		snap->start_time = p->who.start_time;
		snap->uid = (int64_t)p->who.uid;
		snap->attached = true;
		snprintf(snap->file, sizeof(snap->file), "pid %d (uid %u, %s)", (int)p->who.pid,
			 (unsigned)p->who.uid, i < b->npeers ? "attached" : "detached");
		s.valid++;
		if (fn && fn(arg, snap) != 0)
			break;
	}
	gone_release(b);
	pthread_mutex_unlock(&b->mu);
	free(snap);
	if (stats)
		*stats = s;
	return CRUX_OK;
}

void crux_broker_counts(struct crux_broker *b, uint32_t *attached, uint64_t *refused)
{
	pthread_mutex_lock(&b->mu);
	if (attached)
		*attached = b->npeers;
	if (refused)
		*refused = b->refused;
	pthread_mutex_unlock(&b->mu);
}

void crux_broker_close(struct crux_broker *b)
{
	struct stat sb;
	if (!b)
		return;
	if (write(b->wake[1], "x", 1) != 1)
		crux_warn("attach thread: cannot wake it");
	pthread_join(b->thread, NULL);
	while (b->npeers)
		peer_drop(b, b->npeers - 1);
	gone_release(b);
	/* Remove the socket only if it is still ours. */
	if (lstat(b->path, &sb) == 0 && sb.st_dev == b->sock_dev && sb.st_ino == b->sock_ino)
		unlink(b->path);
	close(b->lsock);
	close(b->wake[0]);
	close(b->wake[1]);
	pthread_mutex_destroy(&b->mu);
	free(b->peers);
	free(b);
}
