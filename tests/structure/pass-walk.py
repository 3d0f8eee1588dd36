#!/usr/bin/env python3
"""Follow one agent pass through agent/core's call graph (functions, from relocations): issue 30's
count of moves between files (34 before the pipeline of values, 48 after it, 36 once the planner,
the overrides file and the cluster node became components). A figure, not a test.

Compiles every agent/core/src/*.c of BUILD's compile_commands.json at -O0 -fno-inline
-ffunction-sections, reads each function section's relocations (its calls), and walks
depth-first from cruxd_agent_pass, each function once. Prints: functions reached in
agent/core, files entered (moves from a function of one file to one of another), entries
per file, calls leaving agent/core per library (leaves, not followed), and the files of
agent/core each file calls.
usage: pass-walk.py BUILD_DIR
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

if len(sys.argv) != 2:
    sys.exit("usage: pass-walk.py BUILD_DIR")
build = sys.argv[1]
tmp = tempfile.TemporaryDirectory(prefix="pass-walk-")
cmds = json.load(open(os.path.join(build, "compile_commands.json")))
func_file = {}
local_funcs = set()
global_file = {}
calls = collections.defaultdict(list)
seen_src = set()
for c in cmds:
    src = c["file"]
    full = os.path.normpath(os.path.join(c["directory"], src))
    if "/agent/core/src/" not in full or full in seen_src:
        continue
    seen_src.add(full)
    rel = full[full.index("agent/core/src/"):]
    args = c["command"].split()
    out = os.path.join(tmp.name, os.path.basename(full) + ".o")
    a2 = []
    skip = False
    for i, x in enumerate(args):
        if skip:
            skip = False
            continue
        if x in ("-o", "-MF", "-MQ"):
            skip = True
            continue
        if x.startswith("-O") or x in ("-MD",):
            continue
        a2.append(x)
    a2 += ["-O0", "-fno-inline", "-ffunction-sections", "-o", out]
    subprocess.run(a2, cwd=c["directory"], check=True)
    cur = None
    for line in subprocess.run(["objdump", "-r", out], capture_output=True, text=True).stdout.splitlines():
        m = re.match(r"RELOCATION RECORDS FOR \[\.text\.(\S+)\]:", line)
        if m:
            cur = (rel, m.group(1))
            continue
        if line.startswith("RELOCATION RECORDS FOR"):
            cur = None
            continue
        if cur:
            parts = line.split()
            if len(parts) >= 3 and ("PLT32" in parts[1] or "PC32" in parts[1]):
                sym = re.sub(r"[-+]0x[0-9a-f]+$", "", parts[2])
                if sym.startswith(".text."):
                    sym = sym[6:]
                if sym not in calls[cur]:
                    calls[cur].append(sym)
    # every function of the file: (file, name); globals also by name
    for line in subprocess.run(["objdump", "-t", out], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r"^[0-9a-f]+ ([lg])\s+F \.text\.(\S+)\s+[0-9a-f]+\s+(?:\.hidden\s+)?(\S+)$", line)
        if m:
            local_funcs.add((rel, m.group(3)))
            if m.group(1) == "g":
                global_file[m.group(3)] = rel

lib_of = lambda s: ("libc/other" if not re.match(r"crux", s) else
                    "sched" if s.startswith("crux_sched_") else
                    "probe" if s.startswith("cruxd_probe_") else
                    "jobview" if s.startswith("crux_jv_") else
                    "cluster" if s.startswith(("crux_cv_", "crux_cluster_", "crux_etcd_")) else
                    "agent-records" if s.startswith(("cruxd_guard", "cruxd_overrides", "cruxd_override", "cruxd_status", "cruxd_config")) else
                    "common/base")
visited = []
vset = set()
entries = collections.Counter()
moves = 0
out_calls = collections.Counter()
order = []

def resolve(f, name):
    if (f, name) in local_funcs:
        return (f, name)
    if name in global_file:
        return (global_file[name], name)
    return None

def walk(fn, came_from_file):
    global moves
    f = fn[0]
    if came_from_file is not None and f != came_from_file:
        moves += 1
        entries[f] += 1
    if fn in vset:
        return
    vset.add(fn)
    visited.append(fn)
    if f not in order:
        order.append(f)
    for c in calls.get(fn, []):
        r = resolve(f, c)
        if r:
            walk(r, f)
        elif not c.startswith("."):
            out_calls[lib_of(c)] += 1

walk((global_file["cruxd_agent_pass"], "cruxd_agent_pass"), None)
print(f"functions reached in agent/core: {len(visited)}; files: {len(order)}; moves between files: {moves}")
for f in order:
    print(f"  {f}: entered {entries[f]}x, {sum(1 for v in visited if v[0] == f)} functions")
print("calls leaving agent/core (not followed): " + ", ".join(f"{k} {v}" for k, v in sorted(out_calls.items())))
# edges between files
edges = collections.defaultdict(set)
for fn, cs in calls.items():
    for c in cs:
        r = resolve(fn[0], c)
        if r and r[0] != fn[0]:
            edges[fn[0]].add(r[0].split("/")[-1])
print("file -> files it calls (agent/core):")
for f in sorted(edges):
    print(f"  {f.split('/')[-1]} -> {' '.join(sorted(edges[f]))}")
