# shellcheck shell=sh
# The integration tests' shell harness (sourced; also by the testbed's fabric.sh):
# skip and fail with a reason, one cleanup trap that runs registered actions
# newest first (or only on failure), a work directory
# that an unprivileged rank can enter (root's home is mode 700), network
# namespaces that are always removed, veth pairs and the leaf-spine fabric.
# Every name starts with cxt_ (CXT_ for variables) so a sourcing script keeps its own.
#
#   . "$(dirname "$0")/../lib/harness.sh"
#   cxt_need_root "network namespaces"
#   cxt_workdir cxag-kill            # CXT_W, removed at exit unless KEEP=1
#   cxt_ns "$A"; cxt_ns "$B"
#   cxt_veth "$A" x 198.18.1.1 "$B" y 198.18.1.2
#   some_daemon & cxt_kill_at_exit $!
#   ... || cxt_fail "what went wrong"

CXT_ACTIONS=""
CXT_W=""

# cxt_skip REASON: exit 77, the status meson reads as "skipped".
cxt_skip() {
	echo "SKIP: $*"
	exit 77
}

cxt_need_root() {
	[ "$(id -u)" = 0 ] || cxt_skip "needs root for ${1:-network namespaces}"
}

# cxt_need_cmd CMD [DEBIAN_PACKAGE]
cxt_need_cmd() {
	command -v "$1" >/dev/null 2>&1 ||
		cxt_skip "$1 is not installed (Debian package ${2:-$1}; 'make deps' installs it)"
}

