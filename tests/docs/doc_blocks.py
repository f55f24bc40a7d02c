#!/usr/bin/env python3
"""Runs the README's and docs' marked code blocks, so that every marked command runs as written.

Marking convention (the HTML comment is invisible on GitHub), on the line right before a fence:

    <!-- runnable -->            the ```sh block below must exit 0
    <!-- runnable exit=2 -->     ... must exit 2 (a documented usage error)
    <!-- compile -->             the ```cpp block below must compile against the build tree, and
                                 link when it has a main()
    <!-- compile torch -->       the same, with LibTorch and fastrun::torch (docs/torch.md); shown
                                 as "skip" when the build has no LibTorch component
    <!-- runnable needs=torch -->  ... only when the build has that optional part (--have torch:
                                 the LibTorch layer); else the block is listed as skipped

A runnable block runs under `bash -e -o pipefail` in a fresh temporary directory, with the
build's programs on PATH (fastrun, fastrun-bench, hello, hello_self_spawn, train_mlp, ...: the
docs name them as an installed prefix would) and a `build` link to the build tree (so a command
written as `build/tools/fastrun` from the source root works too), no FASTRUN_* variable from
the caller, and BLOCK_TIMEOUT seconds at most (DOC_BLOCK_TIMEOUT overrides it); its whole
process group is killed on timeout.
A failure names the doc's file:line and shows the block's output.

Left unmarked on purpose: commands that need a GPU (--devices, train_mlp_cuda, gpu_checks.sh),
a cluster or another launcher (srun, mpirun, torchrun), root or minutes (tools/demo.sh and
tools/test.sh install packages and build everything; full benchmark runs take minutes),
placeholders (./my_program, ./train), fragments that are not whole programs or commands, and
`fastrun --cleanup` (run beside the suite's SIGKILL tests, it would remove the leftovers those
tests check before cleaning them up themselves).

The same run checks that docs/index.md links every page of docs/, and that every marker is
followed by a fence of the kind it names.

usage: doc_blocks.py --source DIR --build DIR --path DIR... --cxx CXX --include DIR...
                     --define NAME=VALUE... --link LIB... [FILE.md...]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

# Seconds per block: every marked block takes a few at most (the slowest, two benchmarks, ~7 s).
BLOCK_TIMEOUT = int(os.environ.get("DOC_BLOCK_TIMEOUT", 60))
MARKER = re.compile(r"^<!--\s*(runnable|compile)\b\s*(torch\s*)?(?:exit=(\d+))?\s*(?:needs=(\w+))?\s*-->\s*$")
FENCE_LANGS = {"runnable": ("sh", "bash"), "compile": ("cpp", "c++")}


class Block:
    def __init__(self, path, line, kind, want_exit, text, needs=None):
        self.path, self.line, self.kind, self.want_exit, self.text = path, line, kind, want_exit, text
        self.torch = False
        self.needs = needs

    def where(self):
        return f"{self.path}:{self.line}"


def extract(path, rel):
    """The marked blocks of one Markdown file; a marker without its fence is an error."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, errors = [], []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i].strip())
        if not m:
            i += 1
            continue
        kind, want_exit = m.group(1), int(m.group(3) or 0)
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        lang = fence[3:].strip() if fence.startswith("```") else None
        if lang not in FENCE_LANGS[kind]:
            errors.append(f"{rel}:{i + 1}: <!-- {kind} --> must be followed by a ```{FENCE_LANGS[kind][0]} fence")
            i += 1
            continue
        end = i + 2
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            errors.append(f"{rel}:{i + 2}: the fence is never closed")
            break
        blocks.append(Block(rel, i + 3, kind, want_exit, "\n".join(lines[i + 2:end]) + "\n", m.group(4)))
        blocks[-1].torch = kind == "compile" and m.group(2) is not None
        i = end + 1
    return blocks, errors


