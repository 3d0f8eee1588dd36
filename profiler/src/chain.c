/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Chaining: CRUX_PROFILER_NEXT=<library path or name> loads a second NCCL
 * profiler plugin behind ours. NCCL loads exactly one profiler plugin, so
 * this is how Crux profiles next to NCCL Inspector or any other profiler:
 * every call NCCL makes into us (init, start, stop, state, finalize) is made
 * into it too, with the descriptor of the ABI version NCCL speaks.
 *
 * - The decision is taken once, at the first init, and never changes: when
 *   a next plugin is loaded every context we hand NCCL is a cruxf_chain and
 *   every event handle a cruxf_link (the pair of our handle and its handle),
 *   so the two plugins' handles and contexts never mix.
 * - Activation masks: ours | its own; an event reaches the next plugin only
 *   when its type is in the mask it asked for, and parents are translated
 *   to its own handles.
 * - Versions: NCCL's v4 descriptors go to a v4 table only. v5, v6 and v7
 *   descriptors share every member's offset (each version appends), so a
 *   newer one is handed as is to an older table for the event types the
 *   older version knows, and an older one is copied into a zeroed v7
 *   descriptor for a v7-only plugin (user tag 0: untagged).
 * - A bad value (nothing to load, no usable table, our own library) is said
 *   once on NCCL's log and Crux goes on profiling alone.
 *
 * Handlers stay lock- and allocation-free: a link is a slot of one
 * process-wide ring taken with one atomic increment and one CAS. A stopped
 * link stays readable until the ring comes round to it again, because NCCL
 * names stopped handles as parents (a Coll task's parent is its CollApi
 * event, stopped when the call was enqueued, and a proxy operation's is
 * its task): the next plugin's own handles are never wrapped, so those it
 * alone keeps (tasks, proxy and kernel events) stay valid parents for as
 * long as it keeps them.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/log.h"
#include "cruxf.h"

#define CRUXF_CHAIN_MAGIC 0x4352555843484149ull /* "CRUXCHAI" */

/* The process's next plugin; written once under the lock of the first init. */
struct cruxf_next_state cruxf_next;
static pthread_mutex_t next_lock = PTHREAD_MUTEX_INITIALIZER;

/* Event-type bits each ABI version defines (a table never sees others). */
static uint64_t known_types(int version)
{
	if (version >= 7)
		return (1u << 16) - 1;
	if (version == 6)
		return (1u << 15) - 1;
	if (version == 5)
		return (1u << 12) - 1;
	return (1u << 8) - 1;
}

/* Bytes of a caller's descriptor we may read: header and its largest member. */
static size_t descr_bytes(int version)
{
	size_t m = sizeof(((cruxf_descr_v5_t *)0)->coll);

	if (version >= 6 && sizeof(((cruxf_descr_v5_t *)0)->ceColl_v6) > m)
		m = sizeof(((cruxf_descr_v5_t *)0)->ceColl_v6);
	return offsetof(cruxf_descr_v5_t, coll) + m;
}

_Static_assert(offsetof(cruxf_descr_v4_t, parentObj) == offsetof(cruxf_descr_v5_t, parentObj),
	       "parentObj sits at one offset in every version");
_Static_assert(offsetof(cruxf_descr_v7_t, parentObj) == offsetof(cruxf_descr_v5_t, parentObj),
	       "parentObj sits at one offset in every version");

/* Our own library, to refuse chaining to ourselves. */
static void *own_handle(void)
{
	Dl_info info;
	void *h;

	if (!dladdr((void *)&cruxf_chain_init, &info) || !info.dli_fname)
		return NULL;
	h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	if (h)
		dlclose(h); /* only the identity is wanted; the library stays loaded */
	return h;
}

/*
 * Resolve and load CRUX_PROFILER_NEXT for a caller speaking 'version'.
 * Sets cruxf_next.on, or says once why not. Called under next_lock.
 */
