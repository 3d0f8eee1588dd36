#!/bin/sh
# Prefix = module (issue 30): every global symbol a library defines starts with that library's prefix.
# Today's offenders are listed, library by library, in unprefixed.txt beside this script: a new
# unprefixed global fails here, and so does a listed one that is gone (take it off the list).
# usage: prefixes.sh ALLOWLIST LIBRARY=PREFIX[,PREFIX...] ...
set -u
allow=$1
shift
[ "$#" -gt 0 ] || { echo "FAIL: no library given"; exit 1; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm is not installed"; exit 77; }
[ -r "$allow" ] || { echo "FAIL: cannot read the allow-list $allow"; exit 1; }
bad=0
listed=0
for arg in "$@"; do
	lib=${arg%%=*}
	prefixes=${arg#*=}
	name=$(basename "$lib")
	name=${name%.a}
	name=${name%.so}
	name=${name#lib}
	syms=$(nm --defined-only -g "$lib" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u) || {
		echo "FAIL: nm cannot read $lib"; exit 1; }
	[ -n "$syms" ] || { echo "FAIL: $lib defines no global symbol (wrong path?)"; exit 1; }
	# This library's allowed offenders: lines "LIBRARY SYMBOL", '#' starts a comment.
	known=$(sed 's/#.*//' "$allow" | awk -v l="$name" '$1 == l { print $2 }' | sort -u)
	for s in $syms; do
		# Reserved names belong to the compiler (gcc's ASan defines __odr_asan.NAME for each global).
		case $s in __*) continue ;; esac
		ok=0
		oldifs=$IFS
		IFS=,
		for p in $prefixes; do
			case $s in "$p"*) ok=1 ;; esac
		done
		IFS=$oldifs
		[ "$ok" -eq 1 ] && continue
		if printf '%s\n' "$known" | grep -qxF "$s"; then
			listed=$((listed + 1))
			continue
		fi
		echo "FAIL: $name defines $s, which does not start with its prefix ($prefixes): rename it, or make it static"
		bad=1
	done
	for s in $known; do
		printf '%s\n' "$syms" | grep -qxF "$s" ||
			{ echo "FAIL: $allow lists $name $s, which $name no longer defines: take it off the list"; bad=1; }
	done
done
[ "$bad" -eq 0 ] && echo "PASS: $# libraries, every global prefixed except $listed listed in $(basename "$allow")"
exit "$bad"
