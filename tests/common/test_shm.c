/* SPDX-License-Identifier: Apache-2.0 */
/* Record files: directory checks, create/open/validate, corrupt files, process identity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <sys/wait.h>

#include "crux/shm.h"
#include "testutil.h"

#define MAGIC 0x54534554u /* "TEST" */
#define SIZE  4096

static int setup(void **state)
{
	struct tu_dirs *d = calloc(1, sizeof(*d));
	tu_dirs_make(d);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	tu_dirs_remove(*state);
	free(*state);
	return 0;
}

static void test_shm_dir(void **state)
{
	(void)state;
	char buf[CRUX_PATH_MAX];
	struct tu_env none[] = {{NULL, NULL}};
	struct tu_env rel[] = {{"CRUX_SHM_DIR", "crux"}, {NULL, NULL}};
	struct tu_env slash[] = {{"CRUX_SHM_DIR", "/run/crux//"}, {NULL, NULL}};
	char longv[400];
	memset(longv, 'x', sizeof(longv));
	longv[0] = '/';
	longv[sizeof(longv) - 1] = '\0';
	struct tu_env lng[] = {{"CRUX_SHM_DIR", longv}, {NULL, NULL}};

	assert_int_equal(crux_shm_dir(tu_getenv, none, buf, sizeof(buf)), CRUX_OK);
	assert_string_equal(buf, "/dev/shm/crux");
	assert_int_equal(crux_shm_dir(tu_getenv, slash, buf, sizeof(buf)), CRUX_OK);
	assert_string_equal(buf, "/run/crux");
	struct tu_log cap = {0};
	crux_log_set_sink(tu_log_sink, &cap);
	assert_int_equal(crux_shm_dir(tu_getenv, rel, buf, sizeof(buf)), CRUX_ERR_INVAL);
	assert_non_null(strstr(cap.last, "CRUX_SHM_DIR='crux' is not valid"));
	assert_int_equal(crux_shm_dir(tu_getenv, lng, buf, sizeof(buf)), CRUX_ERR_INVAL);
	/* One limit, the socket's: 96 characters pass, 97 do not (was 159, while
	 * DIR/cruxd.sock above 96 could not be created). */
	longv[CRUX_SHM_DIR_MAX] = '\0';
	assert_int_equal(crux_shm_dir(tu_getenv, lng, buf, sizeof(buf)), CRUX_OK);
	longv[CRUX_SHM_DIR_MAX] = 'x';
	longv[CRUX_SHM_DIR_MAX + 1] = '\0';
	assert_int_equal(crux_shm_dir(tu_getenv, lng, buf, sizeof(buf)), CRUX_ERR_INVAL);
	assert_non_null(strstr(cap.last, "at most 96 characters"));
	crux_log_set_sink(NULL, NULL);
}

