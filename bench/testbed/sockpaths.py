#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""sockpaths.py: the spine each of a run's TCP connections was hashed onto.

run.sh snapshots every host's established TCP sockets (`ss -tniHp`) every few
seconds while a run lasts (RUN_DIR/sockets.txt) and records which trainer
process is which job's rank on which host (RUN_DIR/pids.txt). After the run,
while the fabric is still up, this script takes each socket of a trainer that
sent to a host on another leaf, keeps the most bytes it had sent (bytes_acked),
and asks the sender's leaf which spine its ECMP hash picks for that socket's
ports (`ip route get PEER from LOCAL iif hK ipproto tcp sport P dport Q` in the
leaf's namespace: the leaves hash source IP, destination IP, protocol and
source port). It writes RUN_DIR/paths.txt, one line per socket:

    job rank src dst sport dport spine bytes

(src/dst: the fabric addresses, as the testbed's topology names its hosts;
spine: the topology's spine node, s0, s1, ...). predict.py --per-run-paths
models each run on the spines its connections actually took. And
RUN_DIR/paths-windows.txt, the same per snapshot (run.sh takes one every 5 s):

    window job rank src dst sport dport spine bytes

bytes: what the socket's bytes_acked grew by since the snapshot before (in the
first snapshot that shows it: since it opened), so a flow that cruxd moves to another spine shows
on which spine it sent in each window (predict.py --path-windows).

usage: sockpaths.py --state /run/crux-testbedT --prefix cxtbT RUN_DIR
"""
import argparse
import os
import re
import subprocess
import sys

SOCK = re.compile(r"^\S+\s+\S+\s+(\S+):(\d+)\s+(\S+):(\d+)\s+users:.*pid=(\d+)")
ACKED = re.compile(r"bytes_acked:(\d+)")


def die(msg):
    print(f"sockpaths.py: {msg}", file=sys.stderr)
    sys.exit(1)


def read_hosts(state):
    """host -> (netns, address, leaf) from the fabric's state file."""
    hosts = {}
    try:
        with open(os.path.join(state, "hosts")) as f:
            for line in f:
                p = line.split()
                if len(p) >= 4:
                    hosts[p[0]] = (p[1], p[2], int(p[3]))
    except OSError as e:
        die(f"{state}/hosts: {e} (is the testbed fabric up?)")
    return hosts


def read_sockets(path):
    """(host address, pid, local, lport, peer, pport) -> the most bytes acked seen,
    and per socket {snapshot: bytes acked then} (a snapshot begins each time the
    first host's block comes round again)."""
    best, seen, host, key, first, snap = {}, {}, None, None, None, -1
    try:
        f = open(path)
    except OSError:
        return best, seen  # no snapshot: a run shorter than the first one
    with f:
        for line in f:
            if line.startswith("## "):
                host, key = line.split()[1], None
                if first is None:
                    first = host
                if host == first:
                    snap += 1
                continue
            m = SOCK.match(line)
            if m:
                key = (host, int(m.group(5)), m.group(1), int(m.group(2)), m.group(3),
                       int(m.group(4)))
                best.setdefault(key, 0)
                continue
            m = ACKED.search(line)
            if m and key is not None and line[:1].isspace():
                v = int(m.group(1))
                best[key] = max(best[key], v)
                seen.setdefault(key, {})[snap] = max(seen.get(key, {}).get(snap, 0), v)
                key = None
    return best, seen


def windows(seen):
    """[(window, bytes sent since the socket's previous snapshot)] with bytes > 0."""
    out, last = [], 0
    for w in sorted(seen):
        if seen[w] > last:
            out.append((w, seen[w] - last))
        last = max(last, seen[w])
    return out


def spine_of(leaf_ns, host_if, src, dst, sport, dport):
    base = ["ip", "-n", leaf_ns, "route", "get", dst, "from", src]
    tail = ["ipproto", "tcp", "sport", str(sport), "dport", str(dport)]
    for cmd in (base + ["iif", host_if] + tail, base + tail):
        r = subprocess.run(cmd, capture_output=True, text=True)
        m = re.search(r"\bdev s(\d+)\b", r.stdout)
        if r.returncode == 0 and m:
            return f"s{m.group(1)}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("run_dir")
    a = ap.parse_args()
    hosts = read_hosts(a.state)
    by_addr = {v[1]: (k, v[2]) for k, v in hosts.items()}
    pids = {}
    try:
        with open(os.path.join(a.run_dir, "pids.txt")) as f:
            for line in f:
                p = line.split()
                if len(p) == 4:
                    pids[int(p[0])] = (p[1], p[2])
    except OSError as e:
        die(f"{a.run_dir}/pids.txt: {e}")
    # A host's index on its leaf names the leaf's port towards it (h0, h1, ...).
    per_leaf = {}
    for h in sorted(hosts, key=lambda x: int(x[1:])):
        per_leaf.setdefault(hosts[h][2], []).append(h)
    port = {h: f"h{i}" for hs in per_leaf.values() for i, h in enumerate(hs)}
    rows, wrows, missed = [], [], 0
    best, seen = read_sockets(os.path.join(a.run_dir, "sockets.txt"))
    for (host, pid, local, lport, peer, pport), acked in sorted(best.items()):
        if pid not in pids or host not in by_addr or peer not in by_addr:
            continue
        name, leaf = by_addr[host]
        if by_addr[peer][1] == leaf or acked == 0:
            continue  # same leaf: no spine; nothing sent on it
        sp = spine_of(f"{a.prefix}-l{leaf}", port[name], local, peer, lport, pport)
        if sp is None:
            missed += 1
            continue
        job, rank = pids[pid]
        rows.append(f"{job} {rank} {local} {peer} {lport} {pport} {sp} {acked}")
        for w, b in windows(seen.get((host, pid, local, lport, peer, pport), {})):
            wrows.append((w, f"{job} {rank} {local} {peer} {lport} {pport} {sp} {b}"))
    with open(os.path.join(a.run_dir, "paths.txt"), "w") as f:
        f.write("# job rank src dst sport dport spine bytes (sockpaths.py)\n")
        f.write("".join(r + "\n" for r in rows))
    with open(os.path.join(a.run_dir, "paths-windows.txt"), "w") as f:
        f.write("# window job rank src dst sport dport spine bytes (sockpaths.py; bytes in the window)\n")
        f.write("".join(f"{w} {r}\n" for w, r in sorted(wrows, key=lambda x: x[0])))
    if missed:
        print(f"sockpaths.py: {a.run_dir}: {missed} sockets whose spine the leaf did not say",
              file=sys.stderr)


if __name__ == "__main__":
    main()
