#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/gpu/run.sh: the checks on a real GPU (real NCCL, CUPTI, nccl-tests).
# Run from the repository root on a machine with one NVIDIA GPU, CUDA (nvcc)
# and NCCL (the one PyTorch uses, from the nvidia-nccl wheel, or $NCCL_HOME).
# Never run by `make test` (CI has no GPU).
#
#   tests/gpu/run.sh [PHASE...]      default: probe build plugin level preload nccltests
#
#   probe     what the machine has (GPU, driver, CUDA, NCCL, RDMA devices)
#   build     meson build of the project (plugin, preload, agent) + gpu_check
#   plugin    all-reduce sweep, 2 and 4 ranks on one GPU (distinct NCCL_HOSTID),
#             NCCL's own socket transport vs the Crux plugin, alternated, every
#             element verified -> gpu-plugin.json
#   level     2-rank soaks through the plugin while the decision table moves the
#             job's level twice; per-level byte counters from the profile record
#   preload   matmul + all-reduce iterations under LD_PRELOAD=libcrux-preload.so
#             (CUPTI and events backends): profile vs CUDA-event ground truth,
#             and the added cost per iteration -> gpu-preload.json
#   nccltests nccl-tests built here (source in $NCCL_TESTS_SRC) against MPICH
#             ($MPICH_DEBS: Debian .debs unpacked here), then
#             examples/nccl-tests/allreduce-compare.sh --one-gpu -> gpu-nccl-tests.json
#   fourrank  4 ranks on the one GPU, socket vs Crux, under three conditions:
#             base (as the plugin phase), pin (each rank and its threads on
#             its own CPUs, NCCL_IGNORE_CPU_AFFINITY=1) and mps (the ranks'
#             kernels run concurrently under CUDA MPS instead of
#             time-slicing the GPU) -> gpu-fourrank.json
#   ibcompare NCCL's own IB transport (net_ib) vs the Crux plugin's verbs
#             transport, both on the software RDMA device (tests/softrdma, as
#             NCCL_IBVERBS_LIB / CRUX_IBVERBS_LIB), 2 ranks, every element
#             verified -> gpu-ib-compare.json
#   jobs      real PyTorch DDP jobs of different GPU intensity, ranks in
#             network namespaces on the testbed's shaped fabric, no
#             scheduling vs Crux (tests/gpu/jobs.sh) -> gpu-jobs.json
#
# Results and logs go to $OUT (default /tmp/crux-gpu-out).
set -uo pipefail

ROOT="$(pwd)"
OUT="${OUT:-/tmp/crux-gpu-out}"
W="${CRUX_GPU_WORK:-/tmp/crux-gpu}"
B="$W/build"
PREFIX="$W/prefix"
REPS="${CRUX_GPU_REPS:-3}"
mkdir -p "$OUT" "$W"
# libsoftrdma.so for ibcompare: built with the tests (not on the GPU machine,
# whose build has -Dtests=disabled), so it is brought along.
SOFTRDMA="${CRUX_GPU_SOFTRDMA:-$ROOT/.gpu/softrdma/libsoftrdma.so}"
PHASES="${*:-probe build plugin level preload nccltests}"
log() { echo "[$(date +%T)] $*"; }
fail=0

find_nccl() {
	if [ -n "${NCCL_HOME:-}" ]; then echo "$NCCL_HOME"; return; fi
	local d
	d="$(python3 - <<'EOF' 2>/dev/null
import importlib.util
s = importlib.util.find_spec("nvidia.nccl")
print(list(s.submodule_search_locations)[0])
EOF
)"
	if [ -n "$d" ] && [ -e "$d/lib/libnccl.so.2" ]; then echo "$d"; return; fi
	[ -e /usr/local/cuda/lib64/libnccl.so.2 ] && { echo /usr/local/cuda; return; }
	echo ""
}
NCCL_HOME="$(find_nccl)"
NCCL_LIB="$NCCL_HOME/lib"
[ -e "$NCCL_LIB/libnccl.so.2" ] || NCCL_LIB="$NCCL_HOME/lib64"
export LD_LIBRARY_PATH="$B/plugin:$B/profiler:$NCCL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
GC="$W/gpu_check"

