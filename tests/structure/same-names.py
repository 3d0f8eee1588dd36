#!/usr/bin/env python3
"""No two source files of the product share a name (issue 30).

A reader (and an #include "x.h" beside its .c) tells a file by its name: two report.c or two
placement.h in different components make both ambiguous. Every C file this build compiles outside
tests/, and the .c and .h files beside it, is one name; a name found in two folders fails, naming
both. Tests are left out: a test is named for what it tests (tests/profiler/chain.c tests
profiler/src/chain.c).

Usage: same-names.py BUILD_DIR SOURCE_ROOT
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 3:
        print("usage: same-names.py BUILD_DIR SOURCE_ROOT", file=sys.stderr)
        return 2
    build, root = sys.argv[1], os.path.realpath(sys.argv[2])
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path) as f:
            cmds = json.load(f)
    except (OSError, ValueError) as e:
        print(f"same-names: cannot read {path}: {e}; fix: run meson setup on that build folder",
              file=sys.stderr)
        return 1
    files = set()
    for c in cmds:
        files.add(os.path.realpath(os.path.join(c["directory"], c["file"])))
    folders = set()
    for f in files:
        rel = os.path.relpath(f, root)
        if rel.startswith("..") or rel.split(os.sep)[0] in ("tests", "subprojects"):
            continue
        folders.add(os.path.dirname(f))
    seen = {}
    for d in sorted(folders):
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")) and os.path.isfile(os.path.join(d, name)):
                seen.setdefault(name, []).append(os.path.relpath(os.path.join(d, name), root))
    dups = {n: p for n, p in seen.items() if len(p) > 1}
    for n, p in sorted(dups.items()):
        print(f"same-names: {n} in {len(p)} folders: {', '.join(p)}; fix: name each for what it "
              "does", file=sys.stderr)
    if dups:
        return 1
    print(f"same-names: {len(seen)} source names in {len(folders)} folders, none shared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
