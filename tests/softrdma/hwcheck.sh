#!/bin/sh
# crux-hw-check against the software RDMA device: devices, GID choice,
# source-port and DMA-BUF probes both ways, a host-wide traffic-class
# override, the nccl-tests comparison (with a stand-in all_reduce_perf), and
# clear errors without a library or a device.
# usage: hwcheck.sh CRUX_HW_CHECK LIBSOFTRDMA
set -u
HW=$1 LIB=$2
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir cxsr-hw
W=$CXT_W
# out.log: the last command's output, shown whole
fail() { CXT_LOG_LINES=1000 cxt_fail "$@"; }
export CRUX_SOFTRDMA_IFNAMES=lo
unset NCCL_IB_GID_INDEX CRUX_SOFTRDMA_DMABUF CRUX_SOFTRDMA_UDP_SPORT CRUX_PROBE_PORTS
# routes probed as RoCE travels (49152-65535): realisable by the flow label alone
export CRUX_PROBE_PROTO=roce
mkdir -p "$W/sys/module"

"$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" > "$W/out.log" 2>&1; rc=$?
[ $rc = 0 ] || fail "exit $rc on a healthy device"
grep -q '^device srxe_lo: ' "$W/out.log" || fail "device not listed"
grep -q 'link layer Ethernet (RoCE), active MTU 4096, 100000 Mb/s' "$W/out.log" || fail "port line"
grep -q 'chosen GID index 2 (RoCE v2, 127.0.0.1)' "$W/out.log" || fail "GID choice"
grep -q 'mlx5dv source-port control: refused' "$W/out.log" || fail "sport probe (off)"
grep -q 'DMA-BUF registration: not supported' "$W/out.log" || fail "DMA-BUF probe (off)"
grep -q 'nvidia-peermem: not loaded' "$W/out.log" || fail "peermem (absent)"
# per level: no DCB on lo (said, not a finding), each level's DSCP seen on the wire
grep -q 'DCB on lo: not available' "$W/out.log" || fail "DCB (absent on lo)"
for l in "0: DSCP 0" "1: DSCP 8" "2: DSCP 16" "3: DSCP 24"; do
	grep -q "level $l on the wire" "$W/out.log" || fail "level $l on the wire"
done
# a busy interface: a bulk TCP flow on lo fills an unfiltered capture's buffer
# in microseconds, and the probe's own packets were dropped (CI, a parallel test)
if command -v python3 >/dev/null 2>&1; then
	python3 - "$W/bulk.port" <<'X' &
import socket, sys, threading, time
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1)
open(sys.argv[1], "w").write(str(ls.getsockname()[1]))
def sink():
    c, _ = ls.accept()
    while c.recv(1 << 20): pass
