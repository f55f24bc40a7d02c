#!/usr/bin/env python3
"""Runs the README's and docs' marked code blocks, so that every marked command runs as written.

Marking convention (the HTML comment is invisible on GitHub), on the line right before a fence:

    <!-- runnable -->            the ```sh block below must exit 0
    <!-- runnable exit=2 -->     ... must exit 2 (a documented usage error)
    <!-- compile -->             the ```cpp block below must compile against the build tree, and
                                 link when it has a main(); a main() that calls fastrun::join()
                                 and not launch_self() works on any rank count, so it also runs,
                                 under `fastrun --nproc N` for each N of RUN_NPROCS (2 and 3:
                                 rank 2 is the first that is neither a root nor a peer of 0 or 1)
    <!-- compile torch -->       the same, with LibTorch and fastrun::torch (docs/torch.md); shown
                                 as "skip" when the build has no LibTorch component
    <!-- runnable needs=torch -->  ... only when the build has that optional part (--have torch:
                                 the LibTorch layer); else the block is listed as skipped
    <!-- runnable in=checkout -->  ... run in a scratch copy of the source tree (README's
                                 "build and install the library" recipe), compiling through
                                 ccache when it is installed; CHECKOUT_BLOCK_TIMEOUT seconds

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

The same run checks that docs/index.md links every page of docs/, that every marker is
followed by a fence of the kind it names, and that every link to a section (`page.md#anchor`,
`#anchor`) between these files names a heading that exists, by GitHub's anchor rules (slug()).

usage: doc_blocks.py --source DIR --build DIR --path DIR... --cxx CXX --include DIR...
                     --define NAME=VALUE... --link LIB... [FILE.md...]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

# Seconds per block: every marked block takes a few at most (the slowest, two benchmarks, ~7 s).
BLOCK_TIMEOUT = int(os.environ.get("DOC_BLOCK_TIMEOUT", 60))
# A block run in a copy of the checkout builds fastrun's libraries (README's recipe, ~130
# translation units): ~30 s through a warm ccache, which is how the suite runs it from the second
# run on a machine (each later run compiles only what changed); the first, through an empty
# cache, takes ~5 minutes on 2 quiet cores (docs.blocks' CTest timeout allows for it).
CHECKOUT_BLOCK_TIMEOUT = max(BLOCK_TIMEOUT, 600)
MARKER = re.compile(r"^<!--\s*(runnable|compile)\b\s*(torch\s*)?(?:exit=(\d+))?\s*(?:needs=(\w+))?\s*"
                    r"(in=checkout\s*)?-->\s*$")
FENCE_LANGS = {"runnable": ("sh", "bash"), "compile": ("cpp", "c++")}
# The rank counts a compiled program that joins on any rank count runs at: 2 (the usual count of
# the docs' examples) and 3 (an odd count, and a rank that takes no part in a two-rank exchange).
RUN_NPROCS = (2, 3)
JOINS = re.compile(r"\bfastrun::join\s*\(")
SELF_LAUNCH = re.compile(r"\blaunch_self\s*\(")


class Block:
    def __init__(self, path, line, kind, want_exit, text, needs=None):
        self.path, self.line, self.kind, self.want_exit, self.text = path, line, kind, want_exit, text
        self.torch = False
        self.needs = needs
        self.in_checkout = False

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
        blocks[-1].in_checkout = kind == "runnable" and m.group(5) is not None
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


def block_env(args):
    """The caller's environment without FASTRUN_*, with the build's programs first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTRUN_")}
    env["PATH"] = os.pathsep.join(args.path + [env.get("PATH", "/usr/bin:/bin")])
    return env


def copy_checkout(source, workdir):
    """The source tree's files as a checkout has them (git's tracked and unignored files; without
    git, everything but build trees), copied into workdir."""
    listed = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True)
    if listed.returncode == 0:
        names = [n for n in listed.stdout.decode().split("\0") if n]
    else:
        names = []
        for root, dirs, files in os.walk(source):
            dirs[:] = [d for d in dirs if d != ".git" and not (root == source and d.startswith("build"))]
            names += [os.path.relpath(os.path.join(root, f), source) for f in files]
    for name in names:
        src = os.path.join(source, name)
        if not os.path.isfile(src):
            continue  # deleted but not yet committed
        os.makedirs(os.path.join(workdir, os.path.dirname(name)), exist_ok=True)
        shutil.copy2(src, os.path.join(workdir, name))


def checkout_env(env, workdir):
    """A build in a checkout block compiles through ccache when there is one, so that a block that
    builds fastrun takes seconds once the cache holds these sources (the first run after a change
    compiles what changed). CMake takes the launcher from the environment; CCACHE_BASEDIR and
    CCACHE_NOHASHDIR make the scratch copy's paths, new in every run, not part of the hash."""
    if shutil.which("ccache"):
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_CUDA_COMPILER_LAUNCHER", "ccache")
        env["CCACHE_BASEDIR"] = workdir
        env["CCACHE_NOHASHDIR"] = "1"
    return env


