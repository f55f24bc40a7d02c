#!/usr/bin/env python3
"""Keeps tools/install-deps.sh and the build's find_package calls in step (issue: a fresh Debian
machine failed to configure because openmpi-bin was installed without libopenmpi-dev).

1. Every find_package in the project's own CMake files (not the consumer projects under
   tests/install/, which look for fastrun itself) names a package of the table below. A
   REQUIRED one must have its Debian package in install-deps' list: in the `build` group when
   the library build needs it, in the full list when only the tests do. An optional one either
   has its package in the full list, or has none (CUDA: never installed here) and must then be
   QUIET and not REQUIRED, so that its absence never stops the configure.
2. A half-installed package must not stop the configure: an mpicxx that names an include
   directory which does not exist (openmpi-bin without libopenmpi-dev) is put first on PATH and
   the project is configured; it must succeed and say that the Open MPI columns are left out.

usage: deps_in_step.py SOURCE_DIR WORK_DIR GENERATOR
"""
import os
import re
import shutil
import subprocess
import sys

# find_package name -> the Debian package that provides it (None: nothing to install).
PACKAGES = {
    "Threads": None,          # the C library
    "fmt": "libfmt-dev",
    "Boost": "libboost-dev",
    "Gloo": "libgloo-dev",
    "nlohmann_json": "nlohmann-json3-dev",
    "CLI11": "libcli11-dev",
    "Catch2": "catch2",
    "Python3": "python3",
    "MPI": "libopenmpi-dev",
    "Torch": "libtorch-dev",
    "CUDAToolkit": None,      # optional and never installed by install-deps (docs/backend-nccl.md)
    "PkgConfig": "pkg-config",
}
# pkg_check_modules module -> the Debian package with its .pc file (checked like find_package).
PKG_CONFIG_MODULES = {
    "hwloc": "libhwloc-dev",
}
# Where the tests' own dependencies are looked for: their packages may be in the full list only.
TEST_ONLY_DIRS = ("tests/", "bench/")


def install_deps_groups(source):
    text = open(os.path.join(source, "tools/install-deps.sh")).read()
    groups = {name: body.split() for name, body in re.findall(r"^(\w+)=\(([^)]*)\)", text, re.M)}
    if "build" not in groups or "tests" not in groups:
        sys.exit(f"deps_in_step: tools/install-deps.sh has no build=(...) and tests=(...) lists: {sorted(groups)}")
    return groups["build"], groups["build"] + groups["tests"]


def find_package_calls(source):
    for root, dirs, files in os.walk(source):
        rel_root = os.path.relpath(root, source)
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))
                   and os.path.join(rel_root, d) not in ("tests/install", "./tests/install")]
        for f in files:
            if f != "CMakeLists.txt" and not f.endswith(".cmake"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, source)
            text = open(path).read()
            for m in re.finditer(r"^\s*find_package\(([^)]*)\)", text, re.M):
                args = m.group(1).split()
                line = text.count("\n", 0, m.start()) + 1
                yield rel, line, args[0], "REQUIRED" in args, "QUIET" in args
            # pkg_check_modules(PREFIX [REQUIRED] [QUIET] [IMPORTED_TARGET] module[>=version]...)
            for m in re.finditer(r"^\s*pkg_check_modules\(([^)]*)\)", text, re.M):
                args = m.group(1).split()
                line = text.count("\n", 0, m.start()) + 1
                for a in args[1:]:
                    if a in ("REQUIRED", "QUIET", "IMPORTED_TARGET", "GLOBAL", "NO_CMAKE_PATH",
                             "NO_CMAKE_ENVIRONMENT_PATH"):
                        continue
                    yield rel, line, "pkg-config:" + re.split(r"[<>=]", a)[0], "REQUIRED" in args, "QUIET" in args


