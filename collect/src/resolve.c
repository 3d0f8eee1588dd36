/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding the real NCCL entry points, lazily. Order: NCCL's profiling names
 * (pnccl*) after us in the global scope, then the plain names, then a libnccl
 * already loaded privately (dlopen with RTLD_LOCAL, as Python extensions do),
 * which RTLD_NEXT cannot see.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "collect_int.h"
#include "crux/log.h"

_Atomic(void *) cruxc_real_fns[CRUXC_FN_COUNT];
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int missing_said;

static const char *const fn_names[CRUXC_FN_COUNT] = {
    [CRUXC_FN_ALLREDUCE] = "AllReduce",
    [CRUXC_FN_ALLGATHER] = "AllGather",
    [CRUXC_FN_REDUCESCATTER] = "ReduceScatter",
    [CRUXC_FN_BROADCAST] = "Broadcast",
    [CRUXC_FN_BCAST] = "Bcast",
    [CRUXC_FN_REDUCE] = "Reduce",
    [CRUXC_FN_ALLTOALL] = "AlltoAll",
    [CRUXC_FN_GATHER] = "Gather",
    [CRUXC_FN_SCATTER] = "Scatter",
    [CRUXC_FN_SEND] = "Send",
    [CRUXC_FN_RECV] = "Recv",
    [CRUXC_FN_GROUPSTART] = "GroupStart",
    [CRUXC_FN_GROUPEND] = "GroupEnd",
    [CRUXC_FN_INITRANK] = "CommInitRank",
    [CRUXC_FN_INITRANKCONFIG] = "CommInitRankConfig",
    [CRUXC_FN_INITALL] = "CommInitAll",
    [CRUXC_FN_INITRANKSCALABLE] = "CommInitRankScalable",
    [CRUXC_FN_SPLIT] = "CommSplit",
    [CRUXC_FN_SHRINK] = "CommShrink",
    [CRUXC_FN_FINALIZE] = "CommFinalize",
    [CRUXC_FN_DESTROY] = "CommDestroy",
    [CRUXC_FN_ABORT] = "CommAbort",
    [CRUXC_FN_COMMCOUNT] = "CommCount",
    [CRUXC_FN_USERRANK] = "CommUserRank",
    [CRUXC_FN_CUDEVICE] = "CommCuDevice",
};

/* Our own load address: a symbol found there would call ourselves. */
static bool is_ours(void *p)
{
	Dl_info mine, theirs;

	if (!p || !dladdr((void *)is_ours, &mine) || !dladdr(p, &theirs))
		return false;
	return mine.dli_fbase == theirs.dli_fbase;
}

static void *lookup(void *handle, const char *base)
{
	char name[64];
	void *p;

	snprintf(name, sizeof(name), "pnccl%s", base);
	p = dlsym(handle, name);
	if (p && !is_ours(p))
		return p;
	snprintf(name, sizeof(name), "nccl%s", base);
	p = dlsym(handle, name);
	if (p && !is_ours(p))
		return p;
	return NULL;
}

struct find_nccl {
	void *handle;
};

static int find_nccl_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_nccl *f = arg;
	const char *base;

	(void)size;
	if (!info->dlpi_name || !*info->dlpi_name)
		return 0;
	base = strrchr(info->dlpi_name, '/');
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libnccl.so", 10) != 0 && strncmp(base, "libnccl-", 8) != 0)
		return 0;
	if (strstr(base, "net") || strstr(base, "tuner") || strstr(base, "profiler"))
		return 0; /* NCCL's plugins, not NCCL */
	f->handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
	return f->handle != NULL;
}

/* A libnccl the process already loaded, whatever its scope; never loads one. */
static void *loaded_nccl(void)
{
	struct find_nccl f = {NULL};
	void *h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);

	if (h)
		return h;
	dl_iterate_phdr(find_nccl_cb, &f);
	return f.handle;
}

void *cruxc_real_resolve(enum cruxc_fn f)
{
	void *handle = NULL, *p;

	pthread_mutex_lock(&resolve_lock);
	for (int i = 0; i < CRUXC_FN_COUNT; i++) {
		if (atomic_load(&cruxc_real_fns[i]))
			continue;
		p = lookup(RTLD_NEXT, fn_names[i]);
		if (!p) {
			if (!handle)
				handle = loaded_nccl();
			if (handle)
				p = lookup(handle, fn_names[i]);
		}
		if (p)
			atomic_store_explicit(&cruxc_real_fns[i], p, memory_order_release);
	}
	/* The NOLOAD handle only pins a library that was loaded anyway. */
	if (handle)
		dlclose(handle);
	pthread_mutex_unlock(&resolve_lock);
	p = atomic_load(&cruxc_real_fns[f]);
	if (!p)
		crux_log_once(&missing_said, CRUX_LOG_ERROR,
			      "nccl%s called but no NCCL library providing it is loaded; returning "
			      "ncclSystemError",
			      fn_names[f]);
	return p;
}

struct static_scan {
	char *obj;
	size_t len;
	bool found;
};

static int static_scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct static_scan *s = arg;
	const char *name = info->dlpi_name, *base;
	void *h, *p;
	Dl_info di;

	(void)size;
	if (!name || !*name)
		return 0; /* the executable: checked through the global scope */
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strncmp(base, "libnccl", 7) == 0)
		return 0;
	h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	p = dlsym(h, "ncclGetVersion");
	if (!p)
		p = dlsym(h, "ncclCommInitRank");
	/* Only a definition inside this very object counts (not one of its deps). */
	if (p && dladdr(p, &di) && di.dli_fbase == (void *)info->dlpi_addr && !is_ours(p)) {
		snprintf(s->obj, s->len, "%s", name);
		s->found = true;
	}
	dlclose(h);
	return s->found;
}

bool cruxc_static_nccl_scan(char *obj, size_t len)
{
	struct static_scan s = {obj, len, false};
	void *p = dlsym(RTLD_DEFAULT, "ncclGetVersion");
	Dl_info di;

	if (p && dladdr(p, &di) && !is_ours(p)) {
		const char *n = di.dli_fname ? di.dli_fname : "";
		const char *base = strrchr(n, '/');

		base = base ? base + 1 : n;
		if (strncmp(base, "libnccl", 7) != 0) {
			snprintf(obj, len, "%s", *n ? n : "the executable");
			return true;
		}
	}
	dl_iterate_phdr(static_scan_cb, &s);
	return s.found;
}

void cruxc_resolve_atfork_child(void)
{
	pthread_mutex_init(&resolve_lock, NULL);
}
