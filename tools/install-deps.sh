#!/usr/bin/env bash
# Installs what fastrun needs on Debian 12 (run as root). Idempotent; quiet unless it fails.
# CUDA/NCCL are optional and never installed here: the build uses them when it finds them.
set -euo pipefail
# iproute2, slurm-wlm, munge: the separate-hosts and Slurm tests (tests/multinode); openmpi-bin:
# mpirun for the tests of jobs under Open MPI (tests/launcher/cluster_engine_test.cpp);
# libtorch-dev, python3-torch: LibTorch (CPU) for the optional component (torch/, fastrun::torch)
# and the c10d program run under fastrun; the real torchrun, torch.distributed.TCPStore server
# (fastrun's c10d client is tested against it) and PyTorch's own DDP that the torch tests and
# fastrun-bench-torch compare with (docs/torchrun.md, docs/torch.md, docs/torch-data.md). The build and every other
# test work without them.
pkgs=(g++ cmake ninja-build pkg-config libboost-dev libfmt-dev catch2 libgloo-dev
  iproute2 slurm-wlm munge openmpi-bin libtorch-dev python3-torch)
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
