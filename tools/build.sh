#!/usr/bin/env bash
# Configures and builds fastrun into BUILD_DIR (default build/). Extra args go to cmake.
#   tools/build.sh                      release-ish build with the tests
#   BUILD_DIR=build-asan tools/build.sh -DFASTRUN_SANITIZE=address
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build_dir" -G Ninja -DFASTRUN_WERROR=ON "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