static void load_next(int version)
{
	const char *v = getenv("CRUX_PROFILER_NEXT");
	char file[512], sym[24];
	const char *how = NULL;
	void *lib;
	int have[8] = {0};

	if (!v || !*v)
		return;
	if (strchr(v, '/') || (strlen(v) > 3 && !strcmp(v + strlen(v) - 3, ".so")) ||
	    strstr(v, ".so."))
		snprintf(file, sizeof(file), "%s", v);
	else {
		for (const char *p = v; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.')) {
				crux_warn(
				    "CRUX_PROFILER_NEXT='%s' is not valid: expected a library path "
				    "or a plugin name N (letters, digits, '-', '_', '.') for "
				    "libnccl-profiler-N.so; profiling goes on without a chained "
				    "plugin",
				    v);
				return;
			}
		if (snprintf(file, sizeof(file), "libnccl-profiler-%s.so", v) >=
		    (int)sizeof(file)) {
			crux_warn("CRUX_PROFILER_NEXT='%.64s...' is too long; profiling goes on "
				  "without a chained plugin",
				  v);
			return;
		}
	}
	lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		crux_warn(
		    "CRUX_PROFILER_NEXT='%s': cannot load %s (%s); set it to a profiler "
		    "plugin's path or name (on LD_LIBRARY_PATH); profiling goes on without it",
		    v, file, e ? e : "unknown error");
		return;
	}
	if (lib == own_handle()) {
		crux_warn(
		    "CRUX_PROFILER_NEXT='%s' names libnccl-profiler-crux.so itself; set it to "
		    "another profiler plugin; profiling goes on without a chained plugin",
		    v);
		dlclose(lib);
		return;
	}
	for (int n = 4; n <= 7; n++) {
		snprintf(sym, sizeof(sym), "ncclProfiler_v%d", n);
		have[n] = dlsym(lib, sym) != NULL;
	}
	/* The same version as NCCL's, else the nearest one its descriptors can be handed to. */
	cruxf_next.version = 0;
	if (have[version])
		cruxf_next.version = version;
	else if (version >= 5)
		for (int n = 7; n >= 5 && !cruxf_next.version; n--)
			if (have[n])
				cruxf_next.version = n;
	if (!cruxf_next.version) {
		char list[64] = "";
		for (int n = 4; n <= 7; n++)
			if (have[n])
				snprintf(list + strlen(list), sizeof(list) - strlen(list), " v%d",
					 n);
		how = version == 4 ? "NCCL speaks v4 here (NCCL 2.27): it needs ncclProfiler_v4"
				   : "NCCL speaks v5+ here: it needs one of ncclProfiler_v5..v7";
		crux_warn("CRUX_PROFILER_NEXT='%s': %s exports no profiler table NCCL's v%d events "
			  "can be handed to (%s; it has:%s); profiling goes on without it",
			  v, file, version, how, list[0] ? list : " none");
		dlclose(lib);
		return;
	}
	snprintf(sym, sizeof(sym), "ncclProfiler_v%d", cruxf_next.version);
	if (cruxf_next.version == 4)
		cruxf_next.t4 = dlsym(lib, sym);
	else if (cruxf_next.version == 7)
		cruxf_next.t7 = dlsym(lib, sym);
	else
		cruxf_next.t5 = dlsym(lib, sym);
	cruxf_next.links = calloc(CRUXF_LINKS, sizeof(struct cruxf_link));
	if (!cruxf_next.links) {
		crux_warn("CRUX_PROFILER_NEXT='%s': no memory for %u event handle pairs; profiling "
			  "goes on without it",
			  v, CRUXF_LINKS);
		dlclose(lib);
		return;
	}
	cruxf_next.lib = lib;
	cruxf_next.caller = version;
	cruxf_next.types = known_types(version) & known_types(cruxf_next.version);
	cruxf_next.upgrade = cruxf_next.version == 7 && version < 7;
	cruxf_next.copy_bytes = descr_bytes(version);
	snprintf(cruxf_next.name, sizeof(cruxf_next.name), "%s", v);
	cruxf_next.on = true;
	crux_info("chained profiler plugin %s (%s, ncclProfiler_v%d) behind Crux (NCCL speaks v%d)",
		  v, file, cruxf_next.version, version);
}

static const char *next_table_name(void)
{
	const char *n = cruxf_next.version == 4	  ? cruxf_next.t4->name
			: cruxf_next.version == 7 ? cruxf_next.t7->name
						  : cruxf_next.t5->name;
	return n ? n : "?";
}

