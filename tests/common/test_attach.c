/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contract v2: sealed memfds, the attach socket, the agent's checks
 * (forged pid, forged record, garbage, policy, job ownership across users)
 * and the socket's recreation.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "crux/attach.h"
#include "crux/broker.h"
#include "crux/decision_writer.h"
#include "crux/log.h"
#include "crux/profile_scan.h"
#include "testutil.h"

struct fx {
	struct tu_dirs d;
	struct crux_dt_writer *w;
	struct crux_broker *b;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct crux_dt_settings s;
	char err[512];
	tu_dirs_make(&f->d);
	crux_dt_settings_default(4, &s);
	if (crux_dt_writer_open_memfd(&s, &f->w, err, sizeof(err)) != CRUX_OK ||
	    crux_broker_open(f->d.shm, NULL, crux_dt_writer_fd(f->w), &f->b, err, sizeof(err)) !=
		CRUX_OK) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	crux_broker_close(f->b);
	crux_dt_writer_close(f->w);
	tu_dirs_remove(&f->d);
	free(f);
	return 0;
}

static void ident(struct crux_prof_identity *id, const char *job)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->job_id, sizeof(id->job_id), "%s", job);
	id->job_key = crux_job_key_of(id->job_id);
	snprintf(id->hostname, sizeof(id->hostname), "h");
	id->rank = 0;
	id->world_size = 1;
	id->local_rank = 0;
}

static int count_cb(void *arg, const struct crux_prof_snapshot *s)
{
	int *n = arg;
	assert_int_equal(s->pid, getpid());
	(*n)++;
	return 0;
}

