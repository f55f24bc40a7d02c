#!/usr/bin/env bash
# Stages the GPU checks' programs for a GPU machine that has a driver, CUDA 13 and NCCL but none
# of the Debian development packages (a bare CUDA image cannot configure the project):
#   1. builds them here with CUDA on and the CPU model off (BUILD_DIR, build-gpu by default);
#   2. copies each program and fastrun library, debug info stripped, to DEST/<BUILD_DIR>/ at the
#      same relative path, and the libraries such an image lacks (fmt, hwloc and its libudev, the CUDA runtime built
#      against, and gloo with what it links) to DEST/lib;
#   3. writes DEST/origin: the build directory's absolute path, which the programs carry (RUNPATH,
#      and the launcher path that test_ddp and test_nccl_ranks start).
# On the GPU machine, from the repository root: GPU_CHECKS_PREBUILT=DEST tools/gpu_checks.sh
# Usage: tools/gpu_stage.sh DEST
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: tools/gpu_stage.sh DEST}
build_dir=${BUILD_DIR:-build-gpu}
programs=(tools/fastrun tests/gpu/fastrun-nccl-checks tests/backend/test_backend tests/ddp/test_ddp
  tests/gpu/test_nccl_ranks examples/train_mlp/train_mlp examples/train_mlp/train_mlp_cuda
  examples/train_mlp/train_mlp_compare)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build_dir" -G Ninja -DFASTRUN_WITH_CUDA=ON -DFASTRUN_CUDA_MODEL=OFF \
  -DFASTRUN_WITH_TORCH=OFF -DFASTRUN_WERROR=ON "${launcher[@]}" >"$build_dir.configure.log"
grep -q "NCCL ON" "$build_dir.configure.log" || { echo "configure did not find CUDA and NCCL" >&2; exit 1; }
targets=()
for p in "${programs[@]}"; do targets+=("$(basename "$p")"); done
cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}"
rm -rf "$dest"; mkdir -p "$dest/lib"
for p in "${programs[@]}" $(cd "$build_dir" && ls */libfastrun_*.so*); do
  mkdir -p "$dest/$build_dir/$(dirname "$p")"
  if [ -L "$build_dir/$p" ]; then cp -P "$build_dir/$p" "$dest/$build_dir/$p"  # a soname link
  else strip --strip-debug -o "$dest/$build_dir/$p" "$build_dir/$p"; fi
done
# gloo and what it links come through the gloo backend's module, which the programs load at run
# time (dlopen): the CPU reference trainer of the checks' step 6 runs on gloo.
resolved=("${programs[@]/#/$build_dir/}" "$build_dir"/runtime/libfastrun_gloo-*.so)
for lib in libfmt.so.9 libhwloc.so.15 libudev.so.1 libcudart.so.13 \
    libgloo.so.0 libhiredis.so.0.14 libibverbs.so.1 libnl-route-3.so.200 libnl-3.so.200; do
  # the copy the build resolved (ldd), not the first one ldconfig lists
  path=$(ldd "${resolved[@]}" | awk -v l="$lib" '$1 == l && !found {print $3; found = 1}')
  [ -n "$path" ] || { echo "gpu_stage: $lib is not linked by the staged programs" >&2; exit 1; }
  cp -L "$path" "$dest/lib/"
done
(cd "$build_dir" && pwd) >"$dest/origin"
du -sh "$dest"
