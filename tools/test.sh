#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. install what is needed, build with warnings as errors, run every test;
#   2. rebuild the tests under ASan+UBSan and run them again;
#   3. rebuild the threaded parts under TSan and run their tests.
# FASTRUN_TEST_STAGES picks stages (default "main asan tsan").
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
stages=${FASTRUN_TEST_STAGES:-main asan tsan}
jobs=$(nproc)

run_ctest() {  # run_ctest BUILD_DIR [ctest args...]
  local dir=$1; shift
  (cd "$dir" && ctest --output-on-failure --timeout 180 -j"$jobs" "$@")
}

for stage in $stages; do
  case $stage in
    main)
      echo "== test: main build"
      tools/build.sh
      run_ctest build
      ;;
    asan)
      echo "== test: ASan+UBSan build"
      BUILD_DIR=build-asan tools/build.sh -DFASTRUN_SANITIZE=address -DFASTRUN_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        run_ctest build-asan -LE no_sanitizer
      ;;
    tsan)
      # TSan does not support threads started after a multi-threaded fork, so this stage runs
      # the test cases tagged [tsan]: the threaded parts exercised inside one process.
      echo "== test: TSan build (threaded parts, cases tagged [tsan])"
      BUILD_DIR=build-tsan BUILD_TARGETS="test_runtime test_store test_launcher test_backend test_ddp" \
        tools/build.sh -DFASTRUN_SANITIZE=thread -DFASTRUN_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
      for bin in build-tsan/tests/*/test_*; do
        [ -x "$bin" ] || continue
        "$bin" --list-test-names-only "[tsan]" | grep -q . || continue
        echo "-- $bin [tsan]"
        TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "$bin" "[tsan]"
      done
      ;;
    *) echo "tools/test.sh: unknown stage '$stage' (accepted: main asan tsan)" >&2; exit 2 ;;
  esac
done
echo "== test: all stages passed ($stages)"