static void test_dir_checks(void **state)
{
	struct tu_dirs *d = *state;
	char path[256], err[512], expect[300];

	assert_int_equal(crux_shm_dir_check_ex(d->shm, false, err, sizeof(err)), CRUX_OK);

	/* created with 0755 even under a strict umask */
	snprintf(path, sizeof(path), "%s/new", d->base);
	mode_t old = umask(077);
	assert_int_equal(crux_shm_dir_check_ex(path, false, err, sizeof(err)), CRUX_ERR_NOENT);
	assert_non_null(strstr(err, "does not exist"));
	assert_int_equal(crux_shm_dir_check_ex(path, true, err, sizeof(err)), CRUX_OK);
	umask(old);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755);

	/* world-writable */
	chmod(path, 0777);
	assert_int_equal(crux_shm_dir_check_ex(path, true, err, sizeof(err)), CRUX_ERR_PERM);
	snprintf(expect, sizeof(expect), "fix: chmod 755 %s", path);
	assert_non_null(strstr(err, expect));
	assert_non_null(strstr(err, "mode 0777"));
	/* group-writable */
	chmod(path, 0775);
	assert_int_equal(crux_shm_dir_check_ex(path, false, err, sizeof(err)), CRUX_ERR_PERM);
	assert_non_null(strstr(err, "writable by group or others"));
	/* plain function logs the same message */
	struct tu_log cap = {0};
	crux_log_set_sink(tu_log_sink, &cap);
	assert_int_equal(crux_shm_dir_check(path, false), CRUX_ERR_PERM);
	assert_int_equal(cap.lines, 1);
	assert_non_null(strstr(cap.last, expect));
	crux_log_set_sink(NULL, NULL);
	chmod(path, 0755);

	/* symlink to a good directory is still refused */
	char link[256];
	snprintf(link, sizeof(link), "%s/link", d->base);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(crux_shm_dir_check_ex(link, true, err, sizeof(err)), CRUX_ERR_PERM);
	assert_non_null(strstr(err, "symbolic link"));
	/* never advise deleting what the user did not create for us */
	assert_null(strstr(err, "rm "));
	assert_non_null(strstr(err, "set CRUX_SHM_DIR"));

	/* a regular file where the directory should be */
	char file[256];
	snprintf(file, sizeof(file), "%s/file", d->base);
	tu_write_file(file, "x", 1, 0644);
	assert_int_equal(crux_shm_dir_check_ex(file, true, err, sizeof(err)), CRUX_ERR_PERM);
	assert_non_null(strstr(err, "is not a directory"));
	assert_null(strstr(err, "rm "));

	/* relative path */
	assert_int_equal(crux_shm_dir_check_ex("rel/dir", true, err, sizeof(err)), CRUX_ERR_INVAL);

	/* another user's directory (needs root to set up) */
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 12345, 12345), 0);
		assert_int_equal(crux_shm_dir_check_ex(path, false, err, sizeof(err)),
				 CRUX_ERR_PERM);
		assert_non_null(strstr(err, "owned by uid 12345"));
		assert_int_equal(chown(path, 0, 0), 0);
	}
}

static size_t count_entries(const char *dir)
{
	DIR *dd = opendir(dir);
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(dd)) != NULL)
		if (e->d_name[0] != '.' || strncmp(e->d_name, ".tmp", 4) == 0)
			n++;
	closedir(dd);
	return n;
}

static void init_marker(void *base, void *arg)
{
	memcpy((char *)base + 64, arg, strlen(arg) + 1);
}

