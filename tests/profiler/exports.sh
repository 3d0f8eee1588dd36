#!/bin/sh
# The profiler plugin's dynamic symbol table exports ncclProfiler_v4..v7 and nothing else.
# usage: exports.sh LIBRARY
set -u
LIB=$1
if command -v nm >/dev/null 2>&1; then
	SYMS=$(nm -D --defined-only "$LIB" | awk '{ print $3 }' | sort)
else
	echo "SKIP: nm is not installed (binutils)"; exit 77
fi
WANT=$(printf 'ncclProfiler_v%s\n' 4 5 6 7 | sort)
if [ "$SYMS" != "$WANT" ]; then
	echo "FAIL: $LIB exports:"; echo "$SYMS"; echo "expected:"; echo "$WANT"; exit 1
fi
echo "PASS: exports exactly: $(echo $SYMS)"
