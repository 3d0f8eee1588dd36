/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's reader of profile records: validation and a consistent
 * snapshot of a mapping or buffer, the pread copy of a record file, and the
 * scan of a directory of them.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/attach.h"
#include "crux/jobid.h"
#include "crux/log.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"
#include "crux/shm.h"
#include "profile_layout.h"

crux_status_t crux_prof_map_fd(int fd, struct crux_shm_map *out, char *err, size_t errlen)
{
	return crux_memfd_map(fd, CRUX_PROF_MAGIC, CRUX_PROF_VERSION, sizeof(struct prof_file),
			      CRUX_SEALS_PROFILE, false, out, err, errlen);
}

static bool addr_family_ok(const struct crux_addr *a, bool allow_none)
{
	return a->family == 4 || a->family == 6 || (allow_none && a->family == 0);
}

/* A section's publish count and body, copied into the snapshot under its counter. */
struct sec_read {
	struct crux_prof_snapshot *out;
	uint64_t count;
};

static void compute_read(const void *region, uint64_t seq, void *arg)
{
	const struct prof_compute_sec *sec = region;
	struct sec_read *rd = arg;
	(void)seq;
	rd->count = __atomic_load_n(&sec->count, __ATOMIC_RELAXED);
	memcpy(&rd->out->compute, &sec->data, sizeof(rd->out->compute));
}

static void net_read(const void *region, uint64_t seq, void *arg)
{
	const struct prof_net_sec *sec = region;
	struct sec_read *rd = arg;
	struct crux_prof_net *n = &rd->out->net;
	(void)seq;
	rd->count = __atomic_load_n(&sec->count, __ATOMIC_RELAXED);
	uint32_t np = __atomic_load_n(&sec->data.npeers, __ATOMIC_RELAXED);
	n->update_ns = sec->data.update_ns;
	n->npeers = np;
	n->reserved = 0;
	n->local_addr = sec->data.local_addr;
	/* Clamped copy; an out-of-range count is reported once consistent. */
	uint32_t cp = np < CRUX_PROF_MAX_PEERS ? np : CRUX_PROF_MAX_PEERS;
	memcpy(n->peers, sec->data.peers, cp * sizeof(n->peers[0]));
	memset(n->peers + cp, 0, (CRUX_PROF_MAX_PEERS - cp) * sizeof(n->peers[0]));
	memcpy(n->tx_bytes_by_kind, sec->data.tx_bytes_by_kind, sizeof(n->tx_bytes_by_kind));
	n->busy_ns = sec->data.busy_ns;
	n->busy_window_ns = sec->data.busy_window_ns;
	n->busy_period_ns = sec->data.busy_period_ns;
	uint32_t nh = __atomic_load_n(&sec->data.nbusy_hist, __ATOMIC_RELAXED);
	uint32_t ch = nh < CRUX_PROF_BUSY_SAMPLES ? nh : CRUX_PROF_BUSY_SAMPLES;
	n->nbusy_hist = nh;
	n->reserved2 = 0;
	memcpy(n->busy_hist, sec->data.busy_hist, ch * sizeof(n->busy_hist[0]));
	memset(n->busy_hist + ch, 0, (CRUX_PROF_BUSY_SAMPLES - ch) * sizeof(n->busy_hist[0]));
}

/*
 * Validate a mapped (or buffered) record and take a consistent snapshot.
 * With expect_pid > 0 the header must name that process.
 */
