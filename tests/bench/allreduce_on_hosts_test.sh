#!/usr/bin/env bash
# bench/allreduce_on_hosts.sh (docs/benchmarks.md, docs/backend-hier.md) on small sizes, on real
# separate hosts (network namespaces):
#   allreduce_on_hosts_test.sh allreduce BUILD_DIR   hier's and gloo's tables, then Open MPI's
#                                                    lines (or the note that it is not there)
#   allreduce_on_hosts_test.sh broadcast BUILD_DIR   OP=broadcast: both tables, Open MPI's note
#   allreduce_on_hosts_test.sh allgather BUILD_DIR   OP=allgather: the same
#   allreduce_on_hosts_test.sh rate BUILD_DIR        RATE=1gbit: the links get the rate, the table
#   allreduce_on_hosts_test.sh repeat BUILD_DIR      REPEAT=2: two runs, then each column's median
#                                                    and range per size
#   allreduce_on_hosts_test.sh failed BUILD_DIR      a bench that fails: exit 1, its error shown
#   allreduce_on_hosts_test.sh bad BUILD_DIR         bad settings: exit 2 naming the value and what
#                                                    is accepted, before any host is made (no root needed)
# Every case checks that no namespace of the run is left. Root only, but for `bad`: elsewhere it
# skips (test_support/skip.sh) and CTest reports Skipped.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=tests/multinode/hosts.sh
source "$here/../multinode/hosts.sh"
# shellcheck source=tests/multinode/checks.sh
source "$here/../multinode/checks.sh"
case_name=$1 build=$2
script=$here/../../bench/allreduce_on_hosts.sh
out=$(mktemp) fake=$(mktemp -d)
trap 'rm -rf "$out" "$fake"' EXIT
row='[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+$'  # time, algbw, busbw, memcpy
pid=""

# run_script RC LIMIT [VAR=VALUE...]: the script on $build with those settings, within LIMIT s.
run_script() {
  local want_code=$1 limit=$2
  shift 2
  env "$@" timeout "$limit" bash "$script" "$build" >"$out" 2>&1 &
  pid=$!
  wait "$pid"
  local code=$?
  cat "$out"
  expect_eq "$code" "$want_code" "the script's exit status"
}

# expect_table BACKEND SIZE...: the table of BACKEND has a row for each size ("512 KiB").
expect_table() {
  local backend=$1 size
  shift
  grep -q "^# fastrun-bench [a-z]*: backend $backend, 4 ranks" "$out" || fail "no table of $backend"
  for size in "$@"; do
    awk -v b="backend $backend," '/^# fastrun-bench/ {on = index($0, b) > 0} on' "$out" |
      grep -Eq "^ +$size +[0-9]+ +[0-9]+ +$row" || fail "no row of $size in $backend's table"
  done
}

if [[ $case_name != bad ]]; then hosts_skip_unless_able; fi
small=(MIN=4K MAX=8K ITERS=3 ROUNDS=1)
case $case_name in
allreduce)
  # Open MPI yields when idle, as with more ranks than cores it must to finish in seconds.
  run_script 0 120 MIN=512K MAX=1M ITERS=3 ROUNDS=1 MPI_ARGS="--mca mpi_yield_when_idle 1"
  expect_contains "$out" "# 2 hosts x 2 ranks, rate unlimited (veth);" "the header"
  expect_table hier "512 KiB" "1 MiB"
  expect_table gloo "512 KiB" "1 MiB"
  if command -v mpirun >/dev/null && [[ -x $build/bench/fastrun-mpi-allreduce ]]; then
    grep -Eq '^b2b 524288 [0-9.e-]+$' "$out" || fail "no Open MPI line for 512 KiB"
    grep -Eq '^b2b 1048576 [0-9.e-]+$' "$out" || fail "no Open MPI line for 1 MiB"
  else
    expect_contains "$out" "# Open MPI: mpirun or $build/bench/fastrun-mpi-allreduce missing" "the note"
  fi
  ;;
