#!/usr/bin/env bash
# bench/on_hosts.sh on tiny sizes, on real separate hosts (network namespaces):
#   on_hosts_test.sh table BUILD_DIR     `launch` prints its table row, and leaves no namespace
#   on_hosts_test.sh restart BUILD_DIR   `restart` prints its row: a rank of host n1 died and the
#                                        job came back through join() on both hosts
#   on_hosts_test.sh sigterm BUILD_DIR   SIGTERM mid-run stops it and removes the hosts
# Root only (hosts.sh): elsewhere it skips (test_support/skip.sh) and CTest reports Skipped.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=tests/multinode/hosts.sh
source "$here/../multinode/hosts.sh"
# shellcheck source=tests/multinode/checks.sh
source "$here/../multinode/checks.sh"
case_name=$1 build=$2
hosts_skip_unless_able
script=$here/../../bench/on_hosts.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The script's SUBJECT on 2 hosts x 2 ranks, one run, within LIMIT s: exit 0, the note of separate
# hosts, and a table row matching ROW.
expect_table() {
  local subject=$1 limit=$2 row=$3
  shift 3
  timeout "$limit" "$script" "$subject" "$build" --ranks 2 --reps 1 "$@" >"$out" 2>&1 &
  pid=$!
  wait "$pid"
  local code=$?
  cat "$out"
  expect_eq "$code" 0 "the script's exit status"
  grep -q "^note: each node on its own host, master $HOSTS_NET.11$" "$out" || fail "no note of separate hosts"
  grep -Eq "$row" "$out" || fail "no table row for 2 nodes x 2 ranks"
}

case $case_name in
table)
  expect_table launch 60 '^2 x 2 +4 \| +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ \| +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+$'
  ;;
restart)
  # fastrun only (--python none): torchrun's column is measured by hand (docs/benchmarks.md).
  expect_table restart 120 '^  2 x 2 \| +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ \| +- +- +- +- *$' --python none
  ;;
sigterm)
  "$script" launch "$build" --ranks 16 --reps 100 >"$out" 2>&1 &
  pid=$!
  for ((i = 0; i < 100; i++)); do
    [[ -n $(hosts_of_run "$pid") ]] && grep -q '^nodes x ranks' "$out" && break
    sleep 0.1
  done
  [[ -n $(hosts_of_run "$pid") ]] || fail "the script made no hosts within 10 s: $(cat "$out")"
  sleep 0.5
  t0=$(now)
  kill -TERM "$pid"
  wait_exit "$pid" 15 code
  echo "SIGTERM to exit: $(elapsed "$t0") s"
  expect_eq "$code" 143 "the script's exit status after SIGTERM"
  ;;
*)
  echo "on_hosts_test.sh: unknown case '$case_name'; accepted: table, restart, sigterm" >&2
  exit 2
  ;;
esac
# The script waits for the bench before it exits, and removes its hosts with everything on them.
expect_hosts_gone "$pid"
report "$out"