/* Scan until the broker's thread has caught up (it answers within ~250 ms). */
static int scan_count(struct fx *f, struct crux_prof_scan_stats *st)
{
	int n = 0;
	assert_int_equal(crux_broker_scan(f->b, count_cb, &n, st), CRUX_OK);
	return n;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void test_table_memfd_sealed(void **state)
{
	struct fx *f = *state;
	struct crux_dt_reader *r;
	char err[512];
	int fd = crux_dt_writer_fd(f->w);
	assert_int_equal(crux_dt_reader_open_fd(fd, &r, err, sizeof(err)), CRUX_OK);
	/* Nobody can resize or write it through the descriptor. */
	assert_int_not_equal(ftruncate(fd, 0), 0);
	assert_int_not_equal(ftruncate(fd, (off_t)crux_dt_file_size() * 2), 0);
	assert_true(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
	assert_int_equal(pwrite(fd, "x", 1, 0), -1);
	struct crux_dt_job j = {.job_key = 7, .level = 2};
	snprintf(j.job_id, sizeof(j.job_id), "env:j");
	assert_int_equal(crux_dt_publish(f->w, &j, 1, NULL, 0), CRUX_OK);
	struct crux_decision dec;
	assert_int_equal(crux_dt_lookup(r, 7, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 2);
	assert_true(crux_dt_reader_is_current(r));
	crux_dt_reader_close(r);

	/* An unsealed memfd or a plain file is refused before mapping. */
	int u = memfd_create("x", MFD_CLOEXEC);
	assert_int_equal(ftruncate(u, (off_t)crux_dt_file_size()), 0);
	assert_int_equal(crux_dt_reader_open_fd(u, &r, err, sizeof(err)), CRUX_ERR_PERM);
	assert_non_null(strstr(err, "not sealed"));
	close(u);
}

static void test_attach_profile_lifecycle(void **state)
{
	struct fx *f = *state;
	struct crux_prof_identity id;
	struct crux_prof_handle *h, *h2;
	struct crux_agent_conn *c, *c2;
	struct crux_dt_reader *r = NULL, *r2 = NULL;
	struct crux_prof_scan_stats st;
	char err[512];

	ident(&id, "env:life");
	assert_int_equal(crux_prof_open_shared_ex(&id, &h, err, sizeof(err)), CRUX_OK);
	/* The second component of the process finds the same record. */
	assert_int_equal(crux_prof_open_shared_ex(&id, &h2, err, sizeof(err)), CRUX_OK);
	struct stat a, b;
	fstat(crux_prof_handle_fd(h), &a);
	fstat(crux_prof_handle_fd(h2), &b);
	assert_true(a.st_ino == b.st_ino);

	assert_int_equal(crux_agent_conn_open(f->d.shm, h, &c, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_wait(c, 5000, &r, err, sizeof(err)), CRUX_OK);
	assert_non_null(r);
	assert_int_equal(crux_agent_conn_open(f->d.shm, h2, &c2, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_wait(c2, 5000, &r2, err, sizeof(err)), CRUX_OK);
	/* Two connections, one record: scanned once, with the kernel's pid. */
	assert_int_equal(scan_count(f, &st), 1);
	assert_int_equal(st.valid, 1);
	assert_true(crux_agent_conn_alive(c));

	struct crux_prof_net net;
	memset(&net, 0, sizeof(net));
	net.update_ns = 42;
	crux_prof_publish_net(h2, &net);
	crux_agent_conn_close(c2);
	crux_agent_conn_close(c);
	/* The connection's end is the process's end: no pid guesswork. */
	for (int i = 0; i < 40 && scan_count(f, &st) != 0; i++)
		sleep_ms(50);
	assert_int_equal(scan_count(f, &st), 0);
	crux_dt_reader_close(r);
	crux_dt_reader_close(r2);
	crux_prof_close(h2);
	crux_prof_close(h);
}

struct final_seen {
	int n;
	uint64_t tx;
};

static int final_cb(void *arg, const struct crux_prof_snapshot *s)
{
	struct final_seen *fs = arg;
	fs->n++;
	fs->tx = s->has_net ? s->net.peers[0].tx_bytes[1] : 0;
	return 0;
}

static void wait_attached(struct fx *f, uint32_t want)
{
	uint32_t n = 99;
	uint64_t refused;
	for (int i = 0; i < 100 && n != want; i++) {
		crux_broker_counts(f->b, &n, &refused);
		if (n != want)
			sleep_ms(20);
	}
	assert_int_equal(n, want);
}

/*
 * What a process published just before it closed its connection (the
 * plugin's final counters at finalize) reaches the agent: the next scan
 * delivers the record once more, the one after that no longer. With two
 * connections to one record, closing the first keeps the record attached.
 */
static void test_final_counters_after_close(void **state)
{
	struct fx *f = *state;
	struct crux_prof_identity id;
	struct crux_prof_handle *h, *h2;
	struct crux_agent_conn *c, *c2;
	struct crux_dt_reader *r = NULL, *r2 = NULL;
	struct crux_prof_scan_stats st;
	struct crux_prof_net *net = calloc(1, sizeof(*net));
	struct final_seen fs;
	char err[512];

	ident(&id, "env:final");
	assert_int_equal(crux_prof_open_shared_ex(&id, &h, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_prof_open_shared_ex(&id, &h2, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_open(f->d.shm, h, &c, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_wait(c, 5000, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_open(f->d.shm, h2, &c2, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_wait(c2, 5000, &r2, err, sizeof(err)), CRUX_OK);
	net->npeers = 1;
	assert_int_equal(crux_addr_parse("198.18.0.2", &net->peers[0].peer), CRUX_OK);
	net->peers[0].tx_bytes[1] = 100;
	crux_prof_publish_net(h2, net);

	/* The first connection goes: the second carries the record on. */
	crux_agent_conn_close(c);
	wait_attached(f, 1);
	for (int k = 0; k < 2; k++) {
		memset(&fs, 0, sizeof(fs));
		assert_int_equal(crux_broker_scan(f->b, final_cb, &fs, &st), CRUX_OK);
		assert_int_equal(fs.n, 1);
		assert_true(fs.tx == 100);
	}

	/* Final counters, then the last connection closes at once. */
	net->peers[0].tx_bytes[1] = 777;
	crux_prof_publish_net(h2, net);
	crux_agent_conn_close(c2);
	crux_prof_close(h2);
	crux_prof_close(h);
	wait_attached(f, 0);
	memset(&fs, 0, sizeof(fs));
	assert_int_equal(crux_broker_scan(f->b, final_cb, &fs, &st), CRUX_OK);
	assert_int_equal(fs.n, 1);
	assert_true(fs.tx == 777);
	assert_int_equal(st.reaped, 1);
	memset(&fs, 0, sizeof(fs));
	assert_int_equal(crux_broker_scan(f->b, final_cb, &fs, &st), CRUX_OK);
	assert_int_equal(fs.n, 0);
	crux_dt_reader_close(r);
	crux_dt_reader_close(r2);
	free(net);
}

static void test_observer_and_no_agent(void **state)
{
	struct fx *f = *state;
	struct crux_agent_conn *c;
	struct crux_dt_reader *r;
	char err[512];
	assert_int_equal(crux_agent_conn_open(f->d.shm, NULL, &c, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_wait(c, 5000, &r, err, sizeof(err)), CRUX_OK);
	crux_dt_reader_close(r);
	crux_agent_conn_close(c);
	assert_int_equal(crux_agent_conn_open(f->d.base, NULL, &c, err, sizeof(err)),
			 CRUX_ERR_NOENT);
	assert_non_null(strstr(err, "is cruxd running"));
}

/* A raw client: connect, send 'len' bytes with 'fd', return the socket. */
static int raw_send(struct fx *f, const void *buf, size_t len, int fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%.80s/%s", f->d.shm,
				     CRUX_AGENT_SOCK) < sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	assert_int_equal(sendmsg(s, &m, MSG_NOSIGNAL), (ssize_t)len);
	return s;
}

/* The answer to a raw client: type, or 0 when the agent just closed. */
static int raw_answer(int s, char *reason, size_t len)
{
	struct crux_wire_reply r;
	struct pollfd p = {.fd = s, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 5000), 1);
	ssize_t n = recv(s, &r, sizeof(r), 0);
	close(s);
	if (n != (ssize_t)sizeof(r))
		return 0;
	snprintf(reason, len, "%s", r.reason);
	return r.type;
}

static void hello_for(struct crux_wire_hello *h, const char *job, int role)
{
	memset(h, 0, sizeof(*h));
	h->magic = CRUX_WIRE_MAGIC;
	h->version = CRUX_WIRE_VERSION;
	h->type = CRUX_WIRE_HELLO;
	h->size = sizeof(*h);
	h->role = (uint32_t)role;
	h->pid = getpid();
	crux_proc_start_time(getpid(), &h->start_time);
	snprintf(h->job_id, sizeof(h->job_id), "%s", job);
	h->job_key = crux_job_key_of(h->job_id);
}

static void test_forgery_refused(void **state)
{
	struct fx *f = *state;
	struct crux_wire_hello h;
	struct crux_prof_identity id;
	struct crux_prof_handle *ph;
	char reason[256], err[512];
	uint64_t refused0, refused1;

	crux_broker_counts(f->b, NULL, &refused0);
	/* Claiming another process's pid. */
	hello_for(&h, "env:forge", CRUX_ROLE_OBSERVER);
	h.pid = getppid();
	assert_int_equal(raw_answer(raw_send(f, &h, sizeof(h), -1), reason, sizeof(reason)),
			 CRUX_WIRE_REFUSE);
	assert_non_null(strstr(reason, "claims pid"));

	/* A record whose header names another process. */
	ident(&id, "env:forge");
	assert_int_equal(crux_prof_create_fd_ex(&id, &ph, err, sizeof(err)), CRUX_OK);
	struct crux_shm_header *hd = mmap(NULL, crux_prof_file_size(), PROT_READ | PROT_WRITE,
					  MAP_SHARED, crux_prof_handle_fd(ph), 0);
	assert_true(hd != MAP_FAILED);
	hd->writer_pid = (uint32_t)getppid();
	hello_for(&h, "env:forge", CRUX_ROLE_RANK);
	assert_int_equal(
	    raw_answer(raw_send(f, &h, sizeof(h), crux_prof_handle_fd(ph)), reason, sizeof(reason)),
	    CRUX_WIRE_REFUSE);
	assert_non_null(strstr(reason, "another process"));
	hd->writer_pid = (uint32_t)getpid();

	/* A hello naming another job than the record. */
	hello_for(&h, "env:other", CRUX_ROLE_RANK);
	assert_int_equal(
	    raw_answer(raw_send(f, &h, sizeof(h), crux_prof_handle_fd(ph)), reason, sizeof(reason)),
	    CRUX_WIRE_REFUSE);
	assert_non_null(strstr(reason, "another job"));
	munmap(hd, crux_prof_file_size());
	crux_prof_close(ph);

	/* An unsealed record that could be truncated under the agent. */
	int u = memfd_create("crux-prof-x", MFD_CLOEXEC);
	assert_int_equal(ftruncate(u, (off_t)crux_prof_file_size()), 0);
	hello_for(&h, "env:forge", CRUX_ROLE_RANK);
	assert_int_equal(raw_answer(raw_send(f, &h, sizeof(h), u), reason, sizeof(reason)),
			 CRUX_WIRE_REFUSE);
	assert_non_null(strstr(reason, "not sealed"));
	close(u);

	/* Garbage: refused with the reason; short junk and bytes after a hello close. */
	char junk[256];
	memset(junk, 0xa5, sizeof(junk));
	assert_int_equal(raw_answer(raw_send(f, junk, sizeof(junk), -1), reason, sizeof(reason)),
			 CRUX_WIRE_REFUSE);
	assert_int_equal(raw_answer(raw_send(f, junk, 3, -1), reason, sizeof(reason)),
			 CRUX_WIRE_REFUSE);
	crux_broker_counts(f->b, NULL, &refused1);
	assert_true(refused1 >= refused0 + 6);
	/* The agent still serves. */
	struct crux_agent_conn *c;
	struct crux_dt_reader *r;
	assert_int_equal(crux_agent_conn_open(f->d.shm, NULL, &c, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_agent_conn_wait(c, 5000, &r, err, sizeof(err)), CRUX_OK);
	crux_dt_reader_close(r);
	crux_agent_conn_close(c);
}

static void test_socket_recreated(void **state)
{
	struct fx *f = *state;
	char path[256], err[512];
	struct crux_agent_conn *c;
	struct crux_dt_reader *r;
	snprintf(path, sizeof(path), "%s/%s", f->d.shm, CRUX_AGENT_SOCK);
	assert_int_equal(unlink(path), 0);
	tu_write_file(path, "junk", 4, 0644); /* replaced by a plain file */
	crux_status_t st = CRUX_ERR_NOENT;
	for (int i = 0; i < 60 && st != CRUX_OK; i++) {
		sleep_ms(100);
		st = crux_agent_conn_open(f->d.shm, NULL, &c, err, sizeof(err));
	}
	assert_int_equal(st, CRUX_OK);
	assert_int_equal(crux_agent_conn_wait(c, 5000, &r, err, sizeof(err)), CRUX_OK);
	crux_dt_reader_close(r);
	crux_agent_conn_close(c);
}

/* Child: drop to 'uid', attach as a rank of 'job'; exit 0 welcomed, 1 refused, 2 error. */
static int child_attach(struct fx *f, uid_t uid, const char *job, int hold_fd)
{
	pid_t p = fork();
	assert_true(p >= 0);
	if (p > 0)
		return p;
	struct crux_prof_identity id;
	struct crux_prof_handle *h;
	struct crux_agent_conn *c;
	struct crux_dt_reader *r;
	char err[512], b;
	if (hold_fd >= 0)
		close(hold_fd + 1); /* the write end (pipe() gives adjacent numbers here) */
	if (setgid(uid) != 0 || setuid(uid) != 0)
		_exit(2);
	ident(&id, job);
	if (crux_prof_open_shared_ex(&id, &h, err, sizeof(err)) != CRUX_OK ||
	    crux_agent_conn_open(f->d.shm, h, &c, err, sizeof(err)) != CRUX_OK)
		_exit(2);
	crux_status_t st = crux_agent_conn_wait(c, 5000, &r, err, sizeof(err));
	if (st == CRUX_OK && hold_fd >= 0 && read(hold_fd, &b, 1) < 0)
		_exit(2); /* stay attached until the parent closes the pipe */
	_exit(st == CRUX_OK ? 0 : st == CRUX_ERR_PERM ? 1 : 2);
}

static int uid_cb(void *arg, const struct crux_prof_snapshot *s)
{
	(void)s;
	(*(int *)arg)++;
	return 0;
}

static void test_users_and_job_ownership(void **state)
{
	struct fx *f = *state;
	int hold[2], status, n = 0;
	if (geteuid() != 0)
		skip();
	assert_int_equal(pipe(hold), 0);
	assert_int_equal(hold[1], hold[0] + 1);
	chmod(f->d.base, 0755); /* the users below must reach the socket */
	/* An unprivileged user's rank, profiled by this (root) agent. */
	pid_t a = child_attach(f, 65534, "env:owned", hold[0]);
	for (int i = 0; i < 60 && n == 0; i++) {
		sleep_ms(100);
		n = 0;
		crux_broker_scan(f->b, uid_cb, &n, NULL);
	}
	assert_int_equal(n, 1);
	/* Another user may not join (or impersonate) that job... */
	pid_t b = child_attach(f, 65533, "env:owned", -1);
	assert_int_equal(waitpid(b, &status, 0), b);
	assert_int_equal(WEXITSTATUS(status), 1);
	/* ...but may run its own. */
	pid_t c = child_attach(f, 65533, "env:mine", -1);
	assert_int_equal(waitpid(c, &status, 0), c);
	assert_int_equal(WEXITSTATUS(status), 0);
	close(hold[1]);
	assert_int_equal(waitpid(a, &status, 0), a);
	assert_int_equal(WEXITSTATUS(status), 0);
	close(hold[0]);
}

/* cruxd's writer: the file is written, never mapped; any damage is repaired. */
static void test_shadow_file_repaired(void **state)
{
	struct fx *f = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	struct crux_dt_reader *r;
	struct crux_decision dec;
	char path[256], err[512];
	struct stat sb;
	crux_dt_settings_default(4, &s);
	snprintf(path, sizeof(path), "%s/%s", f->d.shm, CRUX_DT_FILE);
	assert_int_equal(crux_dt_writer_open_shadow(f->d.shm, &s, &w, NULL, err, sizeof(err)),
			 CRUX_OK);
	struct crux_dt_job j = {.job_key = 9, .level = 3};
	snprintf(j.job_id, sizeof(j.job_id), "env:k");
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_reader_open_copy(f->d.shm, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, 9, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 3);
	crux_dt_reader_close(r);

	/* Truncated: the writer does not fault, and writes the file whole again. */
	assert_int_equal(truncate(path, 0), 0);
	crux_dt_heartbeat(w);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal((size_t)sb.st_size, crux_dt_file_size());
	/* Grown and scribbled on, then removed: repaired on the next publish. */
	assert_int_equal(truncate(path, 8 << 20), 0);
	j.level = 1;
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal((size_t)sb.st_size, crux_dt_file_size());
	assert_int_equal(unlink(path), 0);
	j.level = 2;
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_reader_open_copy(f->d.shm, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, 9, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 2);
	crux_dt_reader_close(r);
	/* A copy of a wrong-size file is refused, not mapped. */
	tu_write_file(path, "junk", 4, 0644);
	assert_int_equal(crux_dt_reader_open_copy(f->d.shm, &r, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	/* The memfd handed out kept working all along. */
	assert_int_equal(crux_dt_reader_open_fd(crux_dt_writer_fd(w), &r, err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, 9, NULL, &dec), CRUX_OK);
	assert_int_equal(dec.level, 2);
	crux_dt_reader_close(r);
	crux_dt_writer_close(w);
}

/*
 * The shadow writer never maps the file: it adopts the entries of a whole
 * table by pread (restart), takes the lock (a second writer is refused and
 * named), replaces a table of another layout or a junk file with an empty
 * one, and refuses a symbolic link.
 */
static void test_shadow_open_without_mapping(void **state)
{
	struct fx *f = *state;
	struct crux_dt_settings s;
	struct crux_dt_writer *w, *w2;
	struct crux_dt_reader *r;
	struct crux_decision dec;
	char path[256], err[512];
	pid_t holder = 0;
	crux_dt_settings_default(4, &s);
	snprintf(path, sizeof(path), "%s/%s", f->d.shm, CRUX_DT_FILE);
	assert_int_equal(crux_dt_writer_open_shadow(f->d.shm, &s, &w, NULL, err, sizeof(err)),
			 CRUX_OK);
	struct crux_dt_job j = {.job_key = 11, .level = 2};
	snprintf(j.job_id, sizeof(j.job_id), "env:restart");
	assert_int_equal(crux_dt_publish(w, &j, 1, NULL, 0), CRUX_OK);
	assert_int_equal(crux_dt_writer_open_shadow(f->d.shm, &s, &w2, &holder, err, sizeof(err)),
			 CRUX_ERR_BUSY);
	assert_int_equal(holder, getpid());
	assert_non_null(strstr(err, "held by another writer"));
	crux_dt_writer_close(w);

	/* Restart: the entries are adopted, and served from the new memfd. */
	assert_int_equal(crux_dt_writer_open_shadow(f->d.shm, &s, &w, NULL, err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(crux_dt_reader_open_fd(crux_dt_writer_fd(w), &r, err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(crux_dt_lookup(r, 11, NULL, &dec), CRUX_OK);
	assert_true(dec.job_found);
	assert_int_equal(dec.level, 2);
	crux_dt_reader_close(r);
	crux_dt_writer_close(w);

	/* Another layout version, then junk: replaced by an empty table. */
	struct crux_shm_header h;
	memset(&h, 0, sizeof(h));
	h.magic = CRUX_DT_MAGIC;
	h.layout_version = CRUX_DT_VERSION + 1;
	h.header_size = sizeof(h);
	h.total_size = crux_dt_file_size();
	char *img = calloc(1, crux_dt_file_size());
	memcpy(img, &h, sizeof(h));
	for (int k = 0; k < 2; k++) {
		if (k == 0)
			tu_write_file(path, img, crux_dt_file_size(), 0644);
		else
			tu_write_file(path, "junk", 4, 0644);
		assert_int_equal(
		    crux_dt_writer_open_shadow(f->d.shm, &s, &w, NULL, err, sizeof(err)), CRUX_OK);
		assert_int_equal(crux_dt_reader_open_copy(f->d.shm, &r, err, sizeof(err)), CRUX_OK);
		assert_int_equal(crux_dt_lookup(r, 11, NULL, &dec), CRUX_OK);
		assert_false(dec.job_found);
		crux_dt_reader_close(r);
		crux_dt_writer_close(w);
	}
	free(img);
	/* A symbolic link is refused with the fix. */
	unlink(path);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(crux_dt_writer_open_shadow(f->d.shm, &s, &w, NULL, err, sizeof(err)),
			 CRUX_ERR_PERM);
	assert_non_null(strstr(err, "symbolic link"));
	unlink(path);
}

static void test_policy_env(void **state)
{
	(void)state;
	struct crux_broker_policy p;
	char err[512];
	struct tu_env ok[] = {{"CRUX_ALLOW_USERS", "root,1234"},
			      {"CRUX_ALLOW_GROUPS", "0"},
			      {"CRUX_ALLOW_SHARED_JOBS", "1"},
			      {NULL, NULL}};
	assert_int_equal(crux_broker_policy_env(tu_getenv, ok, &p, err, sizeof(err)), CRUX_OK);
	assert_int_equal(p.nusers, 2);
	assert_int_equal(p.users[0], 0);
	assert_int_equal(p.users[1], 1234);
	assert_int_equal(p.ngroups, 1);
	assert_true(p.shared_jobs);
	struct tu_env bad[] = {{"CRUX_ALLOW_USERS", "no-such-user-crux"}, {NULL, NULL}};
	assert_int_equal(crux_broker_policy_env(tu_getenv, bad, &p, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "no such user"));
}

static void test_wire_decoders(void **state)
{
	(void)state;
	struct crux_wire_hello h, out;
	struct crux_wire_reply r;
	char err[256];
	hello_for(&h, "env:w", CRUX_ROLE_RANK);
	assert_int_equal(crux_wire_decode_hello(&h, sizeof(h), 1, &out, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_wire_decode_hello(&h, sizeof(h), 0, &out, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	assert_int_equal(crux_wire_decode_hello(&h, sizeof(h) - 1, 1, &out, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	h.job_key ^= 1;
	assert_int_equal(crux_wire_decode_hello(&h, sizeof(h), 1, &out, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	h.job_key ^= 1;
	h.version = CRUX_WIRE_VERSION + 1;
	assert_int_equal(crux_wire_decode_hello(&h, sizeof(h), 1, &out, err, sizeof(err)),
			 CRUX_ERR_VERSION);
	assert_non_null(strstr(err, "same Crux version"));
	memset(&r, 0, sizeof(r));
	r.magic = CRUX_WIRE_MAGIC;
	r.version = CRUX_WIRE_VERSION;
	r.type = CRUX_WIRE_WELCOME;
	r.size = sizeof(r);
	r.table_size = crux_dt_file_size();
	struct crux_wire_reply ro;
	assert_int_equal(crux_wire_decode_reply(&r, sizeof(r), 1, &ro, err, sizeof(err)), CRUX_OK);
	r.table_size = 1;
	assert_int_equal(crux_wire_decode_reply(&r, sizeof(r), 1, &ro, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_table_memfd_sealed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_attach_profile_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_final_counters_after_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_observer_and_no_agent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_forgery_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_socket_recreated, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_users_and_job_ownership, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shadow_file_repaired, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shadow_open_without_mapping, setup, teardown),
	    cmocka_unit_test(test_policy_env),
	    cmocka_unit_test(test_wire_decoders),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
