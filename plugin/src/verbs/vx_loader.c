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

#define IBV_V	 "IBVERBS_1.1"
#define MLX5_V	 "MLX5_1.19"
#define IBV_LIB	 "libibverbs.so.1"
#define MLX5_LIB "libmlx5.so.1"

struct sym {
	const char *name;
	const char *version;
	size_t off; /* offset of the pointer in struct cruxn_ibv */
	bool optional;
};

#define S(field, name, ver, opt) {name, ver, offsetof(struct cruxn_ibv, field), opt}

static const struct sym ibv_syms[] = {
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
	S(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", true),
	S(dereg_mr, "ibv_dereg_mr", IBV_V, false),
	S(create_comp_channel, "ibv_create_comp_channel", IBV_V, true),
	S(destroy_comp_channel, "ibv_destroy_comp_channel", IBV_V, true),
	S(create_cq, "ibv_create_cq", IBV_V, false),
	S(destroy_cq, "ibv_destroy_cq", IBV_V, false),
	S(create_qp, "ibv_create_qp", IBV_V, false),
	S(modify_qp, "ibv_modify_qp", IBV_V, false),
	S(query_qp, "ibv_query_qp", IBV_V, false),
	S(destroy_qp, "ibv_destroy_qp", IBV_V, false),
	S(fork_init, "ibv_fork_init", IBV_V, true),
	S(wc_status_str, "ibv_wc_status_str", IBV_V, false),
};

static void *resolve(void *lib, const struct sym *s)
{
	return dlvsym(lib, s->name, s->version);
}

crux_status_t cruxn_ibv_load(const char *lib, const char *mlx5lib, struct cruxn_ibv *out,
			     char *err, size_t errlen)
{
	struct cruxn_ibv v;
	const char *path = lib && lib[0] ? lib : IBV_LIB;

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
	/* The live port change is optional: no libmlx5 means flow labels only. */
	v.mlx5 = dlopen(mlx5lib && mlx5lib[0] ? mlx5lib : MLX5_LIB, RTLD_NOW | RTLD_LOCAL);
	if (v.mlx5) {
		void *p = dlvsym(v.mlx5, "mlx5dv_modify_qp_udp_sport", MLX5_V);
		if (p) {
			memcpy(&v.mlx5_udp_sport, &p, sizeof(p));
		} else {
			dlclose(v.mlx5);
			v.mlx5 = NULL;
		}
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