# cxt_fail MSG: the reason, then the tail of every log in the work directory.
cxt_fail() {
	echo "FAIL: $*"
	if [ -n "$CXT_W" ]; then
		for cxt_log in "$CXT_W"/*.log; do
			[ -f "$cxt_log" ] || continue
			echo "--- $cxt_log"
			tail -n "${CXT_LOG_LINES:-30}" "$cxt_log"
		done
	fi
	exit 1
}

# cxt_at_exit CMD: run CMD (one shell word list, eval'd) when the script exits;
# actions run newest first, and one that fails does not stop the others.
cxt_at_exit() {
	CXT_ACTIONS="$1
$CXT_ACTIONS"
}

# cxt_at_failure CMD: like cxt_at_exit, but only when the script exits non-zero
# (a tool that builds something lasting tears down what it half built).
cxt_at_failure() {
	cxt_at_exit "[ \"\$cxt_rc\" -eq 0 ] || { $1; }"
}

# cxt_kill_at_exit PID...: SIGKILL and reap these processes at exit.
cxt_kill_at_exit() {
	for cxt_pid in "$@"; do
		cxt_at_exit "kill -KILL $cxt_pid 2>/dev/null; wait $cxt_pid 2>/dev/null"
	done
}

cxt_cleanup() {
	cxt_rc=$?
	trap - EXIT INT TERM
	cxt_list=$CXT_ACTIONS
	CXT_ACTIONS=""
	# In this shell, not a pipeline's subshell: an action's 'wait' must reap
	# this shell's children. The list comes on fd 9 so actions keep stdin;
	# bash's 'Killed' notices for them go to /dev/null with their own output.
	while IFS= read -r cxt_a <&9; do
		[ -n "$cxt_a" ] || continue
		eval "$cxt_a" >/dev/null 2>&1 || true
	done 9<<CXT_EOF 2>/dev/null
$cxt_list
CXT_EOF
	exit "$cxt_rc"
}
trap cxt_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# cxt_workdir TAG: CXT_W=/tmp/TAG-XXXXXX, mode 755, removed at exit unless KEEP is set.
cxt_workdir() {
	CXT_W=$(mktemp -d "/tmp/$1-XXXXXX") || cxt_fail "mktemp in /tmp failed"
	chmod 755 "$CXT_W"
	cxt_at_exit '[ -n "${KEEP:-}" ] || rm -rf "$CXT_W"'
}

# cxt_ns NAME: a network namespace with lo up, deleted at exit.
cxt_ns() {
	cxt_ns_lasting "$1"
	cxt_at_exit "ip netns del $1"
}

# cxt_ns_lasting NAME: a network namespace with lo up that outlives the script
# (a tool's fabric, which its own teardown removes).
cxt_ns_lasting() {
	ip netns add "$1" || cxt_fail "ip netns add $1"
	ip -n "$1" link set lo up
}

# cxt_router NS: forward, spread flows over equal-cost routes by the L4 source
# port (hash policy 3, fields 0x17: addresses, protocol, source port), answer
# TTL probes without rate limit, and accept asymmetric paths.
cxt_router() {
	for cxt_sysctl in net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=3 \
		net.ipv4.fib_multipath_hash_fields=0x17 net.ipv4.icmp_ratelimit=0 \
		net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0; do
		ip netns exec "$1" sysctl -qw "$cxt_sysctl" || cxt_fail "sysctl $cxt_sysctl in $1"
	done
}

# cxt_veth NS1 IF1 ADDR1 NS2 IF2 ADDR2 [PREFIXLEN]: a veth pair between two
# namespaces, addressed (/24 unless told) and up. Deleting a namespace removes it.
cxt_veth() {
	cxt_plen=${7:-24}
	ip link add "$2" netns "$1" type veth peer name "$5" netns "$4" ||
		cxt_fail "veth $1/$2 - $4/$5"
	ip -n "$1" addr add "$3/$cxt_plen" dev "$2"
	ip -n "$4" addr add "$6/$cxt_plen" dev "$5"
	ip -n "$1" link set "$2" up
	ip -n "$4" link set "$5" up
}

# cxt_leaf_spine PREFIX N: hosts PREFIXh1 (198.19.1.2) and PREFIXh2 (198.19.2.2),
# leaves PREFIXl1/l2 and N spines PREFIXs1..sN. Spine i: l1 side 198.19.(10+i).0/24
# (interface sl1), l2 side 198.19.(20+i).0/24 (sl2). The leaves spread flows over
# the spines by ECMP on the source port.
cxt_leaf_spine() {
	cxt_p=$1
	cxt_ns "${cxt_p}h1"
	cxt_ns "${cxt_p}h2"
	cxt_ns "${cxt_p}l1"
	cxt_ns "${cxt_p}l2"
	cxt_router "${cxt_p}l1"
	cxt_router "${cxt_p}l2"
	cxt_veth "${cxt_p}h1" eth0 198.19.1.2 "${cxt_p}l1" down0 198.19.1.1
	cxt_veth "${cxt_p}h2" eth0 198.19.2.2 "${cxt_p}l2" down0 198.19.2.1
	ip -n "${cxt_p}h1" route add default via 198.19.1.1
	ip -n "${cxt_p}h2" route add default via 198.19.2.1
	cxt_nh1=""
	cxt_nh2=""
	cxt_i=1
	while [ "$cxt_i" -le "$2" ]; do
		cxt_s=${cxt_p}s$cxt_i
		cxt_ns "$cxt_s"
		cxt_router "$cxt_s"
		cxt_veth "${cxt_p}l1" "up$cxt_i" "198.19.$((10 + cxt_i)).1" "$cxt_s" sl1 "198.19.$((10 + cxt_i)).2"
		cxt_veth "${cxt_p}l2" "up$cxt_i" "198.19.$((20 + cxt_i)).1" "$cxt_s" sl2 "198.19.$((20 + cxt_i)).2"
		ip -n "$cxt_s" route add 198.19.1.0/24 via "198.19.$((10 + cxt_i)).1"
		ip -n "$cxt_s" route add 198.19.2.0/24 via "198.19.$((20 + cxt_i)).1"
		cxt_nh1="$cxt_nh1 nexthop via 198.19.$((10 + cxt_i)).2"
		cxt_nh2="$cxt_nh2 nexthop via 198.19.$((20 + cxt_i)).2"
		cxt_i=$((cxt_i + 1))
	done
	# Word splitting wanted: one nexthop clause per spine.
	# shellcheck disable=SC2086
	ip -n "${cxt_p}l1" route add 198.19.2.0/24 $cxt_nh1 || cxt_fail "ECMP route on ${cxt_p}l1"
	# shellcheck disable=SC2086
	ip -n "${cxt_p}l2" route add 198.19.1.0/24 $cxt_nh2 || cxt_fail "ECMP route on ${cxt_p}l2"
}