crux_status_t crux_prof_validate_buffer(const void *base, size_t size, pid_t expect_pid,
					uint64_t expect_start, struct crux_prof_snapshot *out,
					char *err, size_t errlen)
{
	const struct prof_file *f = base;
	char why[256];
	crux_status_t st = crux_shm_validate_ex(base, size, CRUX_PROF_MAGIC, CRUX_PROF_VERSION,
						sizeof(struct prof_file), why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "%s", why);
		return st;
	}
	uint32_t wpid = __atomic_load_n(&f->hdr.writer_pid, __ATOMIC_RELAXED);
	uint64_t wstart = __atomic_load_n(&f->hdr.writer_start_time, __ATOMIC_RELAXED);
	if (expect_pid > 0 && (wpid != (uint32_t)expect_pid || wstart != expect_start)) {
		crux_set_err(err, errlen,
			     "header names process %u (start %" PRIu64 "), the file name %d (start "
			     "%" PRIu64 ")",
			     wpid, wstart, (int)expect_pid, expect_start);
		return CRUX_ERR_CORRUPT;
	}
	if (wpid == 0 || wpid > INT32_MAX) {
		crux_set_err(err, errlen, "header names no valid process (pid %u)", wpid);
		return CRUX_ERR_CORRUPT;
	}
	/* Identity is written before publication and never changes: a plain copy. */
	out->id = f->id;
	if (!memchr(out->id.job_id, '\0', sizeof(out->id.job_id)) ||
	    !memchr(out->id.hostname, '\0', sizeof(out->id.hostname)) ||
	    !addr_family_ok(&out->id.host_addr, true)) {
		crux_set_err(err, errlen, "identity has an unterminated string or a bad address");
		return CRUX_ERR_CORRUPT;
	}

	struct sec_read rd = {out, 0};
	if (crux_seq_read(&f->compute, NULL, compute_read, &rd, PROF_READ_RETRIES) != CRUX_OK) {
		crux_set_err(err, errlen, "compute section kept busy by its writer");
		return CRUX_ERR_BUSY;
	}
	out->has_compute = rd.count > 0;
	if (!memchr(out->compute.device, '\0', sizeof(out->compute.device)) ||
	    out->compute.timing_backend > CRUX_TIMING_CUPTI) {
		crux_set_err(err, errlen,
			     "compute section: unterminated device name or timing "
			     "backend %u unknown",
			     out->compute.timing_backend);
		return CRUX_ERR_CORRUPT;
	}

	if (crux_seq_read(&f->net, NULL, net_read, &rd, PROF_READ_RETRIES) != CRUX_OK) {
		crux_set_err(err, errlen, "net section kept busy by its writer");
		return CRUX_ERR_BUSY;
	}
	out->has_net = rd.count > 0;
	if (out->net.npeers > CRUX_PROF_MAX_PEERS) {
		crux_set_err(err, errlen, "net section: %u peers, at most %d",
			     (unsigned)out->net.npeers, CRUX_PROF_MAX_PEERS);
		return CRUX_ERR_CORRUPT;
	}
	if (out->net.busy_period_ns > out->net.busy_window_ns ||
	    out->net.busy_period_ns > out->net.busy_ns) {
		crux_set_err(err, errlen,
			     "net section: busy %" PRIu64 " ns in a period of %" PRIu64
			     " ns (cumulative %" PRIu64 " ns): more than the period or the total",
			     out->net.busy_period_ns, out->net.busy_window_ns, out->net.busy_ns);
		return CRUX_ERR_CORRUPT;
	}
	if (out->net.nbusy_hist > CRUX_PROF_BUSY_SAMPLES) {
		crux_set_err(err, errlen, "net section: %u busy samples, at most %d",
			     (unsigned)out->net.nbusy_hist, CRUX_PROF_BUSY_SAMPLES);
		return CRUX_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i < out->net.nbusy_hist; i++) {
		const struct crux_prof_busy_sample *b = &out->net.busy_hist[i];
		if (b->busy_ns > out->net.busy_ns ||
		    (i && (b->t_ns < b[-1].t_ns || b->busy_ns < b[-1].busy_ns))) {
			crux_set_err(err, errlen,
				     "net section: busy sample %u goes back in time, or beyond the "
				     "total busy time",
				     (unsigned)i);
			return CRUX_ERR_CORRUPT;
		}
	}
	if (!addr_family_ok(&out->net.local_addr, true)) {
		crux_set_err(err, errlen, "net section: local address has family %u",
			     (unsigned)out->net.local_addr.family);
		return CRUX_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i < out->net.npeers; i++) {
		if (!addr_family_ok(&out->net.peers[i].peer, false)) {
			crux_set_err(err, errlen, "net section: peer %u has address family %u",
				     (unsigned)i, (unsigned)out->net.peers[i].peer.family);
			return CRUX_ERR_CORRUPT;
		}
	}
	out->pid = (pid_t)wpid;
	out->start_time = wstart;
	return CRUX_OK;
}

