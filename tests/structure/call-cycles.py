#!/usr/bin/env python3
"""No two files call each other in a circle (issue 30).

Within each target of the build (a library, plugin or executable: one meson `*.p` object folder),
file A calls file B when one of A's undefined symbols is a global function that B defines (nm of
the object files). Any cycle of such calls fails, naming its files and, for each edge, a function
that makes it. Calls between targets (a program into a library) are not edges: they are layers.
Shared state is not a call: a global variable or table (the plugin's context, a transport's ops
table) read by many files makes no edge.

Circles known and not yet broken are listed in circles.txt beside this script, one a line (its
files, space-separated): a new circle fails, so does a listed one that grew or is gone (take it
off the list).

Calls that must not be, even without a circle, are listed in no-calls.txt, one a line: "A -> B"
(file A calls no function of file B, e.g. a stage of cruxd's pass into the planner whose output
it takes as a value). Such a call fails, naming a function that makes it; so does a line naming a
file no target builds (the rule would hold for nothing).

Usage: call-cycles.py BUILD_DIR [KNOWN_LIST [FORBIDDEN_LIST]]
"""
import json
import os
import shutil
import subprocess
import sys


def fail(msg):
    print("call-cycles: " + msg, file=sys.stderr)
    sys.exit(1)


def targets_of(build):
    """{object folder: {object path: source path relative to the source root}} for every C file."""
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path, encoding="utf-8") as f:
            commands = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {path} ({e}): give the meson build folder")
    root = None
    out = {}
    for c in commands:
        src = c["file"]
        if not src.endswith(".c"):
            continue
        where = c.get("directory", build)
        obj = os.path.normpath(os.path.join(where, c["output"]))
        src = os.path.normpath(os.path.join(where, src))
        if root is None:
            root = os.path.normpath(os.path.join(where, os.path.relpath(
                os.path.dirname(os.path.abspath(__file__)), where), "..", ".."))
        out.setdefault(os.path.dirname(obj), {})[obj] = os.path.relpath(src, root)
    return out


def symbols(objs):
    """{object: (defined global functions, undefined symbols)} from one nm run over the objects."""
    res = subprocess.run(["nm", "-P", "-A", *objs], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        fail("nm failed: " + res.stderr.strip().splitlines()[0] if res.stderr.strip() else "nm failed")
    table = {o: (set(), set()) for o in objs}
    for line in res.stdout.splitlines():
        # "OBJECT: NAME TYPE [VALUE SIZE]"
        head, _, rest = line.partition(": ")
        parts = rest.split()
        if head not in table or len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            table[head][1].add(name)
        elif kind in ("T", "W"):  # a function (a global table or variable is state, not a call)
            table[head][0].add(name)
    return table


def cycles(edges, nodes):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def known_circles(path):
    """The listed circles, each a sorted tuple of files ('#' starts a comment)."""
    if path is None:
        return set()
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.split("#", 1)[0].split() for ln in f]
    except OSError as e:
        fail(f"cannot read the list of known circles {path} ({e})")
    return {tuple(sorted(ln)) for ln in lines if ln}


def forbidden_calls(path):
    """The listed calls that must not be: [(line number, caller file, callee file)]."""
    if path is None:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.split("#", 1)[0].split() for ln in f]
    except OSError as e:
        fail(f"cannot read the list of forbidden calls {path} ({e})")
    rules = []
    for no, ln in enumerate(lines, 1):
        if not ln:
            continue
        if len(ln) != 3 or ln[1] != "->":
            fail(f"{path}:{no}: expected 'CALLER_FILE -> CALLEE_FILE', got '{' '.join(ln)}'")
        rules.append((no, ln[0], ln[2]))
    return rules


def main():
    if len(sys.argv) not in (2, 3, 4):
        fail("usage: call-cycles.py BUILD_DIR [KNOWN_LIST [FORBIDDEN_LIST]]")
    if shutil.which("nm") is None:
        print("SKIP: nm is not installed (binutils)")
        sys.exit(77)
    build = sys.argv[1]
    known = known_circles(sys.argv[2] if len(sys.argv) >= 3 else None)
    forbidden = forbidden_calls(sys.argv[3] if len(sys.argv) == 4 else None)
    found = {}
    calls = {}  # (caller file, callee file) -> a function that makes the call
    built = set()
    checked = files = 0
    for folder, objs in sorted(targets_of(build).items()):
        missing = [o for o in objs if not os.path.isfile(o)]
        if missing:
            fail(f"{missing[0]} is not built: build everything first (ninja -C {build})")
        table = symbols(sorted(objs))
        owner = {}
        for o, (defs, _) in table.items():
            for s in defs:
                owner.setdefault(s, o)
        edges = {}
        for o, (_, undefs) in table.items():
            for s in sorted(undefs):
                d = owner.get(s)
                if d is not None and d != o:
                    edges.setdefault(objs[o], {}).setdefault(objs[d], s)
                    calls.setdefault((objs[o], objs[d]), s)
        built.update(objs.values())
        checked += 1
        files += len(objs)
        for comp in cycles(edges, set(objs.values())):
            key = tuple(comp)
            found.setdefault(key, (edges, []))[1].append(os.path.relpath(folder, build))
    bad = False
    for comp in sorted(known - set(found)):
        print(f"FAIL: the known circle {' '.join(comp)} is gone or changed: take it off "
              f"{sys.argv[2]}")
        bad = True
    for comp, (edges, where) in sorted(found.items()):
        if comp in known:
            continue
        bad = True
        print(f"FAIL: these files call each other in a circle (in {', '.join(where)}):")
        for a in comp:
            for b in comp:
                if b in edges.get(a, {}):
                    print(f"  {a} -> {b}  ({edges[a][b]})")
        print("  move the shared code to the file it belongs to, or to one both use")
    for no, caller, callee in forbidden:
        gone = [f for f in (caller, callee) if f not in built]
        if gone:
            print(f"FAIL: {sys.argv[3]}:{no} names {gone[0]}, which no target builds: name the "
                  "file as it is now, or take the line off")
            bad = True
        elif (caller, callee) in calls:
            print(f"FAIL: {caller} calls {callee} ({calls[(caller, callee)]}), which "
                  f"{sys.argv[3]}:{no} forbids: hand what it needs over as a value")
            bad = True
    if bad:
        sys.exit(1)
    print(f"PASS: no circle of calls in {checked} targets ({files} objects) but {len(known)} "
          f"listed; none of the {len(forbidden)} forbidden calls")


if __name__ == "__main__":
    main()
