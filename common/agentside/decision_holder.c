/* SPDX-License-Identifier: Apache-2.0 */
/* Who holds the decision table's lock: /proc/locks, else the header's live writer. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/shm.h"
#include "decision_writer_int.h"

/* The pid holding an flock on (dev, ino), from /proc/locks; 0 when not found. */
static pid_t flock_holder(dev_t dev, ino_t ino)
{
	FILE *fp = fopen("/proc/locks", "re");
	char line[256];
	pid_t found = 0;
	if (!fp)
		return 0;
	while (!found && fgets(line, sizeof(line), fp)) {
		char type[16];
		int pid;
		unsigned maj, min;
		unsigned long long in;
		/* "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF" */
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%llu", type, &pid, &maj, &min, &in) !=
		    5)
			continue;
		if (strcmp(type, "FLOCK") == 0 && in == (unsigned long long)ino &&
		    maj == major(dev) && min == minor(dev))
			found = pid;
	}
	fclose(fp);
	return found;
}

pid_t crux_dt_holder_of_map(const struct crux_shm_map *m)
{
	const struct crux_shm_header *h = m->base;
	struct stat sb;
	if (fstat(m->fd, &sb) == 0) {
		pid_t p = flock_holder(sb.st_dev, sb.st_ino);
		if (p > 0)
			return p;
	}
	pid_t p = (pid_t)__atomic_load_n(&h->writer_pid, __ATOMIC_RELAXED);
	uint64_t start = __atomic_load_n(&h->writer_start_time, __ATOMIC_RELAXED);
	return (p > 0 && crux_proc_alive(p, start)) ? p : 0;
}

/* The flock holder of the table on 'fd', else its header's live writer; 0 if none found. */
pid_t crux_dt_holder_of_fd(int fd)
{
	struct crux_shm_header h;
	struct stat sb;
	if (fstat(fd, &sb) == 0) {
		pid_t p = flock_holder(sb.st_dev, sb.st_ino);
		if (p > 0)
			return p;
	}
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return 0;
	pid_t p = (pid_t)h.writer_pid;
	return (p > 0 && crux_proc_alive(p, h.writer_start_time)) ? p : 0;
}

bool crux_dt_still_named_fd(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}
