#!/bin/sh
# Per-message software cost of the verbs transport on the software RDMA device
# (tests/softrdma: a test double sending RoCEv2-shaped UDP, no RDMA hardware) against the
# socket transport, both measured in the same run with the same driver
# (cruxn-bench pp-server / pp-client, registered buffers):
#   round trip: isend+test / irecv+test ping-pong, small messages, ROUNDS
#     interleaved runs per transport: median, min, max; ratio verbs/socket
#   instructions: callgrind on the pp-client, N1 and N2 round trips, the
#     difference per round trip (one message sent, one received), split into
#     the threads the caller's process runs anyway and the device double's
#     progress thread (what a NIC does in hardware); median of CG_REPS.
# This is the plugin's software cost over a test double, not RDMA bandwidth
# or latency: those need hardware (tools/crux-hw-check).
# usage: verbs.sh CRUXN_BENCH PLUGIN_DIR SOFTRDMA_LIB OUT_JSON
set -u
BENCH=$1 PLUGDIR=$2 SRLIB=$3 OUT=$4
ROUNDS=${CRUX_BENCH_ROUNDS:-5}
ITERS=${CRUX_BENCH_ITERS:-1000}
CG_REPS=${CRUX_BENCH_CG_REPS:-5}
CG_N1=200 CG_N2=2000
SIZES="8 64 512 4096"
P=cxvb$$
W=$(mktemp -d /tmp/cxvb-bench-XXXXXX)
ROOT=0; [ "$(id -u)" = 0 ] && ROOT=1
cleanup() {
	ip netns del "$P" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
chmod 755 "$W"; mkdir -m 755 "$W/shm"
command -v valgrind >/dev/null 2>&1 && command -v callgrind_annotate >/dev/null 2>&1 ||
	{ echo "valgrind (callgrind) is not installed: apt-get install valgrind"; exit 1; }
[ -f "$SRLIB" ] || { echo "no software RDMA device at $SRLIB (build tests/softrdma)"; exit 1; }
export NCCL_NET_PLUGIN=crux LD_LIBRARY_PATH="$PLUGDIR" CRUX_SHM_DIR="$W/shm" CRUX_JOB_ID="$P" \
	CRUX_LOG_LEVEL=error CRUX_SOCKET_IFNAME="=lo" CRUX_SOFTRDMA_IFNAMES=lo \
	CRUX_IBVERBS_LIB="$SRLIB" CRUX_MLX5_LIB="$SRLIB"
if [ "$ROOT" = 1 ]; then
	# a private loopback, so nobody else's traffic or ports interfere
	ip netns add "$P"; ip -n "$P" link set lo up
fi
inns() { if [ "$ROOT" = 1 ]; then ip netns exec "$P" "$@"; else "$@"; fi; }

# pp TRANSPORT ITERS WRAPPER... -> pp-client's output ("rtt SIZE US", "polls_per_rtt SIZE N")
pp() {
	t=$1 n=$2; shift 2
	d=$(mktemp -d "$W/p-XXXXXX")
	export CRUX_TRANSPORT=$t
	inns "$BENCH" pp-server "$d" &
	sp=$!
	# shellcheck disable=SC2086
	inns "$@" "$BENCH" pp-client "$d" "$n" $SIZES_NOW
	rc=$?
	wait $sp || rc=1
	[ $rc = 0 ] || { echo "FAIL: $t ping-pong failed" >&2; exit 1; }
}

echo "== round trip (us), $ROUNDS interleaved runs of $ITERS per size =="
SIZES_NOW=$SIZES
: > "$W/rtt.txt"
for _ in $(seq "$ROUNDS"); do
	for t in socket verbs; do
		pp $t "$ITERS" env > "$W/pp.txt"
		awk -v t=$t '$1 == "rtt" { print t, $2, $3 }' "$W/pp.txt" >> "$W/rtt.txt"
	done
done
# stats FILE TRANSPORT SIZE -> "median min max"
stats() {
	awk -v t="$2" -v s="$3" '$1 == t && $2 == s { print $3 }' "$1" | sort -g |
		awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.2f %.2f %.2f\n", m, v[1], v[NR] }'
}
RTT=""
for s in $SIZES; do
	# Word splitting wanted: stats prints "median min max".
	# shellcheck disable=SC2046
	set -- $(stats "$W/rtt.txt" socket "$s") $(stats "$W/rtt.txt" verbs "$s")
	q=$(awk -v a="$4" -v b="$1" 'BEGIN { printf "%.1f", a / b }')
	printf "%6d B: socket %s us (%s..%s), verbs %s us (%s..%s), verbs/socket %s\n" \
		"$s" "$1" "$2" "$3" "$4" "$5" "$6" "$q"
	RTT="$RTT${RTT:+, }{\"size\": $s, \"socket_us\": {\"median\": $1, \"min\": $2, \"max\": $3}, \"verbs_us\": {\"median\": $4, \"min\": $5, \"max\": $6}, \"ratio\": $q}"
done

# split FILE_BASE -> "caller_total caller_plugin caller_device caller_libc device_threads polls"
# per thread file: a thread whose instructions are mostly the device library's is
# the double's progress thread; every other thread is the process's own
split() {
	for f in "$1"-*; do
		callgrind_annotate --auto=no --threshold=100 "$f" 2>/dev/null | awk '
			/^ *[0-9,]+ \(/ && !/PROGRAM TOTALS/ {
				n = $1; gsub(",", "", n); o = $NF
				if (o ~ /libnccl-net-crux/) p += n
				else if (o ~ /libsoftrdma/) d += n
				else if (o ~ /libc\.so/) c += n
				tot += n
			}
			END { if (tot > 0 && d > tot / 2) printf "0 0 0 0 %d\n", tot
			      else printf "%d %d %d %d 0\n", tot, p, d, c }'
	done | awk '{ for (i = 1; i <= 5; i++) s[i] += $i } END { print s[1], s[2], s[3], s[4], s[5] }'
}
# cg TRANSPORT -> per round trip "caller plugin device_calls libc device_threads"
cg() {
	SIZES_NOW=8
	for n in $CG_N1 $CG_N2; do
		pp "$1" $n env CRUXN_BENCH_IDLE_US=50 valgrind --tool=callgrind -q --separate-threads=yes \
			--callgrind-out-file="$W/cg-$1-$n" > "$W/cg-$1-$n.txt" || exit 1
		split "$W/cg-$1-$n" > "$W/cg-$1-$n.sum"
	done
	# pp-client runs ITERS/10 warm-up round trips before the ITERS measured
	paste "$W/cg-$1-$CG_N1.sum" "$W/cg-$1-$CG_N2.sum" | awk -v k=$(((CG_N2 - CG_N1) * 11 / 10)) '
		{ printf "%.0f %.0f %.0f %.0f %.0f\n", ($6 - $1) / k, ($7 - $2) / k, ($8 - $3) / k, ($9 - $4) / k, ($10 - $5) / k }'
	awk '$1 == "polls_per_rtt" { print $3 }' "$W/cg-$1-$CG_N2.txt" > "$W/cg-$1.polls"
}
median_col() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

echo "== instructions per round trip (callgrind, 8 B, $CG_REPS runs of $CG_N2 - $CG_N1) =="
: > "$W/cg-socket.all"; : > "$W/cg-verbs.all"
for _ in $(seq "$CG_REPS"); do
	for t in socket verbs; do
		cg $t >> "$W/cg-$t.all" || exit 1
		cat "$W/cg-$t.polls" >> "$W/cg-$t.pollsall"
	done
done
for t in socket verbs; do
	for i in 1 2 3 4 5; do
		awk -v i=$i '{ print $i }' "$W/cg-$t.all" | median_col
	done | tr '\n' ' ' > "$W/cg-$t.med"
	echo >> "$W/cg-$t.med"
	echo "$t: caller's threads, plugin, device calls, libc, device threads: $(cat "$W/cg-$t.med") (runs: $(tr '\n' ';' < "$W/cg-$t.all"))"
done
read -r SC SP SD SL SX < "$W/cg-socket.med"
read -r VC VP VD VL VX < "$W/cg-verbs.med"
IRATIO=$(awk -v a="$VC" -v b="$SC" 'BEGIN { printf "%.2f", a / b }')
PRATIO=$(awk -v a="$VP" -v b="$SP" 'BEGIN { printf "%.2f", a / b }')
RANGE() { awk -v i=$2 '{ print $i }' "$1" | sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { printf "[%d, %d]", a, b }'; }
echo "verbs/socket: caller's threads $IRATIO, plugin code $PRATIO; the double's progress thread adds $VX per round trip"
POLLS_S=$(median_col < "$W/cg-socket.pollsall"); POLLS_V=$(median_col < "$W/cg-verbs.pollsall")

cat > "$OUT.tmp" <<JSON
{
  "benchmark": "plugin-verbs",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "machine": "$(uname -srm), $(nproc) cores, shared with other jobs (load average at the end $(cut -d' ' -f1-3 /proc/loadavg))",
  "what": "software cost per message of the plugin's verbs transport over the software RDMA device (tests/softrdma, a test double that carries RC as RoCEv2-shaped UDP packets on loopback through a progress thread), against the socket transport in the same run; not RDMA bandwidth or latency, which need hardware (tools/crux-hw-check)",
  "round_trip": {
    "what": "ping-pong of one message each way (isend+test, irecv+test, buffers registered with regMr), private loopback, callers spin on test",
    "runs": $ROUNDS, "iterations": $ITERS,
    "sizes": [$RTT]
  },
  "instructions": {
    "what": "callgrind, 8 B ping-pong, client process, ($CG_N2 - $CG_N1) x 1.1 round trips (difference of two runs, set-up cancels); per round trip = one message sent + one received; callers sleep 50 us after an empty poll so waiting is not counted",
    "runs": $CG_REPS, "statistic": "median",
    "socket": {"caller_threads": $SC, "plugin": $SP, "device_calls": $SD, "libc": $SL, "device_threads": $SX,
               "caller_threads_range": $(RANGE "$W/cg-socket.all" 1), "plugin_range": $(RANGE "$W/cg-socket.all" 2), "empty_polls_per_rtt": $POLLS_S},
    "verbs": {"caller_threads": $VC, "plugin": $VP, "device_calls": $VD, "libc": $VL, "device_threads": $VX,
              "caller_threads_range": $(RANGE "$W/cg-verbs.all" 1), "plugin_range": $(RANGE "$W/cg-verbs.all" 2), "empty_polls_per_rtt": $POLLS_V},
    "ratio_caller_threads": $IRATIO,
    "ratio_plugin_code": $PRATIO,
    "fields": "*_range: [min, max] over the runs; caller_threads: every thread of the process except the device's (the caller's thread and the plugin's helpers; user space only, the kernel's TCP work is not counted); plugin: instructions in libnccl-net-crux.so; device_calls: the double's ibv_post_send/ibv_poll_cq on the caller's thread (a real provider does this in ~100s of instructions); libc: libc on those threads (system call wrappers, locks, memcpy); device_threads: the double's progress thread, the work a NIC does in hardware"
  }
}
JSON
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