phase_probe() {
	log "probe"
	{
		nvidia-smi -L
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
		"$CUDA/bin/nvcc" --version | tail -2
		echo "NCCL_HOME=$NCCL_HOME"
		ls "$NCCL_LIB"
		grep -E '^#define NCCL_(MAJOR|MINOR|PATCH)' "$NCCL_HOME/include/nccl.h"
		python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.nccl.version())'
		ls /usr/local/cuda/extras/CUPTI/lib64 2>/dev/null | head -3
		find / -xdev -name 'libcupti.so*' 2>/dev/null | head -5
		(command -v ibv_devices && ibv_devices) || echo "no ibv_devices"
		ls /sys/class/infiniband 2>/dev/null || echo "no /sys/class/infiniband"
		ip -br addr
		command -v meson ninja gcc cc tcpdump ss tc ip unshare taskset nvidia-cuda-mps-control || true
		find / -xdev -name nvidia-cuda-mps-control 2>/dev/null | head -3
		ip netns add crux-gpu-probe && ip netns del crux-gpu-probe && echo "netns: ok"
		tc qdisc add dev lo root handle 1: htb default 1 2>&1 && tc qdisc del dev lo root && echo "htb: ok"
		nproc; uname -r
	} >"$OUT/probe.txt" 2>&1
	cat "$OUT/probe.txt"
}

phase_build() {
	if [ "${CRUX_GPU_REBUILD:-1}" = 0 ] && [ -x "$GC" ] && [ -e "$B/plugin/libnccl-net-crux.so" ]; then
		log "build: kept from an earlier call (CRUX_GPU_REBUILD=0)"
		return
	fi
	log "build (meson)"
	local meson=meson
	command -v meson >/dev/null || meson="python3 -m mesonbuild.mesonmain"
	rm -rf "$B"
	# CRUX_GPU_NO_MESON=1: gpu_check only (phases that never load the project's libraries)
	if [ "${CRUX_GPU_NO_MESON:-0}" != 1 ]; then
		$meson setup "$B" --buildtype=release -Dtests=disabled -Dcudaroot="$CUDA" \
			--prefix "$PREFIX" >"$OUT/build.log" 2>&1 &&
			$meson compile -C "$B" >>"$OUT/build.log" 2>&1 &&
			$meson install -C "$B" >>"$OUT/build.log" 2>&1 || {
			tail -40 "$OUT/build.log"; echo "build failed"; exit 1; }
		grep -iE 'warning|CUDA|CUPTI|NCCL header' "$OUT/build.log" | head -20
	fi
	log "build gpu_check (nvcc)"
	"$CUDA/bin/nvcc" -O2 -arch=native -o "$GC" tests/gpu/gpu_check.cu -I"$NCCL_HOME/include" \
		-L"$NCCL_LIB" -l:libnccl.so.2 -Xlinker -rpath="$NCCL_LIB" >>"$OUT/build.log" 2>&1 || {
		tail -20 "$OUT/build.log"; echo "gpu_check build failed"; exit 1; }
}

# launch NRANKS LOGPREFIX -- gpu_check args... (environment from the caller);
# with CRUX_GPU_PIN=1 each rank (with all its threads) on its own share of the CPUs
launch() {
	local n="$1" lp="$2"; shift 3
	local idf="$W/id.$RANDOM.$$" pids=() r rc=0 per
	per=$(($(nproc) / n)); [ "$per" -ge 1 ] || per=1
	rm -f "$idf"
	for r in $(seq 0 $((n - 1))); do
		local -a pin=()
		[ "${CRUX_GPU_PIN:-0}" = 1 ] && pin=(taskset -c "$((r * per))-$((r * per + per - 1))")
		# CRUX_GPU_WRAP0: a wrapper for rank 0 only, e.g. "cuda-gdb -q -batch -ex run -ex bt --args"
		# for a backtrace of a crash (stdout is lost with a crashing process)
		local -a w=()
		[ "$r" = 0 ] && [ -n "${CRUX_GPU_WRAP0:-}" ] && read -r -a w <<<"$CRUX_GPU_WRAP0"
		NCCL_HOSTID="crux-gpu-host-$r" timeout "${CRUX_GPU_TIMEOUT:-300}" "${pin[@]}" "${w[@]}" "$GC" "$@" --rank "$r" --nranks "$n" \
			--idfile "$idf" >"$lp.rank$r.out" 2>"$lp.rank$r.err" &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	rm -f "$idf" "$idf.tmp"
	return $rc
}

crux_env() {
	env NCCL_NET_PLUGIN=crux NCCL_NET=Crux CRUX_SHM_DIR="$W/shm" CRUX_JOB_ID="${CRUX_JOB_ID:-gpucheck}" \
		NCCL_SOCKET_IFNAME==lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@"
}
sock_env() {
	env NCCL_NET=Socket NCCL_SOCKET_IFNAME==lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@"
}

