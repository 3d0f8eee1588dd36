#!/bin/sh
# Keeps the component READMEs true to the tree (issue 30): in a README with a file table (a table whose
# first header cell is "file"), every .c/.h named in a row's first cell exists in the README's folder,
# and every .c/.h of that folder outside include/ (public headers are described with the API) and
# outside sub-folders with their own README is named in the table. In any README, a backquoted path
# with a slash that ends in .c or .h exists (relative to the README, the repository root, or as
# crux/NAME.h under some include/). A rename without a README update fails here, naming both.
# Usage: readme-files.sh [REPO_ROOT]
set -u
. "$(cd "$(dirname "$0")" && pwd)/../lib/harness.sh"
root=${1:-.}
cd "$root" || { echo "readme-files: cannot enter $root" >&2; exit 1; }
bad=0
cxt_workdir readme-files
tmp=$CXT_W

complain() {
	echo "$1" >&2
	bad=1
}

# Backquoted .c/.h names in the first cell of each row of the file tables.
table_names() {
	awk '
	/^\|/ {
		n = split($0, c, "|")
		cell = c[2]
		if (!intable) {
			intable = 1
			h = tolower(cell)
			gsub(/[ \t]/, "", h)
			isfile = (h == "file")
			next
		}
		if (!isfile || cell ~ /^[-: ]+$/)
			next
		while (match(cell, /`[A-Za-z0-9_.\/-]+\.[ch]`/)) {
			print substr(cell, RSTART + 1, RLENGTH - 2)
			cell = substr(cell, RSTART + RLENGTH)
		}
		next
	}
	{ intable = 0; isfile = 0 }
	' "$1"
}

# Backquoted paths (with a slash) to .c/.h files anywhere in the text.
prose_paths() {
	# shellcheck disable=SC2016 # the backquotes are literal
	grep -o '`[A-Za-z0-9_.-]*/[A-Za-z0-9_./-]*\.[ch]`' "$1" | tr -d '`'
}

find . -name build\* -prune -o -name .git -prune -o -name subprojects -prune -o \
	-name README.md -print | sort >"$tmp/readmes"

while read -r readme; do
	dir=$(dirname "$readme")
	table_names "$readme" | sort -u >"$tmp/names"
	if [ -s "$tmp/names" ]; then
		# Each named file exists: by its path, or (a bare name) somewhere in the folder.
		while read -r name; do
			case $name in
			*/*) [ -f "$dir/$name" ] ||
				complain "$readme: the file table names $name, but $dir/$name does not exist" ;;
			*) [ -n "$(find "$dir" -name build\* -prune -o -name "$name" -type f -print)" ] ||
				complain "$readme: the file table names $name, but no such file is under $dir" ;;
			esac
		done <"$tmp/names"
		# Each source file of the folder is named, by its path or its base name.
		find "$dir" -name build\* -prune -o -name include -prune -o -type d ! -path "$dir" \
			-exec test -f '{}/README.md' ';' -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print |
			sort >"$tmp/files"
		while read -r f; do
			rel=${f#"$dir"/}
			base=${f##*/}
			grep -qxF "$rel" "$tmp/names" || grep -qxF "$base" "$tmp/names" ||
				complain "$readme: $rel is not in its file table (add a row, or fix the row of a renamed file)"
		done <"$tmp/files"
	fi
	prose_paths "$readme" | sort -u >"$tmp/paths"
	while read -r p; do
		[ -f "$dir/$p" ] || [ -f "$p" ] && continue
		case $p in
		crux/*) [ -n "$(find . -name build\* -prune -o -path "*/include/$p" -type f -print)" ] && continue ;;
		esac
		complain "$readme: names $p, which is neither under $dir nor under the repository root"
	done <"$tmp/paths"
done <"$tmp/readmes"

[ "$bad" -eq 0 ] && echo "readme-files: $(wc -l <"$tmp/readmes") READMEs match the tree"
exit "$bad"