cruxf_result_t cruxf_chain_init(int version, void **context, int *mask, uint64_t comm_id,
				const char *name, int nnodes, int nranks, int rank,
				cruxf_logger_t logfn)
{
	struct cruxf_chain *ch;
	void *ours = NULL;
	int omask = 0, nmask;
	cruxf_result_t r;

	if (!context || !mask)
		return CRUXF_INVALID_ARGUMENT;
	nmask = *mask; /* what NCCL would have handed the next plugin */
	cruxf_init(&ours, &omask, version, name, nranks, rank, logfn); /* sets the log sink */
	pthread_mutex_lock(&next_lock);
	if (!cruxf_next.decided) {
		load_next(version);
		cruxf_next.decided = true;
	}
	pthread_mutex_unlock(&next_lock);
	if (!cruxf_next.on) {
		*context = ours;
		*mask = omask;
		return CRUXF_SUCCESS;
	}
	*context = NULL;
	*mask = 0;
	if (version != cruxf_next.caller) {
		/* One NCCL per process speaks one version; never mix descriptor shapes. */
		crux_log_once(&cruxf_next.mixed_said, CRUX_LOG_WARN,
			      "NCCL called ncclProfiler_v%d after v%d; the chained plugin %s gets "
			      "no events from this communicator",
			      version, cruxf_next.caller, cruxf_next.name);
		*context = NULL;
		if (ours)
			cruxf_finalize(ours);
		return CRUXF_SUCCESS;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		if (ours)
			cruxf_finalize(ours);
		return CRUXF_SUCCESS; /* never fail NCCL for profiling */
	}
	ch->magic = CRUXF_CHAIN_MAGIC;
	ch->ours = ours;
	if (cruxf_next.version == 4)
		r = cruxf_next.t4->init(&ch->next, &nmask, name, comm_id, nnodes, nranks, rank,
					logfn);
	else if (cruxf_next.version == 7)
		r = cruxf_next.t7->init(&ch->next, comm_id, &nmask, name, nnodes, nranks, rank,
					logfn);
	else
		r = cruxf_next.t5->init(&ch->next, comm_id, &nmask, name, nnodes, nranks, rank,
					logfn);
	if (r != CRUXF_SUCCESS) {
		crux_log_once(&cruxf_next.init_said, CRUX_LOG_WARN,
			      "CRUX_PROFILER_NEXT=%s: the chained plugin (%s) failed its init "
			      "(error %d); it gets no events from this communicator, Crux profiles "
			      "on",
			      cruxf_next.name, next_table_name(), (int)r);
		ch->next = NULL;
		nmask = 0;
	}
	ch->next_mask = (uint64_t)(unsigned)nmask & cruxf_next.types;
	if (!ch->ours && !ch->next_mask) {
		if (ch->next)
			cruxf_chain_finalize_next(ch);
		free(ch);
		return CRUXF_SUCCESS;
	}
	*context = ch;
	*mask = omask | (int)ch->next_mask;
	return CRUXF_SUCCESS;
}

void cruxf_chain_finalize_next(struct cruxf_chain *ch)
{
	if (!ch->next)
		return;
	if (cruxf_next.version == 4)
		cruxf_next.t4->finalize(ch->next);
	else if (cruxf_next.version == 7)
		cruxf_next.t7->finalize(ch->next);
	else
		cruxf_next.t5->finalize(ch->next);
	ch->next = NULL;
}

cruxf_result_t cruxf_chain_finalize(void *context)
{
	struct cruxf_chain *ch = context;

	if (!ch || ch->magic != CRUXF_CHAIN_MAGIC)
		return CRUXF_SUCCESS;
	if (ch->ours)
		cruxf_finalize(ch->ours);
	cruxf_chain_finalize_next(ch);
	ch->magic = 0;
	free(ch);
	return CRUXF_SUCCESS;
}

/* A free link, or NULL when none of the next few is. */
static inline struct cruxf_link *link_get(void)
{
	for (int k = 0; k < 8; k++) {
		uint32_t i = atomic_fetch_add_explicit(&cruxf_next.at, 1, memory_order_relaxed);
		struct cruxf_link *l = &cruxf_next.links[i & (CRUXF_LINKS - 1)];
		uint32_t free_ = 0;

		if (!atomic_load_explicit(&l->busy, memory_order_relaxed) &&
		    atomic_compare_exchange_strong_explicit(
			&l->busy, &free_, 1, memory_order_acquire, memory_order_relaxed))
			return l;
	}
	return NULL;
}

/* One of our links, or NULL for any other pointer (the next plugin's own handles). */
static inline struct cruxf_link *as_link(void *p)
{
	uintptr_t a = (uintptr_t)p, base = (uintptr_t)cruxf_next.links;

	if (a < base || a >= base + (uintptr_t)CRUXF_LINKS * sizeof(struct cruxf_link) ||
	    (a - base) % sizeof(struct cruxf_link) != 0)
		return NULL;
	return (struct cruxf_link *)p;
}

