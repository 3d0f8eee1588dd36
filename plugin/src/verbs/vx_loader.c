/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libibverbs and libmlx5 by dlopen + dlvsym, as NCCL loads them: versioned
 * symbols, so a library exporting several versions of a call gives us the
 * ABI we compiled the types for.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "vx.h"

#define IBV_V "IBVERBS_1.1"
/* rdma-core's providers/mlx5/libmlx5.map: mlx5dv_modify_qp_udp_sport came with MLX5_1.17 (v33) */
#define MLX5_V	 "MLX5_1.17"
#define IBV_LIB	 "libibverbs.so.1"
#define MLX5_LIB "libmlx5.so.1"

#define S(field, name, ver, opt)                                                                   \
	{                                                                                          \
		IBV_LIB, name, ver, offsetof(struct cruxn_ibv, field), opt                         \
	}

static const struct cruxn_ibv_sym ibv_syms[] = {
    S(get_device_list, "ibv_get_device_list", IBV_V, false),
    S(free_device_list, "ibv_free_device_list", IBV_V, false),
    S(get_device_name, "ibv_get_device_name", IBV_V, false),
    S(get_device_guid, "ibv_get_device_guid", IBV_V, false),
    S(open_device, "ibv_open_device", IBV_V, false),
    S(close_device, "ibv_close_device", IBV_V, false),
    S(query_device, "ibv_query_device", IBV_V, false),
    S(query_port, "ibv_query_port", IBV_V, false),
    S(query_gid, "ibv_query_gid", IBV_V, false),
    S(query_gid_ex, "_ibv_query_gid_ex", "IBVERBS_1.11", true),
    S(alloc_pd, "ibv_alloc_pd", IBV_V, false),
    S(dealloc_pd, "ibv_dealloc_pd", IBV_V, false),
    S(reg_mr, "ibv_reg_mr", IBV_V, false),
    S(reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8", true),
    S(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", true),
    S(dereg_mr, "ibv_dereg_mr", IBV_V, false),
    /* rdma-core keeps these two in IBVERBS_1.0 (libibverbs.map) */
    S(create_comp_channel, "ibv_create_comp_channel", "IBVERBS_1.0", true),
    S(destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0", true),
    S(create_cq, "ibv_create_cq", IBV_V, false),
    S(destroy_cq, "ibv_destroy_cq", IBV_V, false),
    S(create_qp, "ibv_create_qp", IBV_V, false),
    S(modify_qp, "ibv_modify_qp", IBV_V, false),
    S(query_qp, "ibv_query_qp", IBV_V, false),
    S(destroy_qp, "ibv_destroy_qp", IBV_V, false),
    S(fork_init, "ibv_fork_init", IBV_V, true),
    S(wc_status_str, "ibv_wc_status_str", IBV_V, false),
    S(get_async_event, "ibv_get_async_event", IBV_V, true),
    S(ack_async_event, "ibv_ack_async_event", IBV_V, true),
    S(event_type_str, "ibv_event_type_str", IBV_V, true),
};

static const struct cruxn_ibv_sym mlx5_sym = {MLX5_LIB, "mlx5dv_modify_qp_udp_sport", MLX5_V,
					      offsetof(struct cruxn_ibv, mlx5_udp_sport), true};

size_t cruxn_ibv_syms(const struct cruxn_ibv_sym **out, size_t i)
{
	size_t n = sizeof(ibv_syms) / sizeof(ibv_syms[0]);

	*out = i < n ? &ibv_syms[i] : i == n ? &mlx5_sym : NULL;
	return n + 1;
}

static void *resolve(void *lib, const struct cruxn_ibv_sym *s)
{
	return dlvsym(lib, s->name, s->version);
}

crux_status_t cruxn_ibv_load(const char *lib, const char *mlx5lib, struct cruxn_ibv *out, char *err,
			     size_t errlen)
{
	struct cruxn_ibv v;
	const char *path = lib && lib[0] ? lib : IBV_LIB, *mpath;

	memset(&v, 0, sizeof(v));
	v.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!v.lib) {
		snprintf(err, errlen,
			 "cannot load %s (%s): install rdma-core's libibverbs or point "
			 "CRUX_IBVERBS_LIB at it",
			 path, dlerror());
		return CRUX_ERR_UNSUPPORTED;
	}
	for (size_t i = 0; i < sizeof(ibv_syms) / sizeof(ibv_syms[0]); i++) {
		void *p = resolve(v.lib, &ibv_syms[i]);
		if (!p && !ibv_syms[i].optional) {
			snprintf(err, errlen,
				 "%s has no %s@%s: not rdma-core's libibverbs (or too old); "
				 "set CRUX_IBVERBS_LIB to one that has it",
				 path, ibv_syms[i].name, ibv_syms[i].version);
			dlclose(v.lib);
			return CRUX_ERR_UNSUPPORTED;
		}
		memcpy((char *)&v + ibv_syms[i].off, &p, sizeof(p));
	}
	/*
	 * The live port change is optional: without it, flow labels only. Its
	 * node first; an unversioned lookup for a libmlx5 built without
	 * version nodes. The library stays loaded either way, so the reason
	 * given later is the true one.
	 */
	mpath = mlx5lib && mlx5lib[0] ? mlx5lib : MLX5_LIB;
	v.mlx5 = dlopen(mpath, RTLD_NOW | RTLD_LOCAL);
	if (!v.mlx5) {
		snprintf(v.mlx5_why, sizeof(v.mlx5_why), "libmlx5 not loaded: %s (CRUX_MLX5_LIB)",
			 dlerror());
	} else {
		void *p = resolve(v.mlx5, &mlx5_sym);
		if (!p)
			p = dlsym(v.mlx5, mlx5_sym.name);
		if (p)
			memcpy(&v.mlx5_udp_sport, &p, sizeof(p));
		else
			snprintf(v.mlx5_why, sizeof(v.mlx5_why),
				 "%s has no %s (neither @%s nor unversioned): rdma-core older than "
				 "v33",
				 mpath, mlx5_sym.name, mlx5_sym.version);
	}
	*out = v;
	return CRUX_OK;
}

/*
 * The libraries stay loaded, as NCCL keeps them: libibverbs keeps its
 * device list and provider state in globals for the life of the process,
 * and unloading would only turn those into leaks (and a later init reloads
 * the same handle anyway).
 */
void cruxn_ibv_unload(struct cruxn_ibv *v)
{
	memset(v, 0, sizeof(*v));
}
