/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every versioned name the verbs loader asks dlvsym for (the plugin and
 * crux-hw-check share vx_loader.c) must exist under that version node in
 * the installed rdma-core (Debian libibverbs1, ibverbs-providers) and in
 * the software double, so a wrong node (MLX5_1.19 for a MLX5_1.17 call) is
 * caught at build time rather than on the first real host.
 * usage: test-cruxn-symvers [DOUBLE.so]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "verbs/vx.h"

static int check(const char *what, const char *path_of_lib)
{
	const struct cruxn_ibv_sym *s;
	int bad = 0;

	for (size_t i = 0, n = cruxn_ibv_syms(&s, 0); i < n; i++) {
		const char *path;
		void *h;

		cruxn_ibv_syms(&s, i);
		path = path_of_lib ? path_of_lib : s->lib;
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("FAIL: %s: cannot load %s (%s); install libibverbs1 and "
			       "ibverbs-providers (make deps)\n",
			       what, path, dlerror());
			bad++;
			continue;
		}
		if (!dlvsym(h, s->name, s->version)) {
			printf("FAIL: %s: %s has no %s@%s%s\n", what, path, s->name, s->version,
			       dlsym(h, s->name) ? " (the name exists under another node: "
						   "objdump -T shows which)"
						 : "");
			bad++;
		} else {
			printf("ok: %s: %s@%s in %s\n", what, s->name, s->version, path);
		}
		/*
		 * Not closed: libibverbs and its providers allocate at load time and
		 * stay loaded in the plugin too (a dlclose'd library's allocations
		 * show as leaks of an unknown module).
		 */
	}
	return bad;
}

int main(int argc, char **argv)
{
	int bad = check("rdma-core", NULL);

	if (argc > 1)
		bad += check("software double", argv[1]);
	printf("%s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}
