#!/usr/bin/env python3
"""No folder depends on a folder that depends on it (issue 26).

Folders are the directories under runtime/, launcher/, samplers/ and torch/; folder A depends on
folder B when a file in A includes "fastrun/<B>/...". The graph, less the known back edges
listed in KNOWN_BACK_EDGES (each with the reason it is there), must have no cycle: a new include
that closes one fails here, naming the folders and the include lines. A known edge that is gone
must leave the list too, and so must one that no longer closes a cycle: the list only shrinks.

Usage: check_folder_cycles.py SOURCE_DIR
"""
import collections
import os
import re
import sys

TOPS = ("runtime", "launcher", "samplers", "torch")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]fastrun/([^">]+)[">]')

# Back edges that exist today, each with why; breaking one means moving the piece that makes it.
# None left: each piece moved to the layer it belongs to (docs/runtime.md, Layers).
KNOWN_BACK_EDGES = {}


def folder_of(include):
    """The folder an include "fastrun/..." names, or None outside the four trees."""
    if include.startswith("torch/"):  # fastrun/torch/x.h lives in torch/include/fastrun/torch/
        return os.path.dirname("torch/include/fastrun/" + include)
    folder = os.path.dirname(include)
    return folder if folder.split("/")[0] in TOPS else None


def edges_of(source_dir):
    edges = collections.defaultdict(list)  # (from, to) -> ["file:line", ...]
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(source_dir, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh", ".def")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, source_dir)
                here = os.path.dirname(rel)
                with open(path, errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        to = folder_of(m.group(1)) if m else None
                        if to and to != here:
                            edges[(here, to)].append(f"{rel}:{number}")
    return edges


def a_cycle(edges):
    """One cycle as a list of folders (first == last), or None."""
    graph = collections.defaultdict(list)
    for a, b in edges:
        graph[a].append(b)
    state = {}  # 1: on the path, 2: done
    path = []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def main():
    source_dir = sys.argv[1]
    edges = edges_of(source_dir)
    failed = False
    stale = [e for e in KNOWN_BACK_EDGES if e not in edges]
    for a, b in stale:
        print(f"known back edge {a} -> {b} is gone: remove it from KNOWN_BACK_EDGES in {__file__}")
        failed = True
    remaining = {e: where for e, where in edges.items() if e not in KNOWN_BACK_EDGES}
    for edge in KNOWN_BACK_EDGES:
        if edge in edges and not a_cycle({**remaining, edge: edges[edge]}):
            print(f"known back edge {edge[0]} -> {edge[1]} closes no cycle any more: remove it from KNOWN_BACK_EDGES")
            failed = True
    cycle = a_cycle(remaining)
    if cycle:
        print("a folder depends on a folder that depends on it:")
        for a, b in zip(cycle, cycle[1:]):
            print(f"  {a} -> {b}  ({', '.join(remaining[(a, b)][:3])})")
        print("move the piece that makes the back edge to the folder it belongs to (tests/runtime/check_folder_cycles.py)")
        failed = True
    if not failed:
        print(f"{len(edges)} folder edges, {len(KNOWN_BACK_EDGES)} known back edges, no other cycle")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
