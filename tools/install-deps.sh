#!/usr/bin/env bash
# Installs what fastrun needs on Debian 12 (run as root). Idempotent; quiet unless it fails.
# CUDA/NCCL are optional and never installed here: the build uses them when it finds them.
set -euo pipefail
# iproute2, slurm-wlm, munge: the separate-hosts and Slurm tests (tests/multinode); openmpi-bin:
# mpirun for the tests of jobs under Open MPI (tests/launcher/cluster_engine_test.cpp).
# libtorch-dev: the optional LibTorch layer (fastrun::torch, docs/torch-data.md), built when
# found; python3-torch: PyTorch itself, which the LibTorch layer's tests compare against.
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