phase_plugin() {
	log "plugin: all-reduce sweep, NCCL socket vs Crux plugin"
	mkdir -p "$W/shm" "$OUT/plugin"
	local n rep arm
	for n in ${CRUX_GPU_RANKS:-2 4}; do
		for rep in $(seq 1 "$REPS"); do
			for arm in socket crux; do
				local lp="$OUT/plugin/$arm.n$n.r$rep"
				local f=sock_env t0=$SECONDS
				[ $arm = crux ] && f=crux_env
				if ! $f bash -c "$(declare -f launch); GC='$GC' W='$W'; launch $n '$lp' -- bw --min 4M --max 256M --step 4 --iters 10"; then
					echo "plugin: $arm n=$n rep=$rep FAILED"; tail -5 "$lp".rank*.err; fail=1
				fi
				grep -h "Using network" "$lp".rank0.* | head -1
				grep -h '^{' "$lp.rank0.out" | tail -1
				log "plugin: $arm n=$n rep=$rep took $((SECONDS - t0)) s"
			done
		done
	done
	python3 tests/gpu/summarize.py plugin "$OUT/plugin" "$OUT/gpu-plugin.json" || fail=1
}

phase_level() {
	# CRUX_GPU_SOAKS soaks per table kind; CRUX_GPU_TABLES: agent (cruxd serves the
	# table as a sealed memfd, overrides through it) and/or file (no agent: cruxctl
	# writes the v1 decision.tbl the plugin reads).
	local kind rep
	for kind in ${CRUX_GPU_TABLES:-agent}; do
		for rep in $(seq 1 "${CRUX_GPU_SOAKS:-1}"); do
			level_soak "$kind" "$OUT/level/$kind.r$rep"
		done
	done
	python3 tests/gpu/summarize.py level "$OUT/level" "$OUT/gpu-level.json" || fail=1
}

# level_soak agent|file DIR: one soak, levels 0 -> 3 -> 1, status snapshots in DIR
level_soak() {
	local kind="$1" d="$2" CTL="$B/agent/cruxctl/cruxctl" s agent="" t0=$SECONDS
	local lp="$d/soak"
	log "level: soak through the plugin while the table moves the job's level ($kind table)"
	mkdir -p "$d"
	rm -rf "$W/shm"; mkdir -p "$W/shm"
	if [ "$kind" = agent ]; then
		"$B/agent/cruxd/cruxd" --shm-dir "$W/shm" --no-probe --interval 500ms >"$lp.cruxd.log" 2>&1 &
		agent=$!
		sleep 1
	fi
	# --timeout only for the file table: with a running agent cruxctl refuses it
	# (the agent keeps the heartbeat), and the level never moves
	local -a tmo=(--timeout 600)
	[ "$kind" = agent ] && tmo=()
	CRUX_SHM_DIR="$W/shm" "$CTL" set --job gpucheck --level 0 "${tmo[@]}" >"$lp.ctl.log" 2>&1
	crux_env bash -c "$(declare -f launch); GC='$GC' W='$W'; launch 2 '$lp' -- soak --bytes 64M --seconds ${CRUX_GPU_SOAK_S:-15}" &
	local job=$! third=$(( ${CRUX_GPU_SOAK_S:-15} / 3 ))
	sleep $((third + 3))
	CRUX_SHM_DIR="$W/shm" "$CTL" set --job gpucheck --level 3 "${tmo[@]}" >>"$lp.ctl.log" 2>&1
	sleep "$third"
	CRUX_SHM_DIR="$W/shm" "$CTL" set --job gpucheck --level 1 "${tmo[@]}" >>"$lp.ctl.log" 2>&1
	for s in $(seq 1 $((third + 3))); do
		sleep 1
		CRUX_SHM_DIR="$W/shm" "$CTL" --json status >"$d/status.$s.json" 2>>"$lp.ctl.log"
	done
	wait $job || { echo "level: $kind soak FAILED"; tail -3 "$lp".rank*.err; fail=1; }
	[ -n "$agent" ] && { kill $agent 2>/dev/null; wait $agent 2>/dev/null; }
	cat "$lp.ctl.log"
	grep -h "attach\|Crux: decision" "$lp".rank0.* | head -3
	grep -h '^{' "$lp.rank0.out" | tail -1
	log "level: $kind soak took $((SECONDS - t0)) s"
}

phase_preload() {
	log "preload: matmul + all-reduce iterations, profile vs CUDA events"
	local CTL="$B/agent/cruxctl/cruxctl" rep arm
	local PRE="$B/preload/libcrux-preload.so"
	mkdir -p "$OUT/preload"
	rm -rf "$W/shm"; mkdir -p "$W/shm"
	local args="iter --iters ${CRUX_GPU_ITERS:-200} --matrix 4096 --bytes 64M"
	for rep in $(seq 1 "$REPS"); do
		for arm in plain cupti events; do
			local lp="$OUT/preload/$arm.r$rep"
			local pre=""
			[ $arm != plain ] && pre="$PRE"
			crux_env LD_PRELOAD="$pre" CRUX_TIMING="$arm" CRUX_PROFILE_WINDOW=1s CRUX_JOB_ID="pre-$arm-$rep" \
				bash -c "$(declare -f launch); GC='$GC' W='$W'; launch 2 '$lp' -- $args" &
			local job=$! s=0
			while kill -0 $job 2>/dev/null; do
				sleep 1; s=$((s + 1))
				CRUX_SHM_DIR="$W/shm" "$CTL" --json status >"$lp.status.$s.json" 2>/dev/null
			done
			wait $job || { echo "preload: $arm rep $rep FAILED"; tail -5 "$lp".rank*.err; fail=1; }
			grep -h "NCCL WARN" "$lp".rank0.* | head -3
			grep -h '^{' "$lp".rank*.out
		done
	done
	python3 tests/gpu/summarize.py preload "$OUT/preload" "$OUT/gpu-preload.json" || fail=1
}

