#!/bin/sh
# The plugin's dynamic symbol table exports ncclNetPlugin_v6..v12 and nothing else.
# usage: exports.sh LIBRARY
set -u
LIB=$1
if command -v nm >/dev/null 2>&1; then
	SYMS=$(nm -D --defined-only "$LIB" | awk '{ print $3 }' | sort)
elif command -v readelf >/dev/null 2>&1; then
	SYMS=$(readelf -W --dyn-syms "$LIB" | awk '$7 != "UND" && $5 != "LOCAL" && $8 != "" { print $8 }' | sort)
else
	echo "SKIP: neither nm nor readelf is installed"; exit 77
fi
WANT=$(printf 'ncclNetPlugin_v%s\n' 10 11 12 6 7 8 9 | sort)
if [ "$SYMS" != "$WANT" ]; then
	echo "FAIL: $LIB exports:"; echo "$SYMS"; echo "expected:"; echo "$WANT"; exit 1
fi
echo "PASS: exports exactly: $(echo $SYMS)"
