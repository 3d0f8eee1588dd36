/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program run under LD_PRELOAD=libcrux-preload.so:
 *   trainer FWLIB SCENARIO ITERS COMPUTE_MS
 * loads the framework library FWLIB with dlopen (RTLD_LOCAL, after start, as
 * Python loads extension modules; libnccl.so.2 comes in with it) and runs
 * SCENARIO. "nonccl" loads nothing and checks that the preload left the
 * process alone (one thread).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fw_run_fn)(const char *scenario, int iters, double compute_ms);

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	fw_run_fn run;
	void *fw;

	if (argc != 5) {
		fprintf(stderr, "usage: trainer FWLIB SCENARIO ITERS COMPUTE_MS\n");
		return 2;
	}
	if (strcmp(argv[2], "nonccl") == 0) {
		int n = threads();

		if (n != 1) {
			fprintf(stderr, "trainer: %d threads in a process without NCCL\n", n);
			return 3;
		}
		return 0;
	}
	/* A leading "+" loads it into the global scope instead. */
	if (argv[1][0] == '+')
		fw = dlopen(argv[1] + 1, RTLD_NOW | RTLD_GLOBAL);
	else
		fw = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!fw) {
		fprintf(stderr, "trainer: %s\n", dlerror());
		return 2;
	}
	run = (fw_run_fn)dlsym(fw, "fw_run");
	if (!run)
		return 2;
	return run(argv[2], atoi(argv[3]), atof(argv[4]));
}