threading.Thread(target=sink, daemon=True).start()
s = socket.create_connection(ls.getsockname()); b = b"x" * (1 << 20); t = time.time()
while time.time() - t < 30: s.sendall(b)
X
	bulk=$!
	i=0; while [ ! -s "$W/bulk.port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	sleep 0.3
	"$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" > "$W/out.log" 2>&1; rc=$?
	kill $bulk 2>/dev/null; wait $bulk 2>/dev/null
	[ $rc = 0 ] || fail "exit $rc on a healthy device beside a bulk flow on lo"
	for l in "0: DSCP 0" "1: DSCP 8" "2: DSCP 16" "3: DSCP 24"; do
		grep -q "level $l on the wire" "$W/out.log" || fail "level $l beside a bulk flow on lo"
	done
fi
# a host-wide traffic-class override (mlx5's tc/<port>/traffic_class) remarks every
# packet: the levels' DSCPs are not what leaves, a finding (exit 1)
CRUX_SOFTRDMA_GLOBAL_TCLASS=106 "$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" > "$W/out.log" 2>&1; rc=$?
[ $rc = 1 ] || fail "exit $rc with every packet remarked (want 1)"
grep -q 'WARNING: level 0: asked for DSCP 0, .* carried another DSCP' "$W/out.log" || fail "remarked DSCP"

# routes from ports below 49152 without the live source-port change: a finding (exit 1)
CRUX_PROBE_PROTO=tcp "$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" > "$W/out.log" 2>&1; rc=$?
[ $rc = 1 ] || fail "exit $rc with routes below 49152 and no live source port (want 1)"
grep -q 'WARNING: the agent probes routes from source ports 40000' "$W/out.log" || fail "low-port routes"

CRUX_SOFTRDMA_UDP_SPORT=1 CRUX_SOFTRDMA_DMABUF=1 NCCL_IB_GID_INDEX=1 \
	"$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" > "$W/out.log" 2>&1
grep -q 'mlx5dv source-port control: works' "$W/out.log" || fail "sport probe (on)"
grep -q 'DMA-BUF registration: supported' "$W/out.log" || fail "DMA-BUF probe (on)"
grep -q 'chosen GID index 1 (RoCE v1, 127.0.0.1) from NCCL_IB_GID_INDEX' "$W/out.log" || fail "NCCL_IB_GID_INDEX"

mkdir -p "$W/sys/class/infiniband/srxe_lo/tc/1" "$W/sys/module/nvidia_peermem"
echo "Global tclass=106" > "$W/sys/class/infiniband/srxe_lo/tc/1/traffic_class"
"$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" > "$W/out.log" 2>&1; rc=$?
[ $rc = 1 ] || fail "exit $rc with a traffic-class override (want 1)"
grep -q 'WARNING: .*traffic class 106' "$W/out.log" || fail "override not reported"
grep -q 'nvidia-peermem: loaded' "$W/out.log" || fail "peermem (present)"
echo "Global tclass=-1" > "$W/sys/class/infiniband/srxe_lo/tc/1/traffic_class"

# a stand-in all_reduce_perf: 20 GB/s over NCCL IB, 19 over the plugin
mkdir "$W/nt"
cat > "$W/nt/all_reduce_perf" <<'X'
#!/bin/sh
if [ "$NCCL_NET_PLUGIN" = none ] && [ "$NCCL_NET" = IB ]; then bw=20.00
elif [ "$NCCL_NET_PLUGIN" = crux ] && [ "$NCCL_NET" = Crux ]; then bw=19.00
else echo "unexpected environment"; exit 1; fi
echo "# Avg bus bandwidth    : $bw"
X
chmod +x "$W/nt/all_reduce_perf"
# one rank on this host moves nothing over the network: refused, a finding
"$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" --nccl-tests "$W/nt" > "$W/out.log" 2>&1; rc=$?
[ $rc = 1 ] || fail "exit $rc with nccl-tests and no launcher (want 1)"
grep -q 'WARNING: --nccl-tests without --launcher' "$W/out.log" || fail "one-rank comparison ran"
grep -q 'Crux / NCCL IB' "$W/out.log" && fail "a one-rank ratio was printed"
"$HW" --lib "$LIB" --mlx5 "$LIB" --sysfs "$W/sys" --nccl-tests "$W/nt" --launcher env \
	> "$W/out.log" 2>&1; rc=$?
[ $rc = 0 ] || fail "exit $rc with nccl-tests"
grep -q 'Crux / NCCL IB: 0.950 (19.000 vs 20.000 GB/s)' "$W/out.log" || fail "nccl-tests ratio"

CRUX_SOFTRDMA_IFNAMES=no-such-if "$HW" --lib "$LIB" > "$W/out.log" 2>&1; rc=$?
[ $rc = 2 ] && grep -q 'error: no RDMA devices' "$W/out.log" || fail "no-device error"
"$HW" --lib "$W/none.so" > "$W/out.log" 2>&1; rc=$?
[ $rc = 2 ] && grep -q 'error: cannot load' "$W/out.log" || fail "missing-library error"
"$HW" --bogus > "$W/out.log" 2>&1; rc=$?
[ $rc = 2 ] || fail "bad option accepted"
echo PASS