static void test_create_open(void **state)
{
	struct tu_dirs *d = *state;
	struct crux_shm_map m, r, w;
	char err[512];

	mode_t old = umask(077);
	assert_int_equal(crux_shm_create_ex(d->shm, "rec", MAGIC, 3, SIZE, 0644, true, init_marker,
					    "hello", &m, err, sizeof(err)),
			 CRUX_OK);
	umask(old);
	assert_true(m.writable);
	const struct crux_shm_header *h = m.base;
	assert_int_equal(h->magic, MAGIC);
	assert_int_equal(h->layout_version, 3);
	assert_int_equal(h->header_size, 64);
	assert_int_equal(h->total_size, SIZE);
	assert_int_equal(h->writer_pid, (uint32_t)getpid());
	uint64_t start;
	assert_int_equal(crux_proc_start_time(getpid(), &start), CRUX_OK);
	assert_true(h->writer_start_time == start);
	assert_string_equal((char *)m.base + 64, "hello");
	struct stat sb;
	assert_int_equal(stat(m.path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0644);
	assert_true(S_ISREG(sb.st_mode));
	assert_int_equal(count_entries(d->shm), 1); /* no temporary file left */

	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &r, err, sizeof(err)), CRUX_OK);
	assert_false(r.writable);
	assert_string_equal((char *)r.base + 64, "hello");
	assert_int_equal(crux_shm_open(d->shm, "rec", MAGIC, 3, SIZE, true, &w), CRUX_OK);
	strcpy((char *)w.base + 64, "world");
	assert_string_equal((char *)r.base + 64, "world"); /* same shared pages */
	crux_shm_unmap(&w);
	crux_shm_unmap(&r);

	/* exclusive create of an existing name */
	struct crux_shm_map x;
	memset(&x, 0x5a, sizeof(x));
	assert_int_equal(crux_shm_create_ex(d->shm, "rec", MAGIC, 3, SIZE, 0644, true, NULL, NULL,
					    &x, err, sizeof(err)),
			 CRUX_ERR_EXIST);
	assert_int_equal(x.fd, 0x5a5a5a5a); /* untouched */
	assert_int_equal(count_entries(d->shm), 1);
	/* replacing create */
	assert_int_equal(crux_shm_create(d->shm, "rec", MAGIC, 3, SIZE, 0644, false, &x), CRUX_OK);
	assert_int_equal(*((char *)x.base + 64), 0);
	assert_string_equal((char *)m.base + 64, "world"); /* old mapping: old inode */
	crux_shm_unmap(&x);
	crux_shm_unmap(&m);

	/* bad names */
	assert_int_equal(crux_shm_create_ex(d->shm, "a/b", MAGIC, 3, SIZE, 0644, true, NULL, NULL,
					    &x, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "..", MAGIC, 3, SIZE, false, &x, err, sizeof(err)),
	    CRUX_ERR_INVAL);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "missing", MAGIC, 3, SIZE, false, &x, err, sizeof(err)),
	    CRUX_ERR_NOENT);
	/* create refuses an unsafe directory */
	chmod(d->shm, 0777);
	assert_int_equal(crux_shm_create_ex(d->shm, "rec2", MAGIC, 3, SIZE, 0644, true, NULL, NULL,
					    &x, err, sizeof(err)),
			 CRUX_ERR_PERM);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &x, err, sizeof(err)),
	    CRUX_ERR_PERM);
	chmod(d->shm, 0755);
}

/* Write a header-bearing file with chosen fields. */
static void write_record(const char *path, uint32_t magic, uint16_t ver, uint64_t total,
			 size_t file_size, mode_t mode)
{
	char *buf = calloc(1, file_size ? file_size : 1);
	struct crux_shm_header h;
	memset(&h, 0, sizeof(h));
	h.magic = magic;
	h.layout_version = ver;
	h.header_size = sizeof(h);
	h.total_size = total;
	memcpy(buf, &h, file_size < sizeof(h) ? file_size : sizeof(h));
	tu_write_file(path, buf, file_size, mode);
	free(buf);
}

static void test_corrupt_files(void **state)
{
	struct tu_dirs *d = *state;
	char path[256], err[512];
	struct crux_shm_map m;
	memset(&m, 0, sizeof(m));
	snprintf(path, sizeof(path), "%s/rec", d->shm);

	/* truncated below the header */
	write_record(path, MAGIC, 3, SIZE, 10, 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "truncated"));
	assert_non_null(strstr(err, "remove it"));
	/* empty */
	write_record(path, MAGIC, 3, SIZE, 0, 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_CORRUPT);
	/* truncated after the header */
	write_record(path, MAGIC, 3, SIZE, SIZE / 2, 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "2048 bytes"));
	/* wrong magic */
	write_record(path, 0xdeadbeef, 3, SIZE, SIZE, 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_CORRUPT);
	assert_non_null(strstr(err, "wrong magic 0xdeadbeef"));
	/* wrong version, even with another size */
	write_record(path, MAGIC, 4, SIZE * 2, SIZE * 2, 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_VERSION);
	assert_non_null(strstr(err, "layout version 4"));
	/* header claims another total size */
	write_record(path, MAGIC, 3, SIZE + 8, SIZE, 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_CORRUPT);
	/* garbage */
	char junk[SIZE];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	tu_write_file(path, junk, sizeof(junk), 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_CORRUPT);
	/* a good record with a mode that lets others write it */
	write_record(path, MAGIC, 3, SIZE, SIZE, 0666);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_PERM);
	assert_non_null(strstr(err, "chmod 644"));
	chmod(path, 0644);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)), CRUX_OK);
	crux_shm_unmap(&m);
	unlink(path);

	/* symlink to a valid record */
	char real[256];
	snprintf(real, sizeof(real), "%s/real", d->shm);
	write_record(real, MAGIC, 3, SIZE, SIZE, 0644);
	assert_int_equal(symlink(real, path), 0);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_PERM);
	assert_non_null(strstr(err, "symbolic link"));
	unlink(path);
	/* FIFO: refused, and opening it does not hang */
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_PERM);
	assert_non_null(strstr(err, "not a regular file"));
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, true, &m, err, sizeof(err)),
	    CRUX_ERR_PERM);
	unlink(path);
	/* directory */
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, false, &m, err, sizeof(err)),
	    CRUX_ERR_PERM);
	assert_int_equal(
	    crux_shm_open_ex(d->shm, "rec", MAGIC, 3, SIZE, true, &m, err, sizeof(err)),
	    CRUX_ERR_PERM);
	rmdir(path);
}

