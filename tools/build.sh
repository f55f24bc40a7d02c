#!/usr/bin/env bash
# Configures and builds fastrun into BUILD_DIR (default build/). Extra args go to cmake.
#   tools/build.sh                      release-ish build with the tests
#   BUILD_DIR=build-asan tools/build.sh -DFASTRUN_SANITIZE=address
#   BUILD_TARGETS="fastrun train_mlp" tools/build.sh -DFASTRUN_BUILD_TESTS=OFF   (tools/demo.sh)
# The tests are switched on explicitly (a later -D wins), since tools/demo.sh configures the same
# build/ without them.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# ccache caches a compile that uses a precompiled header (the test binaries' <catch2/catch.hpp>,
# the LibTorch executables' <torch/torch.h>) only with this sloppiness; the header is made in the
# same build, so its file times are always recent.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
cmake -S . -B "$build_dir" -G Ninja -DFASTRUN_WERROR=ON -DFASTRUN_BUILD_TESTS=ON "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
