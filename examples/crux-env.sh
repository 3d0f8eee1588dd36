#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# crux-env.sh: source it (". examples/crux-env.sh [PREFIX]") to run a training
# process under Crux: the preload wraps the NCCL API and publishes profiles,
# NCCL loads the Crux net plugin, and a running cruxd schedules the jobs.
#   PREFIX  where Crux is installed or built (default: /usr/local). A meson
#           build directory works too (plugin/ and preload/ below it).
# Respects values already set (CRUX_SHM_DIR, NCCL_SOCKET_IFNAME, ...).
# Set CRUX_NO_PRELOAD=1 to load only the plugin (frameworks that link NCCL
# statically, e.g. TensorFlow wheels, cannot be interposed; the plugin still
# marks their traffic and takes the chosen paths).
# Leaves crux_env_missing set to the libraries it did not find (empty: all
# found), so a launcher can refuse to start a job that would run without Crux.

crux_prefix="${1:-${CRUX_PREFIX:-/usr/local}}"
crux_env_missing=""
# Absolute, so the paths stay right after a cd and in processes started elsewhere.
case "$crux_prefix" in
/*) ;;
*)
	if [ -d "$crux_prefix" ]; then
		crux_prefix="$(cd "$crux_prefix" && pwd)"
	else
		crux_prefix="$(pwd)/$crux_prefix"
	fi
	;;
esac
crux_find() {
	for d in "$crux_prefix/lib" "$crux_prefix/lib64" "$crux_prefix/lib/x86_64-linux-gnu" \
		"$crux_prefix/$2"; do
		if [ -e "$d/$1" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}
if crux_plugin_dir="$(crux_find libnccl-net-crux.so plugin)"; then
	LD_LIBRARY_PATH="$crux_plugin_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export LD_LIBRARY_PATH
	NCCL_NET_PLUGIN=crux
	# Insist on the plugin: NCCL otherwise falls back to its own transport silently.
	NCCL_NET=Crux
	export NCCL_NET_PLUGIN NCCL_NET
else
	echo "crux-env.sh: libnccl-net-crux.so not found under $crux_prefix" >&2
	crux_env_missing="libnccl-net-crux.so"
fi
if [ "${CRUX_NO_PRELOAD:-0}" != 1 ]; then
	if crux_preload_dir="$(crux_find libcrux-preload.so preload)"; then
		LD_PRELOAD="$crux_preload_dir/libcrux-preload.so${LD_PRELOAD:+ $LD_PRELOAD}"
		export LD_PRELOAD
	else
		echo "crux-env.sh: libcrux-preload.so not found under $crux_prefix" >&2
		crux_env_missing="${crux_env_missing:+$crux_env_missing }libcrux-preload.so"
	fi
fi
: "${CRUX_SHM_DIR:=/dev/shm/crux}"
export CRUX_SHM_DIR
unset crux_prefix crux_plugin_dir crux_preload_dir