static crux_status_t prof_read(const char *dir, const char *name, unsigned flags,
			       struct crux_prof_snapshot *out, char *err, size_t errlen)
{
	pid_t pid;
	uint64_t start;
	struct crux_shm_map map;
	char why[512];
	crux_status_t st;

	if (!crux_prof_parse_name(name, &pid, &start)) {
		crux_set_err(err, errlen,
			     "%s/%s: not a profile record name (" CRUX_PROF_PREFIX
			     "<pid>-<starttime>" CRUX_PROF_SUFFIX ")",
			     dir, name);
		return CRUX_ERR_INVAL;
	}
	st = crux_shm_open_ex(dir, name, CRUX_PROF_MAGIC, CRUX_PROF_VERSION,
			      sizeof(struct prof_file), false, &map, err, errlen);
	if (st != CRUX_OK)
		return st;
	/*
	 * The mapping is never touched: a file truncated under it would fault us.
	 * A pread copy instead, kept only if the counters did not move meanwhile.
	 */
	void *cm = NULL;
	struct prof_file *copy = posix_memalign(&cm, 64, sizeof(*copy)) == 0 ? cm : NULL;
	st = copy ? CRUX_ERR_BUSY : CRUX_ERR_NOMEM;
	for (int t = 0; t < 64 && st == CRUX_ERR_BUSY; t++) {
		struct stat sb;
		uint64_t q[3];
		if (fstat(map.fd, &sb) != 0 || (size_t)sb.st_size != sizeof(*copy) ||
		    pread(map.fd, copy, sizeof(*copy), 0) != (ssize_t)sizeof(*copy)) {
			snprintf(why, sizeof(why), "truncated or resized while being read");
			st = CRUX_ERR_CORRUPT;
			break;
		}
		if (pread(map.fd, &q[0], 8, offsetof(struct prof_file, compute.seq)) != 8 ||
		    pread(map.fd, &q[1], 8, offsetof(struct prof_file, net.seq)) != 8 ||
		    pread(map.fd, &q[2], 8,
			  offsetof(struct prof_file, hdr) +
			      offsetof(struct crux_shm_header, generation)) != 8 ||
		    q[0] != atomic_load(&copy->compute.seq) ||
		    q[1] != atomic_load(&copy->net.seq) ||
		    q[2] != atomic_load(&copy->hdr.generation) || (q[0] & 1u) || (q[1] & 1u))
			continue; /* the writer moved while we copied */
		st = crux_prof_validate_buffer(copy, sizeof(*copy), pid, start, out, why,
					       sizeof(why));
	}
	if (st == CRUX_ERR_BUSY)
		snprintf(why, sizeof(why), "its writer kept it busy");
	free(copy);
	if (st == CRUX_OK) {
		/* Who wrote it, from the kernel: the file's owner, or cruxd's word for its copies.
		 */
		struct stat fsb;
		out->attached = (flags & CRUX_PROF_SCAN_AGENT_COPIES) != 0;
		if (out->attached)
			out->uid = (int64_t)out->id.agent_uid;
		else
			out->uid = fstat(map.fd, &fsb) == 0 ? (int64_t)fsb.st_uid : -1;
	}
	if (st != CRUX_OK)
		crux_set_err(err, errlen, "%s: %s", map.path, why);
	else
		snprintf(out->file, sizeof(out->file), "%s", map.path);
	crux_shm_unmap(&map);
	return st;
}

