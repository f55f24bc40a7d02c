#!/usr/bin/env bash
# Installs what fastrun needs on Debian 12 (run as root). Idempotent; quiet unless it fails.
#   tools/install-deps.sh          everything: the build, the tests and their peers (tools/test.sh)
#   tools/install-deps.sh build    only what builds the libraries, the fastrun command and the
#                                  examples (tools/demo.sh: the main job needs nothing more)
# CUDA/NCCL are optional and never installed here: the build uses them when it finds them.
# tests/install/deps_in_step.py keeps these lists and every find_package of the build in step.
set -euo pipefail
group=${1:-all}
# make: CMake's default generator, for the README's build-and-install recipe (tools/ use ninja).
# libcli11-dev: the flags of the fastrun command, the examples and the benchmarks (headers only);
# nlohmann-json3-dev: the sampler states and the store's records (headers only);
# libhwloc-dev: the machine's NUMA nodes and cores for the launcher's --bind (found by pkg-config).
build=(g++ cmake make ninja-build pkg-config libboost-dev libfmt-dev libgloo-dev libcli11-dev nlohmann-json3-dev libhwloc-dev)
# catch2: the test binaries; python3: the docs and install tests' scripts (tests/docs, tests/install).
# iproute2, slurm-wlm, munge: the separate-hosts and Slurm tests (tests/multinode);
# openmpi-bin, libopenmpi-dev: mpirun for the tests of jobs under Open MPI
# (tests/launcher/cluster_engine_test.cpp) and the Open MPI columns of fastrun-bench (bench/mpi:
# find_package(MPI) needs the headers; openmpi-bin alone leaves FindMPI an include directory
# that does not exist);
# libtorch-dev, python3-torch: LibTorch (CPU) for the optional component (torch/, fastrun::torch)
# and the c10d program run under fastrun; the real torchrun, torch.distributed.TCPStore server
# (fastrun's c10d client is tested against it) and PyTorch's own DDP that the torch tests and
# fastrun-bench-torch compare with (docs/torchrun.md, docs/torch.md, docs/torch-data.md);
# ccache: tools/build.sh compiles through it when it is there, so tools/test.sh's four builds
# compile only what changed since the last run (its cache: CCACHE_DIR, default ~/.cache/ccache).
tests=(catch2 python3 iproute2 slurm-wlm munge openmpi-bin libopenmpi-dev libtorch-dev python3-torch ccache)
case $group in
  build) pkgs=("${build[@]}") ;;
  all) pkgs=("${build[@]}" "${tests[@]}") ;;
  *) echo "install-deps: unknown group '$group' (accepted: build, all)" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
