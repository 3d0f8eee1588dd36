#!/bin/sh
# Style gate run by `make test`: every tracked C file formatted by the repository's own
# .clang-format, every tracked shell script clean under shellcheck at warning severity.
# Usage: tools/check-style.sh [--fix]   (--fix rewrites C files in place; scripts are fixed by hand)
set -eu
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
--fix) fix=1 ;;
"") ;;
*)
	echo "check-style: unknown argument '$1' (use --fix or nothing)" >&2
	exit 2
	;;
esac

for tool in clang-format shellcheck git; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "check-style: $tool not found: run 'make deps' (Debian package ${tool})" >&2
		exit 2
	fi
done
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "check-style: not a git checkout; the gate checks tracked files only" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

git ls-files -z -- '*.c' '*.h' >"$tmp/c"
if [ "$fix" = 1 ]; then
	xargs -0 clang-format -i <"$tmp/c"
fi
bad_c=0
# One file at a time so the report names each file; --Werror makes a difference an error.
xargs -0 -n 1 sh -c 'clang-format --dry-run --Werror "$1" >/dev/null 2>&1 || echo "$1"' sh \
	<"$tmp/c" >"$tmp/c-bad"
if [ -s "$tmp/c-bad" ]; then
	bad_c=$(wc -l <"$tmp/c-bad")
	echo "check-style: $bad_c C file(s) differ from .clang-format:" >&2
	sed 's/^/  /' "$tmp/c-bad" >&2
	echo "  fix: tools/check-style.sh --fix (or clang-format -i FILE), then review the diff" >&2
fi

# Shell scripts: *.sh plus extension-less files with a shell shebang.
git ls-files -- '*.sh' >"$tmp/sh"
git ls-files | grep -v '\.sh$' | while IFS= read -r f; do
	[ -f "$f" ] || continue
	head -n 1 "$f" 2>/dev/null | grep -qE '^#!.*(/|env )(ba|da)?sh( |$)' && echo "$f"
done >>"$tmp/sh" || true
bad_sh=0
if ! tr '\n' '\0' <"$tmp/sh" | xargs -0 shellcheck -S warning -f gcc >"$tmp/sh-out" 2>&1; then
	bad_sh=$(grep -c ': warning:\|: error:' "$tmp/sh-out" || true)
	echo "check-style: shellcheck reports $bad_sh warning(s)/error(s):" >&2
	sed 's/^/  /' "$tmp/sh-out" >&2
fi

if [ "$bad_c" != 0 ] || [ "$bad_sh" != 0 ]; then
	exit 1
fi
echo "check-style: $(tr -cd '\0' <"$tmp/c" | wc -c) C files and $(wc -l <"$tmp/sh") scripts clean"