crux_status_t crux_prof_read_ex(const char *dir, const char *name, struct crux_prof_snapshot *out,
				char *err, size_t errlen)
{
	/* A private snapshot: 'out' is written only on success. */
	struct crux_prof_snapshot *tmp = malloc(sizeof(*tmp));
	if (!tmp)
		return CRUX_ERR_NOMEM;
	crux_status_t st = prof_read(dir, name, 0, tmp, err, errlen);
	if (st == CRUX_OK)
		memcpy(out, tmp, sizeof(*out));
	free(tmp);
	return st;
}

crux_status_t crux_prof_read(const char *dir, const char *name, struct crux_prof_snapshot *out)
{
	char err[768];
	crux_status_t st = crux_prof_read_ex(dir, name, out, err, sizeof(err));
	if (st != CRUX_OK && st != CRUX_ERR_BUSY)
		crux_warn("%s", err);
	return st;
}

/* A key for "this file, this problem" so a bad record is logged once. */
static uint64_t report_key(const char *dir, const char *name, crux_status_t st)
{
	char buf[CRUX_PATH_MAX + 16];
	snprintf(buf, sizeof(buf), "%s/%s#%d", dir, name, (int)st);
	return crux_job_key_of(buf);
}

/* Leftover ".tmp-<pid>-..." of a creator that died between create and publish. */
static bool stale_temp(const char *name)
{
	int pid;
	if (strncmp(name, ".tmp-", 5) != 0 || sscanf(name + 5, "%d-", &pid) != 1 || pid <= 0)
		return false;
	return kill(pid, 0) != 0 && errno == ESRCH;
}

crux_status_t crux_prof_scan(const char *dir, unsigned flags, crux_prof_scan_fn fn, void *arg,
			     struct crux_prof_scan_stats *stats)
{
	struct crux_prof_scan_stats s = {0, 0, 0, 0};
	char err[768];
	int dfd;
	crux_status_t st = crux_shm_open_dir(dir, false, &dfd, err, sizeof(err));
	if (st != CRUX_OK) {
		if (crux_log_once_key(report_key(dir, "", st)))
			crux_warn("profile scan: %s", err);
		return st;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return CRUX_ERR_IO;
	}
	struct crux_prof_snapshot *snap = malloc(sizeof(*snap));
	if (!snap) {
		closedir(d);
		return CRUX_ERR_NOMEM;
	}
	struct dirent *e;
	st = CRUX_OK;
	while ((e = readdir(d)) != NULL) {
		const char *name = e->d_name;
		pid_t pid;
		uint64_t start;
		if ((flags & CRUX_PROF_SCAN_REAP) && stale_temp(name)) {
			unlinkat(dfd, name, 0);
			continue;
		}
		if (strncmp(name, CRUX_PROF_PREFIX, sizeof(CRUX_PROF_PREFIX) - 1) != 0)
			continue;
		if (!crux_prof_parse_name(name, &pid, &start)) {
			s.invalid++;
			if (crux_log_once_key(report_key(dir, name, CRUX_ERR_INVAL)))
				crux_warn(
				    "skipping %s/%s: not a profile record name (" CRUX_PROF_PREFIX
				    "<pid>-<starttime>" CRUX_PROF_SUFFIX "); remove it",
				    dir, name);
			continue;
		}
		if ((flags & CRUX_PROF_SCAN_REAP) && !crux_proc_alive(pid, start)) {
			if (unlinkat(dfd, name, 0) == 0) {
				s.reaped++;
				crux_info("removed %s/%s: process %d is gone", dir, name, (int)pid);
			}
			continue;
		}
		crux_status_t rs = prof_read(dir, name, flags, snap, err, sizeof(err));
		if (rs == CRUX_ERR_BUSY) {
			s.busy++;
			continue;
		}
		if (rs == CRUX_ERR_NOENT)
			continue; /* removed since readdir */
		if (rs != CRUX_OK) {
			s.invalid++;
			if (crux_log_once_key(report_key(dir, name, rs)))
				crux_warn("skipping invalid profile record: %s", err);
			continue;
		}
		s.valid++;
		if (fn && fn(arg, snap) != 0)
			break;
	}
	free(snap);
	closedir(d);
	if (stats)
		*stats = s;
	return st;
}