def run_command(argv, cwd, env=None, timeout=BLOCK_TIMEOUT):
    """(exit status, output); the process group is killed on timeout so nothing outlives it."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out.decode(errors="replace") + f"\n(timed out after {timeout} s)"


def run_block(block, args, workdir):
    os.symlink(args.build, os.path.join(workdir, "build"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTRUN_")}
    env["PATH"] = os.pathsep.join(args.path + [env.get("PATH", "/usr/bin:/bin")])
    script = os.path.join(workdir, "block.sh")
    with open(script, "w") as f:
        f.write(block.text)
    rc, out = run_command(["bash", "-e", "-o", "pipefail", script], workdir, env)
    if rc == block.want_exit:
        return None
    status = "timed out" if rc is None else f"exit status {rc}"
    return f"{status}, wanted exit {block.want_exit}:\n{block.text}--- output ---\n{out}"


def compile_block(block, args, workdir):
    source = os.path.join(workdir, "snippet.cpp")
    with open(source, "w") as f:
        f.write(f'#line {block.line} "{block.path}"\n' + block.text)  # compiler errors cite the doc
    flags = ["-std=c++20", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-Wno-unused-variable"]
    # The compiler's own directories stay out of -I: listing /usr/include breaks #include_next.
    flags += [f"-I{d}" for d in dict.fromkeys(args.include) if d not in ("/usr/include", "/usr/local/include")]
    flags += [f"-D{d}" for d in dict.fromkeys(args.define)]
    links = args.link
    if block.torch:  # LibTorch's headers as system headers (their warnings are not ours), ours as -I
        system = [os.path.normpath(d) for d in args.torch_include if d]
        flags += [f"-I{d}" for d in dict.fromkeys(system) if d not in ("/usr/include", "/usr/local/include")
                  and d not in args.include and "torch/csrc" not in d]  # fastrun/torch/...
        flags += [f"-isystem{d}" for d in dict.fromkeys(system) if "torch/csrc" in d]  # LibTorch's own
        links = args.link + args.torch_link
    if re.search(r"\bint\s+main\s*\(", block.text):
        rpath = ":".join(sorted({os.path.dirname(lib) for lib in links}))
        argv = [args.cxx, *flags, source, "-o", os.path.join(workdir, "snippet"), *links, "-lfmt", "-pthread",
                f"-Wl,-rpath,{rpath}"]
    else:
        argv = [args.cxx, *flags, "-fsyntax-only", source]
    rc, out = run_command(argv, workdir, timeout=120)
    if rc == 0:
        return None
    return f"does not compile ({' '.join(argv)}):\n{block.text}--- compiler ---\n{out}"


def check_index(source):
    docs = os.path.join(source, "docs")
    index = open(os.path.join(docs, "index.md"), encoding="utf-8").read()
    pages = sorted(p for p in os.listdir(docs) if p.endswith(".md") and p != "index.md")
    return [f"docs/index.md: no link to {p}" for p in pages if f"]({p})" not in index]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--path", action="append", default=[])
    parser.add_argument("--cxx", required=True)
    parser.add_argument("--include", action="append", default=[])
    parser.add_argument("--define", action="append", default=[])
    parser.add_argument("--link", action="append", default=[])
    # The LibTorch component's and LibTorch's headers and libraries, for <!-- compile torch -->
    # blocks; without --torch-link (a build without LibTorch) those blocks are skipped.
    parser.add_argument("--torch-include", action="append", default=[])
    parser.add_argument("--torch-link", action="append", default=[])
    parser.add_argument("--have", action="append", default=[], help="optional parts built (needs=NAME)")
    parser.add_argument("files", nargs="*", help="Markdown files relative to --source (default: README.md, docs/*.md)")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    files = args.files or ["README.md"] + sorted(
        os.path.join("docs", p) for p in os.listdir(os.path.join(args.source, "docs")) if p.endswith(".md"))

    failures = check_index(args.source)
    blocks = []
    for rel in files:
        found, errors = extract(os.path.join(args.source, rel), rel)
        blocks += found
        failures += errors
    for block in blocks:
        if block.torch and not args.torch_link:
            print(f"skip {block.where()} (compile torch: this build has no LibTorch component)", flush=True)
            continue
        if block.needs and block.needs not in args.have:
            print(f"skip {block.where()} ({block.kind}, needs {block.needs}, not built)", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="fastrun-doc-") as workdir:
            problem = (run_block if block.kind == "runnable" else compile_block)(block, args, workdir)
        print(f"{'ok  ' if problem is None else 'FAIL'} {block.where()} ({block.kind})", flush=True)
        if problem is not None:
            failures.append(f"{block.where()}: {problem}")
    print(f"{len(blocks)} marked blocks in {len(files)} files")
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