static void test_validate_buffer(void **state)
{
	(void)state;
	uint64_t buf[SIZE / 8];
	memset(buf, 0, sizeof(buf));
	struct crux_shm_header *h = (void *)buf;
	h->magic = MAGIC;
	h->layout_version = 1;
	h->header_size = 64;
	h->total_size = SIZE;
	char err[256];
	assert_int_equal(crux_shm_validate(buf, SIZE, MAGIC, 1, SIZE), CRUX_OK);
	assert_int_equal(crux_shm_validate_ex(buf, 63, MAGIC, 1, SIZE, err, sizeof(err)),
			 CRUX_ERR_CORRUPT);
	assert_int_equal(crux_shm_validate(NULL, 0, MAGIC, 1, SIZE), CRUX_ERR_CORRUPT);
	assert_int_equal(crux_shm_validate(buf, SIZE - 1, MAGIC, 1, SIZE), CRUX_ERR_CORRUPT);
	assert_int_equal(crux_shm_validate(buf, SIZE, MAGIC, 2, SIZE), CRUX_ERR_VERSION);
	assert_int_equal(crux_shm_validate(buf, SIZE, MAGIC + 1, 1, SIZE), CRUX_ERR_CORRUPT);
	h->header_size = 32;
	assert_int_equal(crux_shm_validate(buf, SIZE, MAGIC, 1, SIZE), CRUX_ERR_CORRUPT);
	h->header_size = 64;
	h->total_size = UINT64_MAX;
	assert_int_equal(crux_shm_validate(buf, SIZE, MAGIC, 1, SIZE), CRUX_ERR_CORRUPT);
}

static void test_proc_identity(void **state)
{
	(void)state;
	uint64_t start = 0;
	assert_int_equal(crux_proc_start_time(getpid(), &start), CRUX_OK);
	assert_true(start > 0);
	assert_true(crux_proc_alive(getpid(), start));
	assert_false(crux_proc_alive(getpid(), start + 1));
	assert_int_equal(crux_proc_start_time(0, &start), CRUX_ERR_INVAL);
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	uint64_t cstart = 0;
	waitpid(child, NULL, 0);
	assert_int_equal(crux_proc_start_time(child, &cstart), CRUX_ERR_NOENT);
	assert_false(crux_proc_alive(child, start));

	uint64_t a = crux_now_ns(), b = crux_now_ns();
	assert_true(a > 0 && b >= a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shm_dir),
	    cmocka_unit_test_setup_teardown(test_dir_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_open, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_files, setup, teardown),
	    cmocka_unit_test(test_validate_buffer),
	    cmocka_unit_test(test_proc_identity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
