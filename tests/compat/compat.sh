#!/bin/sh
# The README's compatibility table against the libraries actually built:
# for each NCCL release in nccl-lookups.txt, the table NCCL loads is the first
# in its lookup order that the library exports (nm); the README's row for that
# release must name it ("vN") or say "none". A row missing on either side, an
# export removed or a table cell that disagrees fails the test.
# usage: compat.sh README NET_PLUGIN.so PROFILER_PLUGIN.so LOOKUPS
set -u
README=$1 NET=$2 PROF=$3 LOOKUPS=$4
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm is not installed (binutils)"; exit 77; }
net_syms=$(nm -D --defined-only "$NET" | awk '{ print $3 }')
prof_syms=$(nm -D --defined-only "$PROF" | awk '{ print $3 }')
[ -n "$net_syms" ] && [ -n "$prof_syms" ] || { echo "FAIL: cannot read the exports"; exit 1; }
# The table: lines between the markers, data rows only; "| NCCL | net | profiler | preload |".
rows=$(awk '/<!-- compat-table -->/{on=1; next} /<!-- \/compat-table -->/{on=0} on' "$README" |
	grep '^| ' | grep -v '^| NCCL ' | grep -v '^|---')
[ -n "$rows" ] || { echo "FAIL: no compatibility table between the markers in $README"; exit 1; }
# first of a comma list the library exports, or "none"
first() { # $1 list, $2 prefix, $3 exported symbols
	for v in $(echo "$1" | tr ',' ' '); do
		[ "$v" = "-" ] && break
		echo "$3" | grep -qx "$2$v" && { echo "$v"; return; }
	done
	echo none
}
cell() { # $1 row, $2 column (1-based, after the leading '|'): first word, stripped of `*
	echo "$1" | awk -F'|' -v c="$(($2 + 1))" '{ print $c }' | sed 's/^ *//; s/[`*]//g' | awk '{ print $1 }'
}
fails=0 n=0
while read -r rel netl profl; do
	case "$rel" in ''|\#*) continue ;; esac
	n=$((n + 1))
	row=$(echo "$rows" | awk -F'|' -v r="$rel" '{ x = $2; gsub(/[ *]/, "", x); if (x == r) print }')
	if [ -z "$row" ]; then
		echo "FAIL: the README has no row for NCCL $rel"; fails=$((fails + 1)); continue
	fi
	want_net=$(first "$netl" ncclNetPlugin_ "$net_syms")
	want_prof=$(first "$profl" ncclProfiler_ "$prof_syms")
	got_net=$(cell "$row" 2) got_prof=$(cell "$row" 3)
	if [ "$got_net" != "$want_net" ] || [ "$got_prof" != "$want_prof" ]; then
		echo "FAIL: NCCL $rel: the README says net $got_net, profiler $got_prof; the libraries give net $want_net, profiler $want_prof"
		fails=$((fails + 1))
	else
		echo "ok: NCCL $rel: net $want_net, profiler $want_prof"
	fi
done < "$LOOKUPS"
nrows=$(echo "$rows" | wc -l)
if [ "$nrows" -ne "$n" ]; then
	echo "FAIL: the README table has $nrows rows, $LOOKUPS has $n releases"; fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] && echo "PASS: $n NCCL releases" || exit 1