def run_block(block, args, workdir):
    env = block_env(args)
    if block.in_checkout:
        copy_checkout(args.source, workdir)
        env = checkout_env(env, workdir)
    os.symlink(args.build, os.path.join(workdir, "build"))
    script = os.path.join(workdir, "block.sh")
    with open(script, "w") as f:
        f.write(block.text)
    rc, out = run_command(["bash", "-e", "-o", "pipefail", script], workdir, env,
                          timeout=CHECKOUT_BLOCK_TIMEOUT if block.in_checkout else BLOCK_TIMEOUT)
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
    if rc != 0:
        return f"does not compile ({' '.join(argv)}):\n{block.text}--- compiler ---\n{out}"
    if not runs_on_any_count(block):
        return None
    for nproc in RUN_NPROCS:
        run = ["fastrun", "--nproc", str(nproc), os.path.join(workdir, "snippet")]
        rc, out = run_command(run, workdir, block_env(args))
        if rc != 0:
            status = "timed out" if rc is None else f"exit status {rc}"
            return f"compiles, but `fastrun --nproc {nproc} ./snippet` failed ({status}):\n{block.text}--- output ---\n{out}"
    return None


def runs_on_any_count(block):
    """A program with a main() that joins whatever job it is in (not one that spawns its own)."""
    code = re.sub(r"//[^\n]*", "", block.text)  # a comment may name launch_self()
    return bool(re.search(r"\bint\s+main\s*\(", code) and JOINS.search(code) and not SELF_LAUNCH.search(code))


def check_index(source):
    docs = os.path.join(source, "docs")
    index = open(os.path.join(docs, "index.md"), encoding="utf-8").read()
    pages = sorted(p for p in os.listdir(docs) if p.endswith(".md") and p != "index.md")
    return [f"docs/index.md: no link to {p}" for p in pages if f"]({p})" not in index]


HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")  # ATX; 4+ spaces is code
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
LINK = re.compile(r"\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def prose_lines(path):
    """(line number, text) of a Markdown file's lines outside fenced and indented code blocks."""
    fence = None
    for number, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fence = stripped[:3]
            continue
        if line.startswith("    ") or line.startswith("\t"):
            continue
        yield number, line


def slug(heading):
    """GitHub's anchor for a heading: the text as rendered (code spans keep their text, links
    their label), lowercased, every character but letters, digits, '_', '-' and spaces dropped,
    spaces turned into '-'."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


# GitHub's anchors for headings of these docs' kinds, as github.com renders them; check_anchors()
# first checks slug() against them, so a change to it that breaks the rules fails here.
SLUG_EXAMPLES = {
    "Under Slurm and mpirun": "under-slurm-and-mpirun",
    "The gloo address (the analogue of `GLOO_SOCKET_IFNAME`)": "the-gloo-address-the-analogue-of-gloo_socket_ifname",
    "Not done / known limits": "not-done--known-limits",
    "C++20 & CUDA: 3.5 GB/s, [linked](x.md) *emphasis*": "c20--cuda-35-gbs-linked-emphasis",
    "Point-to-point and all-to-all against Open MPI": "point-to-point-and-all-to-all-against-open-mpi",
}


def anchors(path):
    """Every anchor of a page: its headings' slugs (a repeated one gets -1, -2, ... as on
    GitHub) and explicit <a name/id="..."> anchors."""
    found, seen = set(), {}
    for _, line in prose_lines(path):
        found.update(HTML_ANCHOR.findall(line))
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def check_anchors(source, files):
    """Links to a section of these pages (`page.md#anchor`, `#anchor`) must name one that exists."""
    problems = [f"doc_blocks.py: slug({heading!r}) is {slug(heading)!r}, GitHub's anchor is {want!r}"
                for heading, want in SLUG_EXAMPLES.items() if slug(heading) != want]
    cache = {}
    for rel in files:
        for number, line in prose_lines(os.path.join(source, rel)):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or "#" not in target:
                    continue  # a URL, or a whole page
                page, anchor = target.split("#", 1)
                if not page.endswith(".md") and page:
                    continue  # a source file's line, a directory
                linked = os.path.normpath(os.path.join(os.path.dirname(rel), page)) if page else rel
                full = os.path.join(source, linked)
                if not os.path.isfile(full):
                    problems.append(f"{rel}:{number}: link '{target}': no page {linked}")
                    continue
                if linked not in cache:
                    cache[linked] = anchors(full)
                if anchor not in cache[linked]:
                    problems.append(f"{rel}:{number}: link '{target}': {linked} has no heading with anchor "
                                    f"'#{anchor}'")
    return problems


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

    failures = check_index(args.source) + check_anchors(args.source, files)
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
        ran = f", ran on {' and '.join(map(str, RUN_NPROCS))} ranks" if block.kind == "compile" and runs_on_any_count(block) else ""
        print(f"{'ok  ' if problem is None else 'FAIL'} {block.where()} ({block.kind}{ran})", flush=True)
        if problem is not None:
            failures.append(f"{block.where()}: {problem}")
    print(f"{len(blocks)} marked blocks in {len(files)} files")
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