broadcast | allgather)
  run_script 0 120 OP="$case_name" "${small[@]}"
  expect_table hier "4 KiB" "8 KiB"
  expect_table gloo "4 KiB" "8 KiB"
  grep -q "^# fastrun-bench $case_name: backend hier" "$out" || fail "the table is not $case_name's"
  expect_contains "$out" "# Open MPI: only its all-reduce is timed here (fastrun-mpi-allreduce)" "the note"
  ;;
rate)
  run_script 0 120 RATE=1gbit BACKENDS=hier MPI=no "${small[@]}"
  expect_contains "$out" "# 2 hosts x 2 ranks, rate 1gbit;" "the header"
  expect_table hier "4 KiB" "8 KiB"
  ;;
repeat)
  # Sizes below and at 1 KiB: the bench prints "512 B", which the spread reads as bytes.
  run_script 0 120 REPEAT=2 "${small[@]}" MIN=512 MAX=1K MPI=no
  expect_contains "$out" "# run 2 of 2" "the second run"
  [[ $(grep -c '^# fastrun-bench allreduce: backend hier' "$out") == 2 ]] || fail "not two tables of hier"
  expect_contains "$out" "# spread over 2 runs in turn, µs per call: median [min-max]" "the spread's header"
  grep -Eq '^#     size +hier +gloo$' "$out" || fail "the spread's columns are not hier and gloo"
  for size in "512 B" "1 KiB"; do
    grep -Eq "^ +$size( +[0-9]+\.[0-9] \[[0-9]+\.[0-9]-[0-9]+\.[0-9]\]){2}$" "$out" || fail "no spread row of $size"
  done
  ;;
failed)
  # A build whose bench fails at once, under the real launcher.
  mkdir -p "$fake/bench" "$fake/tools"
  ln -s "$(readlink -f "$build/tools/fastrun")" "$fake/tools/fastrun"
  printf '#!/bin/sh\necho "bench broke on purpose" >&2\nexit 3\n' >"$fake/bench/fastrun-bench"
  chmod +x "$fake/bench/fastrun-bench"
  build=$fake
  run_script 1 120 BACKENDS=hier MPI=no "${small[@]}"
  expect_contains "$out" "backend hier failed:" "the failure"
  expect_contains "$out" "bench broke on purpose" "the bench's own error"
  ;;
bad)
  for setting in HOSTS=1:"HOSTS=1; accepted: 2 to 16" PER_HOST=x:"PER_HOST=x; accepted: 1 to 64" \
    ROUNDS=0:"ROUNDS=0; accepted: 1 to 100" ITERS=-3:"ITERS=-3; accepted: 1 to 100000" \
    REPEAT=1x:"REPEAT=1x; accepted: 1 to 100" \
    MIN=4Q:"MIN=4Q; accepted: a size in bytes" MIN=8K:"MIN=8K above MAX=4K; accepted: MIN at most MAX" \
    OP=reduce:"OP=reduce; accepted: allreduce, broadcast, allgather" \
    BACKENDS=shm:"BACKENDS=shm; accepted: hier, gloo, auto" MPI=maybe:"MPI=maybe; accepted: yes, no" \
    RATE=fast:"RATE=fast; accepted: a tc rate"; do
    max=MAX=64M
    [[ ${setting%%:*} == MIN=8K ]] && max=MAX=4K
    run_script 2 30 "${setting%%:*}" "$max"
    expect_contains "$out" "allreduce_on_hosts.sh: ${setting#*:}" "the error for ${setting%%:*}"
    [[ -z $(hosts_of_run "$pid") ]] || fail "${setting%%:*} made hosts before it was refused"
  done
  ;;
*)
  echo "allreduce_on_hosts_test.sh: unknown case '$case_name'; accepted: allreduce, broadcast, allgather, rate, repeat, failed, bad" >&2
  exit 2
  ;;
esac
# The script removes its hosts with everything on them, also when a part failed.
expect_hosts_gone "$pid"
report "$out"
