#!/usr/bin/env python3
"""No folder depends on a folder that depends on it (issue 26; the rule is in docs/runtime.md, "Layers").

A folder is a directory of the trees in TOPS (runtime/process_group, runtime/backend/shm,
launcher, bench, ...); the files directly in a directory are that folder (runtime/error.h is
folder "runtime"). Folder A depends on folder B when a file in A includes a header in B, as
"fastrun/<B>/x.h" or relative to itself ("../common/kill_plan.h").

A parent and its sub-folders are separate folders, and an include between them is an ordinary
edge. So a parent is either the base its sub-folders build on (runtime/: error.h, duration.h;
runtime/backend/: the Factory type; runtime/store/: the Store interface) or a layer above them,
never both: what names the sub-folders (the backend registry, the stale-store sweep) lives in a
sub-folder of its own (runtime/backend/registry, runtime/store/cleanup).

Any cycle fails, naming its folders and one include line per edge. Usage:
  check_folder_cycles.py SOURCE_DIR
tests/runtime/layering_fixture/ is a tree with a cycle: the test that this script fails on it
keeps the check from passing by finding nothing.
"""
import collections
import os
import re
import sys

TOPS = ("runtime", "launcher", "samplers", "torch", "tools", "bench", "examples")
SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<(fastrun/[^>]+)>)')


def folder_of(include, here, source_dir):
    """The folder (relative to source_dir) of the header an include names, or None when it is
    not one of the trees' files (a system header, a generated file)."""
    if include.startswith("fastrun/torch/"):  # lives in torch/include/fastrun/torch/
        path = "torch/include/" + include
    elif include.startswith("fastrun/"):
        path = include[len("fastrun/"):]
    else:  # relative to the including file, as the compiler looks first
        path = os.path.normpath(os.path.join(here, include))
    if path.split("/")[0] not in TOPS or not os.path.isfile(os.path.join(source_dir, path)):
        return None
    return os.path.dirname(path)


def edges_of(source_dir):
    """{(from folder, to folder): ["file:line", ...]} over every source file of the trees."""
    edges = collections.defaultdict(list)
    for top in TOPS:
        for dirpath, dirnames, files in os.walk(os.path.join(source_dir, top)):
            dirnames.sort()
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, source_dir)
                here = os.path.dirname(rel)
                with open(path, errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        to = folder_of(m.group(1) or m.group(2), here, source_dir) if m else None
                        if to is not None and to != here:
                            edges[(here, to)].append(f"{rel}:{number}: {line.strip()}")
    return edges


def a_cycle(edges):
    """One cycle as a list of folders (first == last), or None. Depth-first, in sorted order, so
    the same tree always reports the same cycle."""
    graph = collections.defaultdict(list)
    for a, b in edges:
        graph[a].append(b)
    state = {}  # 1: on the current path, 2: done, no cycle through it
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
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(f"usage: {sys.argv[0]} SOURCE_DIR (a directory holding {', '.join(TOPS)})")
        return 2
    source_dir = sys.argv[1]
    edges = edges_of(source_dir)
    if not edges:
        print(f"no include between folders of {', '.join(TOPS)} under {source_dir}: wrong directory?")
        return 1
    cycle = a_cycle(edges)
    if cycle:
        print("a folder depends on a folder that depends on it:")
        for a, b in zip(cycle, cycle[1:]):
            where = edges[(a, b)]
            more = f" (and {len(where) - 1} more)" if len(where) > 1 else ""
            print(f"  {a} -> {b}: {where[0]}{more}")
        print("move the piece that makes the back edge to the layer it belongs to (docs/runtime.md, Layers)")
        return 1
    folders = {f for edge in edges for f in edge}
    print(f"{len(folders)} folders, {len(edges)} edges between them, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