def check_lists(source):
    build, full = install_deps_groups(source)
    errors, seen = [], 0
    for rel, line, name, required, quiet in find_package_calls(source):
        seen += 1
        where = f"{rel}:{line}: find_package({name})"
        if name.startswith("pkg-config:"):
            module = name.split(":", 1)[1]
            where = f"{rel}:{line}: pkg_check_modules({module})"
            if module not in PKG_CONFIG_MODULES:
                errors.append(f"{where}: not in tests/install/deps_in_step.py's PKG_CONFIG_MODULES; add its "
                              "Debian package there and to tools/install-deps.sh")
                continue
            pkg = PKG_CONFIG_MODULES[module]
            if required and not rel.startswith(TEST_ONLY_DIRS) and pkg not in build:
                errors.append(f"{where} is REQUIRED by the library build, but '{pkg}' is not in "
                              f"install-deps' build group ({' '.join(build)})")
            elif pkg not in full:
                errors.append(f"{where}: '{pkg}' is not in tools/install-deps.sh ({' '.join(full)})")
            continue
        if name not in PACKAGES:
            errors.append(f"{where}: not in tests/install/deps_in_step.py's table; add its Debian "
                          "package there and to tools/install-deps.sh")
            continue
        pkg = PACKAGES[name]
        test_only = rel.startswith(TEST_ONLY_DIRS)
        if pkg is None:
            if name != "Threads" and (required or not quiet):
                errors.append(f"{where}: nothing installs it, so it must be QUIET and not REQUIRED")
        elif required and not test_only and pkg not in build:
            errors.append(f"{where} is REQUIRED by the library build, but '{pkg}' is not in "
                          f"install-deps' build group ({' '.join(build)})")
        elif pkg not in full:
            errors.append(f"{where}: '{pkg}' is not in tools/install-deps.sh ({' '.join(full)})")
    if seen < 5:
        errors.append(f"found only {seen} find_package calls: the scan is broken")
    print(f"deps_in_step: {seen} find_package calls checked against install-deps")
    return errors


def check_half_installed_mpi(source, work, generator):
    shutil.rmtree(work, ignore_errors=True)
    fake_bin = os.path.join(work, "bin")
    os.makedirs(fake_bin)
    missing = os.path.join(work, "no-such-openmpi/include")
    for name in ("mpicxx", "mpicxx.openmpi", "mpicc", "mpiexec", "mpirun"):
        with open(os.path.join(fake_bin, name), "w") as f:
            # What openmpi-bin's wrapper answers without libopenmpi-dev: include dirs that are not there.
            f.write(f"#!/bin/sh\ncase \"$1\" in --showme:incdirs) echo {missing} ;; "
                    f"--showme*) echo -I{missing} ;; *) exit 1 ;; esac\n")
        os.chmod(os.path.join(fake_bin, name), 0o755)
    env = dict(os.environ, PATH=fake_bin + os.pathsep + os.environ["PATH"])
    cmd = ["cmake", "-S", source, "-B", os.path.join(work, "build"), "-G", generator,
           "-DFASTRUN_BUILD_TESTS=OFF", "-DFASTRUN_WITH_TORCH=OFF", "-DFASTRUN_WITH_CUDA=OFF"]
    run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    errors = []
    if run.returncode != 0:
        errors.append("configure with a half-installed Open MPI (mpicxx naming a missing include "
                      f"directory) failed:\n{run.stdout[-3000:]}")
    elif "the Open MPI columns are left out" not in run.stdout:
        errors.append(f"configure with a half-installed Open MPI did not say it left MPI out:\n{run.stdout[-3000:]}")
    else:
        print("deps_in_step: a half-installed Open MPI is left out, the configure goes on")
    shutil.rmtree(work, ignore_errors=True)
    return errors


def main():
    source, work, generator = sys.argv[1:4]
    errors = check_lists(source) + check_half_installed_mpi(source, work, generator)
    for e in errors:
        print(f"deps_in_step: {e}", file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