phase_profiler() {
	log "profiler: PyTorch with the Crux NCCL profiler plugin vs torch.profiler"
	local CTL="$B/agent/cruxctl/cruxctl" rep arm r port lp
	mkdir -p "$OUT/profiler"
	rm -rf "$W/shm"; mkdir -p "$W/shm"
	for rep in $(seq 1 "$REPS"); do
		for arm in crux torch; do
			lp="$OUT/profiler/$arm.r$rep"
			port=$((29500 + RANDOM % 2000))
			local -a extra=() cx=()
			[ $arm = torch ] && extra=(--torch-profiler)
			[ $arm = crux ] && cx=(NCCL_PROFILER_PLUGIN=crux CRUX_SHM_DIR="$W/shm" CRUX_JOB_ID="prof-$rep"
				CRUX_PROFILE_WINDOW=1s CRUX_TIMING=cupti)
			local pids=()
			for r in 0 1; do
				env RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
					NCCL_HOSTID="crux-gpu-host-$r" NCCL_SOCKET_IFNAME==lo NCCL_DEBUG=INFO \
					NCCL_DEBUG_SUBSYS=INIT,ENV "${cx[@]}" PYTHONUNBUFFERED=1 \
					timeout 300 python3 tests/gpu/profiler_vs_torch.py --iters "${CRUX_GPU_ITERS:-200}" \
					"${extra[@]}" >"$lp.rank$r.out" 2>"$lp.rank$r.err" &
				pids+=($!)
			done
			local s=0
			while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
				sleep 1; s=$((s + 1))
				[ $arm = crux ] && CRUX_SHM_DIR="$W/shm" "$CTL" --json status >"$lp.status.$s.json" 2>/dev/null
			done
			for r in "${pids[@]}"; do wait "$r" || { echo "profiler: $arm rep $rep FAILED"; fail=1; }; done
			grep -h "PROFILER/Plugin\|PROFILER/Crux" "$lp".rank0.* | head -3
			grep -h '^{' "$lp".rank*.out
		done
	done
	python3 tests/gpu/summarize.py profiler "$OUT/profiler" "$OUT/gpu-profiler.json" || fail=1
}

