#!/bin/sh
# The libraries loaded into training processes (the net plugin, the preload,
# the profiler plugin) carry none of the agent's side of the shared-memory
# contracts: no global symbol of libcrux-agentside (decision table writer,
# profile reader and copies, attach broker) may appear in their symbol tables.
# usage: agentside.sh LIBCRUX-AGENTSIDE.a LIBRARY.so...
set -u
AGENT=$1
shift
if ! command -v nm >/dev/null 2>&1; then
	echo "SKIP: nm is not installed"; exit 77
fi
AGENT_SYMS=$(nm -g --defined-only "$AGENT" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u)
# The list must hold the writer, or the check would pass on anything.
for want in crux_dt_publish crux_dt_writer_open_shadow crux_prof_copies_put crux_broker_open; do
	if ! echo "$AGENT_SYMS" | grep -qx "$want"; then
		echo "FAIL: $AGENT does not define $want: the list of agent-side symbols is wrong"; exit 1
	fi
done
rc=0
for lib in "$@"; do
	# All symbols, static ones included (a static helper's library came with it).
	LIB_SYMS=$(nm "$lib" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u)
	if [ -z "$LIB_SYMS" ]; then
		echo "SKIP: $lib has no symbol table (stripped)"; exit 77
	fi
	# Both lists are unique: a name seen twice is in both.
	FOUND=$(printf '%s\n%s\n' "$AGENT_SYMS" "$LIB_SYMS" | sort | uniq -d)
	if [ -n "$FOUND" ]; then
		echo "FAIL: $lib carries agent-side code:"; echo "$FOUND" | sed 's/^/  /'
		rc=1
	else
		echo "PASS: $lib: none of $(echo "$AGENT_SYMS" | wc -l) agent-side symbols"
	fi
done
exit $rc
