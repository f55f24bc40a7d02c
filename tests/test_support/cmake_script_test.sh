#!/usr/bin/env bash
# Runs a cmake -P test script that may skip (test_support/skip.cmake): cmake_script_test.sh CMAKE
# ARGS... The script exits 0 after fastrun_skip(), which leaves the reason in FASTRUN_SKIP_FILE;
# this turns that into the exit code CTest reports as "Skipped". A script that fails fails,
# whatever it wrote before.
set -uo pipefail
cmake=$1
shift
skip_file=$(mktemp "${TMPDIR:-/tmp}/fastrun-skip.XXXXXX") || exit 1
trap 'rm -f "$skip_file"' EXIT
"$cmake" -DFASTRUN_SKIP_FILE="$skip_file" "$@"
rc=$?
if [[ $rc == 0 && -s $skip_file ]]; then
  echo "FASTRUN-SKIPPED: $(cat "$skip_file")"
  exit 77
fi
exit $rc
