/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a fuzz target over its regression corpus without libFuzzer:
 * every file of every directory (or file) named on the command line is fed
 * to LLVMFuzzerTestOneInput once. A crash, sanitizer report or abort fails.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0) {
		fclose(f);
		return -1;
	}
	long len = ftell(f);
	rewind(f);
	if (len < 0) {
		fclose(f);
		return -1;
	}
	/* Exactly-sized heap buffer so ASan sees reads past the input. */
	uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
	if (!buf) {
		fclose(f);
		return -1;
	}
	size_t got = fread(buf, 1, (size_t)len, f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, got);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int inputs = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) != 0)
				return 1;
			inputs++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		if (!d) {
			perror(argv[i]);
			return 1;
		}
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (run_file(path) != 0) {
				closedir(d);
				return 1;
			}
			inputs++;
		}
		closedir(d);
	}
	if (inputs == 0) {
		fprintf(stderr,
			"no corpus inputs found: the regression corpus is empty or missing\n");
		return 1;
	}
	printf("replayed %d inputs\n", inputs);
	return 0;
}