# nccl-tests built here against MPICH unpacked from Debian .debs (no package
# manager on the GPU machine). Sets NT to the build.
nt_build() {
	local src="${NCCL_TESTS_SRC:-$ROOT/.gpu/nccl-tests}" debs="${MPICH_DEBS:-$ROOT/.gpu/debs}"
	local m="$W/mpich"
	NT="$W/nccl-tests"
	[ -d "$src" ] || { echo "nccl-tests source not found at $src"; return 1; }
	rm -rf "$m" "$NT"; mkdir -p "$m/home/include" "$m/home/lib"
	for f in "$debs"/*.deb; do dpkg -x "$f" "$m/root"; done
	local ml="$m/root/usr/lib/x86_64-linux-gnu"
	cp -r "$m/root/usr/include/x86_64-linux-gnu/mpich/." "$m/home/include/"
	ln -sf "$ml/libmpich.so.12" "$m/home/lib/libmpi.so"
	ln -sf "$m/root/usr/bin/mpiexec.hydra" "$m/root/usr/bin/mpirun"
	export PATH="$m/root/usr/bin:$PATH" LD_LIBRARY_PATH="$ml:$ml/slurm:$LD_LIBRARY_PATH"
	export HYDRA_LAUNCHER=fork
	cp -r "$src" "$NT"
	# Only all_reduce_perf: the checks run nothing else, and it is a fraction of the build time.
	make -C "$NT" -j"$(nproc)" MPI=1 MPI_HOME="$m/home" CUDA_HOME="$CUDA" NCCL_HOME="$NCCL_HOME" \
		BIN_FILES_LIST=all_reduce \
		NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$OUT/nccl-tests-build.log" 2>&1 || {
		tail -20 "$OUT/nccl-tests-build.log"; return 1; }
	mpirun --version 2>&1 | head -3
}

# all_reduce_perf launched directly (no script): both arms, to check the toolchain.
phase_ntdirect() {
	log "nccl-tests direct: all_reduce_perf, NCCL socket vs Crux plugin, MPICH"
	nt_build || { fail=1; return; }
	mkdir -p "$OUT/ntdirect" "$W/shm"
	local arm
	for arm in socket crux; do
		local -a e=(-genv NCCL_TESTS_DEVICE 0 -genv NCCL_SOCKET_IFNAME "=lo" -genv NCCL_DEBUG INFO -genv NCCL_DEBUG_SUBSYS "INIT,NET")
		if [ $arm = crux ]; then
			e+=(-genv NCCL_NET Crux -genv NCCL_NET_PLUGIN crux -genv CRUX_SHM_DIR "$W/shm"
				-genv LD_PRELOAD "$B/preload/libcrux-preload.so" -genv CRUX_JOB_ID ntdirect)
		else
			e+=(-genv NCCL_NET Socket)
		fi
		timeout 240 mpirun -np 2 "${e[@]}" sh -c 'NCCL_HOSTID="crux-host-$PMI_RANK" exec "$0" "$@"' \
			"$NT/build/all_reduce_perf" -b 1M -e 256M -f 2 -g 1 -n 20 >"$OUT/ntdirect/$arm.log" 2>&1 ||
			{ echo "ntdirect $arm FAILED"; fail=1; }
		grep -h "Using network" "$OUT/ntdirect/$arm.log" | head -1
		grep -E '^ +[0-9]+ ' "$OUT/ntdirect/$arm.log" | tail -3
		grep -E 'Avg bus bandwidth|wrong' "$OUT/ntdirect/$arm.log" | tail -2
	done
}

phase_nccltests() {
	log "nccl-tests: examples/nccl-tests/allreduce-compare.sh --one-gpu"
	nt_build || { fail=1; return; }
	local rep
	mkdir -p "$OUT/nccltests"
	for rep in $(seq 1 "$REPS"); do
		NCCL_SOCKET_IFNAME="=lo" CRUX_SHM_DIR="$W/shm-nt" \
			bash examples/nccl-tests/allreduce-compare.sh --nccl-tests "$NT" --crux "$PREFIX" \
			--one-gpu --start-agent --sizes "1M 256M" --iters 20 --out "$OUT/nccltests/r$rep" \
			>"$OUT/nccltests/r$rep.txt" 2>&1 || { echo "allreduce-compare.sh rep $rep FAILED"; fail=1; }
		cat "$OUT/nccltests/r$rep.txt"
	done
	python3 tests/gpu/summarize.py nccltests "$OUT/nccltests" "$OUT/gpu-nccl-tests.json" || fail=1
}

# CUDA MPS: one server runs every client's kernels concurrently, where
# without it the GPU time-slices between the ranks' contexts. Its pipe and
# log folders are private to this run; it is stopped on exit.
MPS_CTL=""
MPS_ON=0
mps_find() {
	MPS_CTL="$(command -v nvidia-cuda-mps-control 2>/dev/null || true)"
	[ -n "$MPS_CTL" ] || MPS_CTL="$(find /usr/local/nvidia /usr/bin /usr/local/cuda/bin -name nvidia-cuda-mps-control 2>/dev/null | head -1)"
	[ -n "$MPS_CTL" ]
}
mps_start() {
	[ "$MPS_ON" = 1 ] && return 0
	mps_find || { echo "mps: nvidia-cuda-mps-control not found"; return 1; }
	mkdir -p "$W/mps/pipe" "$W/mps/log"
	export CUDA_MPS_PIPE_DIRECTORY="$W/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$W/mps/log"
	"$MPS_CTL" -d || { echo "mps: the control daemon did not start"; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; return 1; }
	MPS_ON=1
	sleep 1
	echo "mps: started ($MPS_CTL)"
}
mps_stop() {
	[ "$MPS_ON" = 1 ] || return 0
	echo quit | "$MPS_CTL" >/dev/null 2>&1
	sleep 1
	cp "$W/mps/log/"*.log "$OUT/" 2>/dev/null
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	MPS_ON=0
}
trap mps_stop EXIT

# NCCL's choices that could split runs into modes: channels, the socket
# threads, the CPU affinity it gives its threads.
nccl_facts() {
	grep -hoE "[0-9]+ coll channels, [0-9]+ collnet channels, [0-9]+ nvls channels, [0-9]+ p2p channels|Using [0-9]+ threads and [0-9]+ sockets per thread|CPU affinity [^ ]*|Using network [A-Za-z]+|NET/IB : Using.*|Crux: .*transport.*" "$@" 2>/dev/null | sort | uniq -c | head -12
}

phase_fourrank() {
	log "fourrank: 4 ranks on one GPU, socket vs Crux, conditions ${CRUX_GPU_4R_CONDS:-base pin mps}"
	mkdir -p "$OUT/fourrank" "$W/shm"
	local cond rep arm
	for cond in ${CRUX_GPU_4R_CONDS:-base pin mps}; do
		if [ "$cond" = pin ] && ! command -v taskset >/dev/null; then
			echo "fourrank: condition pin skipped (no taskset)" | tee "$OUT/fourrank/pin.skipped"
			continue
		fi
		if [ "$cond" = mps ] && ! mps_start; then
			echo "fourrank: condition mps skipped (no MPS here)" | tee "$OUT/fourrank/mps.skipped"
			continue
		fi
		for rep in $(seq 1 "${CRUX_GPU_4R_REPS:-3}"); do
			for arm in socket crux; do
				local lp="$OUT/fourrank/$cond.$arm.r$rep" f=sock_env t0=$SECONDS
				[ $arm = crux ] && f=crux_env
				local pinned=0
				[ "$cond" = pin ] && pinned=1
				if ! $f NCCL_IGNORE_CPU_AFFINITY=$pinned CRUX_GPU_PIN=$pinned bash -c "$(declare -f launch); GC='$GC' W='$W'; launch 4 '$lp' -- bw --min 16M --max 64M --step 4 --iters 10"; then
					echo "fourrank: $cond $arm rep $rep FAILED"; tail -3 "$lp".rank*.err; fail=1
				fi
				echo "fourrank: $cond $arm r$rep $(grep -h '^{' "$lp.rank0.out" | tail -1) ($((SECONDS - t0)) s)"
			done
		done
		nccl_facts "$OUT/fourrank/$cond".*.rank0.err | sed "s/^/  $cond: /"
		[ "$cond" = mps ] && mps_stop
	done
	python3 tests/gpu/summarize.py fourrank "$OUT/fourrank" "$OUT/gpu-fourrank.json" || fail=1
}


# Both arms on the software RDMA device over loopback, with the same device,
# GID and GPUDirect settings: NCCL's net_ib loads it as its libibverbs
# (NCCL_IBVERBS_LIB), the Crux plugin as its own (CRUX_IBVERBS_LIB).
ib_common() {
	env NCCL_SOCKET_IFNAME==lo CRUX_SOCKET_IFNAME==lo CRUX_SOFTRDMA_IFNAMES=lo NCCL_IB_HCA==srxe_lo \
		NCCL_IB_GID_INDEX=2 NCCL_NET_GDR_LEVEL=LOC NCCL_IB_PCI_RELAXED_ORDERING=0 \
		NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@"
}
phase_ibcompare() {
	log "ibcompare: NCCL net_ib vs Crux verbs, both on the software RDMA device"
	[ -f "$SOFTRDMA" ] || { echo "ibcompare: $SOFTRDMA missing (build tests/softrdma and bring it, see tests/gpu/README.md)"; fail=1; return; }
	mkdir -p "$OUT/ibcompare" "$W/shm"
	local cond=base rep arm
	[ "${CRUX_GPU_IB_MPS:-1}" = 1 ] && mps_start && cond=mps
	# NCCL up to 2.28 dlopens libibverbs.so[.1] by name (NCCL_IBVERBS_LIB came later):
	# the double under those names, first on the library path of the net_ib arm only
	mkdir -p "$W/ibv"
	ln -sf "$SOFTRDMA" "$W/ibv/libibverbs.so"
	ln -sf "$SOFTRDMA" "$W/ibv/libibverbs.so.1"
	# and as libmlx5: NCCL asks the provider library whether a device is mlx5
	# (mlx5dv_is_supported); the machine's real libmlx5 would read the double's
	# device as its own and crash; the double has no such call, so NCCL takes it
	# for a generic verbs device
	ln -sf "$SOFTRDMA" "$W/ibv/libmlx5.so"
	ln -sf "$SOFTRDMA" "$W/ibv/libmlx5.so.1"
	echo "$cond" >"$OUT/ibcompare/condition"
	for rep in $(seq 1 "$REPS"); do
		for arm in ib crux; do
			local lp="$OUT/ibcompare/$arm.r$rep" t0=$SECONDS
			# NCCL_GIN_TYPE=2 (proxy): NCCL 2.28's automatic GIN choice keeps its
			# "undecided" marker, (ncclGin_t *)-1, when GDAKI initialises but finds
			# no device (any non-mlx5 NIC, the double too), then calls through it
			# (SIGSEGV in ncclNetPluginInit, plugin/net.cc:216; fixed in 2.29)
			local -a e=(NCCL_NET=IB NCCL_IBVERBS_LIB="$SOFTRDMA" LD_LIBRARY_PATH="$W/ibv:$LD_LIBRARY_PATH" NCCL_GIN_TYPE=2)
			[ -f "$W/crashtrace.so" ] && e+=(LD_PRELOAD="$W/crashtrace.so")
			[ $arm = crux ] && e=(NCCL_NET_PLUGIN=crux NCCL_NET=Crux CRUX_TRANSPORT=verbs CRUX_IBVERBS_LIB="$SOFTRDMA"
				CRUX_MLX5_LIB="$SOFTRDMA" CRUX_SHM_DIR="$W/shm" CRUX_JOB_ID=ibcompare)
			if ! ib_common "${e[@]}" bash -c "$(declare -f launch); GC='$GC' W='$W'; launch 2 '$lp' -- bw --min 1M --max 256M --step 4 --iters 10"; then
				echo "ibcompare: $arm rep $rep FAILED"; tail -n 5 "$lp".rank*.err; grep -h "WARN\|No device" "$lp".rank0.out | head -5; fail=1
			fi
			grep -h '^{' "$lp.rank0.out" | tail -1
			log "ibcompare: $arm r$rep took $((SECONDS - t0)) s"
		done
	done
	nccl_facts "$OUT/ibcompare/"*.rank0.err
	grep -h "WARN" "$OUT/ibcompare/"*.rank0.err | sort | uniq -c | head -5
	mps_stop
	python3 tests/gpu/summarize.py ibcompare "$OUT/ibcompare" "$OUT/gpu-ib-compare.json" || fail=1
}

# ibdiag: where NCCL's net_ib dies on the software RDMA device. Each rank
# runs with crashtrace (tests/gpu/crashtrace.c: the faulting thread's frames
# on stderr) and NCCL's log in a file of its own (stdout is lost with a
# crashing process); variants in CRUX_GPU_IBDIAG ("plain nogin"; "proxy":
# NCCL_GIN_TYPE=2, the way around NCCL 2.28's GIN crash, see ibcompare); a debugger
# backtrace of rank 0 where gdb or cuda-gdb is installed; objdump of NCCL's
# code around a faulting offset.
phase_ibdiag() {
	log "ibdiag: NCCL net_ib on the software RDMA device, with crash traces"
	[ -f "$SOFTRDMA" ] || { echo "ibdiag: $SOFTRDMA missing"; fail=1; return; }
	local d="$OUT/ibdiag" v ct="$W/crashtrace.so" dbg=""
	mkdir -p "$d" "$W/ibv"
	cc -O1 -shared -fPIC -o "$ct" tests/gpu/crashtrace.c -ldl || { echo "ibdiag: crashtrace build failed"; fail=1; return; }
	ln -sf "$SOFTRDMA" "$W/ibv/libibverbs.so"; ln -sf "$SOFTRDMA" "$W/ibv/libibverbs.so.1"
	ln -sf "$SOFTRDMA" "$W/ibv/libmlx5.so"; ln -sf "$SOFTRDMA" "$W/ibv/libmlx5.so.1"
	{
		ldd "$NCCL_LIB/libnccl.so.2"
		command -v gdb cuda-gdb "$CUDA/bin/cuda-gdb" objdump nm || true
		nm -D --defined-only "$SOFTRDMA" | grep -c ' T ' || true
	} >"$d/facts.txt" 2>&1
	cat "$d/facts.txt"
	for v in ${CRUX_GPU_IBDIAG:-plain nogin}; do
		local lp="$d/$v" t0=$SECONDS
		local -a e=(NCCL_NET=IB LD_LIBRARY_PATH="$W/ibv:$LD_LIBRARY_PATH" LD_PRELOAD="$ct"
			NCCL_DEBUG_SUBSYS=ALL NCCL_DEBUG_FILE="$lp.nccl.%p.log")
		[ "$v" = nogin ] && e+=(NCCL_GIN_ENABLE=0 NCCL_IB_DATA_DIRECT=0 NCCL_IB_ECE_ENABLE=0)
		[ "$v" = proxy ] && e+=(NCCL_GIN_TYPE=2)
		if ib_common "${e[@]}" bash -c "$(declare -f launch); GC='$GC' W='$W'; launch 2 '$lp' -- bw --min 1M --max 4M --step 4 --iters 5"; then
			echo "ibdiag: $v ran"
		else
			echo "ibdiag: $v FAILED"
		fi
		log "ibdiag: $v took $((SECONDS - t0)) s"
		grep -h "crashtrace" "$lp".rank*.err | head -40
		tail -n 4 "$lp".rank*.err
		local f
		for f in "$lp".nccl.*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 25 "$f"; }; done
		grep -h '^{' "$lp.rank0.out" | tail -1
		# NCCL's code at each faulting offset (the library has no symbols)
		grep -ohE 'libnccl\.so[.0-9]*\+0x[0-9a-f]+' "$lp".rank*.err | sort -u | head -4 | while read -r at; do
			local off=$((${at##*+}))
			echo "== objdump $at"
			objdump -d --no-show-raw-insn --start-address=$((off - 96)) --stop-address=$((off + 32)) \
				"$NCCL_LIB/libnccl.so.2" 2>&1 | tail -n 40
		done
	done
	for dbg in gdb "$CUDA/bin/cuda-gdb" cuda-gdb; do command -v "$dbg" >/dev/null && break; dbg=""; done
	if [ -n "$dbg" ] && grep -q crashtrace "$d/plain".rank*.err 2>/dev/null; then
		log "ibdiag: rank 0 under $dbg"
		printf '%s\n' 'set pagination off' run bt 'info registers' 'x/12i $pc-24' 'info sharedlibrary' >"$W/gdb.cmds"
		ib_common NCCL_NET=IB LD_LIBRARY_PATH="$W/ibv:$LD_LIBRARY_PATH" NCCL_DEBUG_SUBSYS=ALL \
			CRUX_GPU_TIMEOUT=120 CRUX_GPU_WRAP0="$dbg -q -batch -x $W/gdb.cmds --args" \
			bash -c "$(declare -f launch); GC='$GC' W='$W'; launch 2 '$d/gdb' -- bw --min 1M --max 4M --step 4 --iters 5"
		grep -vE '^\[(New|Thread)|^NCCL|^$' "$d/gdb.rank0.out" | tail -n 60
	fi
}

# The fabric needs iproute2 (ip, tc) and sysctl. A GPU machine without them
# (no package manager there) gets Debian's iproute2 and its libraries from
# .gpu/iproute2/*.deb (tests/gpu/README.md), unpacked under $W and run through
# the dynamic loader with their own library path, so nothing the jobs run
# (python, NCCL) sees those libraries.
net_tools() {
	local t="$W/nettools" f
	if command -v ip >/dev/null && command -v tc >/dev/null && command -v sysctl >/dev/null; then
		return 0
	fi
	mkdir -p "$t/root" "$t/bin"
	if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
		ls "$ROOT"/.gpu/iproute2/*.deb >/dev/null 2>&1 ||
			{ echo "jobs: no ip/tc here and no .gpu/iproute2/*.deb to unpack"; return 1; }
		for f in "$ROOT"/.gpu/iproute2/*.deb; do dpkg-deb -x "$f" "$t/root" 2>/dev/null || dpkg -x "$f" "$t/root"; done
		local libs="$t/root/lib/x86_64-linux-gnu:$t/root/usr/lib/x86_64-linux-gnu"
		local d real
		for f in ip tc; do
			real=""
			# the package's own file, not its absolute symlinks (sbin/ip -> /bin/ip)
			for d in bin sbin usr/bin usr/sbin; do
				[ -f "$t/root/$d/$f" ] && [ ! -L "$t/root/$d/$f" ] && { real="$t/root/$d/$f"; break; }
			done
			[ -n "$real" ] || { echo "jobs: no $f in .gpu/iproute2"; return 1; }
			printf '#!/bin/sh\nexec /lib64/ld-linux-x86-64.so.2 --library-path "%s" "%s" "$@"\n' \
				"$libs" "$real" >"$t/bin/$f"
			chmod +x "$t/bin/$f"
		done
	fi
	if ! command -v sysctl >/dev/null; then
		# fabric.sh's use only: sysctl -qw KEY=VALUE (per namespace: /proc/sys/net follows it)
		cat >"$t/bin/sysctl" <<'EOS'
#!/bin/sh
for a in "$@"; do
	case "$a" in -*) continue ;; esac
	k="${a%%=*}"; v="${a#*=}"
	printf '%s\n' "$v" >"/proc/sys/$(echo "$k" | tr . /)" || exit 1
done
EOS
		chmod +x "$t/bin/sysctl"
	fi
	export PATH="$PATH:$t/bin"
	ip -V && tc -V
}

phase_jobs() {
	log "jobs: PyTorch DDP jobs on the emulated fabric, none vs Crux"
	net_tools || { fail=1; return; }
	local mps=0
	if [ "${CRUX_GPU_JOBS_MPS:-1}" = 1 ] && mps_start; then mps=1; fi
	CRUX_GPU_MPS=$mps bash tests/gpu/jobs.sh "$B" "$OUT/${CRUX_GPU_JOBS_NAME:-jobs}" || fail=1
	mps_stop
	python3 tests/gpu/summarize.py jobs "$OUT/${CRUX_GPU_JOBS_NAME:-jobs}" "$OUT/gpu-${CRUX_GPU_JOBS_NAME:-jobs}.json" || fail=1
}

for p in $PHASES; do
	"phase_$p"
done
log "done (fail=$fail)"
exit $fail