static inline void next_stop(void *h)
{
	if (cruxf_next.version == 4)
		cruxf_next.t4->stopEvent(h);
	else if (cruxf_next.version == 7)
		cruxf_next.t7->stopEvent(h);
	else
		cruxf_next.t5->stopEvent(h);
}

void cruxf_chain_start(void *context, void **handle, void *descr, cruxf_core_start_fn core)
{
	struct cruxf_chain *ch = context;
	void **parentp = (void **)((char *)descr + offsetof(cruxf_descr_v5_t, parentObj));
	void *parent = *parentp, *oh = NULL, *nh = NULL;
	struct cruxf_link *pl, *l;
	uint64_t type;

	*handle = NULL;
	if (!ch || ch->magic != CRUXF_CHAIN_MAGIC)
		return;
	pl = parent ? as_link(parent) : NULL;
	/* A parent that is no link is the next plugin's own handle (or NCCL's NULL). */
	if (ch->ours)
		core(ch->ours, &oh, descr, pl ? pl->ours : NULL);
	type = cruxf_next.caller == 4 ? ((cruxf_descr_v4_t *)descr)->type
				      : ((cruxf_descr_v5_t *)descr)->type;
	if (ch->next && (type & ch->next_mask)) {
		void *np = pl ? pl->next : parent;

		if (cruxf_next.upgrade) {
			cruxf_descr_v7_t up;

			memset(&up, 0, sizeof(up));
			memcpy(&up, descr, cruxf_next.copy_bytes);
			up.parentObj = np;
			/* Older versions have no tag: whatever lies there is not one. */
			switch (type) {
			case CRUXF_EV_COLL_API:
				up.collApi.userTag = 0;
				break;
			case CRUXF_EV_P2P_API:
				up.p2pApi.userTag = 0;
				break;
			case CRUXF_EV_COLL:
				up.coll.userTag = 0;
				up.coll.kernelVariant = NULL;
				up.coll.isSymColl = false;
				break;
			case CRUXF_EV_P2P:
				up.p2p.userTag = 0;
				break;
			case CRUXF_EV_CE_COLL:
				up.ceColl.userTag = 0;
				break;
			default:
				break;
			}
			cruxf_next.t7->startEvent(ch->next, &nh, &up);
		} else {
			/* NCCL's own descriptor, its parent swapped for the call. */
			*parentp = np;
			if (cruxf_next.version == 4)
				cruxf_next.t4->startEvent(ch->next, &nh, descr);
			else if (cruxf_next.version == 7)
				cruxf_next.t7->startEvent(ch->next, &nh, descr);
			else
				cruxf_next.t5->startEvent(ch->next, &nh, descr);
			*parentp = parent;
		}
	}
	if (!oh) {
		*handle = nh; /* the next plugin's alone: no pair needed */
		return;
	}
	l = link_get();
	if (!l) {
		/* Pathological: links all live. Close both rather than leak. */
		crux_log_once(&cruxf_next.full_said, CRUX_LOG_WARN,
			      "more than %u profiler events live at once; events are dropped for "
			      "both Crux and %s until some end",
			      CRUXF_LINKS, cruxf_next.name);
		if (oh)
			cruxf_stop(oh);
		if (nh)
			next_stop(nh);
		return;
	}
	l->ours = oh;
	l->next = nh;
	*handle = l;
}

void cruxf_chain_stop(void *handle)
{
	struct cruxf_link *l;

	if (!handle)
		return;
	if (!(l = as_link(handle))) {
		next_stop(handle);
		return;
	}
	if (l->ours)
		cruxf_stop(l->ours);
	if (l->next)
		next_stop(l->next);
	/* The pair stays readable (a stopped parent) until the ring comes round. */
	atomic_store_explicit(&l->busy, 0, memory_order_release);
}

void cruxf_chain_state(void *handle, int state, cruxf_state_args_t *args)
{
	struct cruxf_link *l;
	void *nh = handle;

	if (!handle)
		return;
	if ((l = as_link(handle))) {
		if (l->ours)
			cruxf_state_change(l->ours, state);
		nh = l->next;
	}
	if (!nh)
		return;
	if (cruxf_next.version == 4)
		cruxf_next.t4->recordEventState(nh, state, args);
	else if (cruxf_next.version == 7)
		cruxf_next.t7->recordEventState(nh, state, args);
	else
		cruxf_next.t5->recordEventState(nh, state, args);
}
