#!/usr/bin/env bash
# bench/multinode_launch.sh on tiny sizes, on real separate hosts (network namespaces):
#   multinode_launch_test.sh table BUILD_DIR     prints its table row, and leaves no namespace
#   multinode_launch_test.sh sigterm BUILD_DIR   SIGTERM mid-run stops it and removes the hosts
# Root only (hosts.sh): elsewhere it skips (test_support/skip.sh) and CTest reports Skipped.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=tests/multinode/hosts.sh
source "$here/../multinode/hosts.sh"
# shellcheck source=tests/multinode/checks.sh
source "$here/../multinode/checks.sh"
case_name=$1 build=$2
hosts_skip_unless_able
script=$here/../../bench/multinode_launch.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT

namespaces_of() { ip netns list | awk '{print $1}' | grep -E "^$HOSTS_PREFIX-$1-" | tr '\n' ' '; }

case $case_name in
table)
  timeout 60 "$script" "$build" --ranks 2 --reps 1 >"$out" 2>&1 &
  pid=$!
  wait "$pid"
  code=$?
  cat "$out"
  expect_eq "$code" 0 "the script's exit status"
  grep -q "^note: each node on its own host, master $HOSTS_NET.11$" "$out" || fail "no note of separate hosts"
  grep -Eq '^2 x 2 +4 \| +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ \| +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+$' "$out" ||
    fail "no table row for 2 nodes x 2 ranks"
  ;;
sigterm)
  "$script" "$build" --ranks 16 --reps 100 >"$out" 2>&1 &
  pid=$!
  for ((i = 0; i < 100; i++)); do
    [[ -n $(namespaces_of "$pid") ]] && grep -q '^nodes x ranks' "$out" && break
    sleep 0.1
  done
  [[ -n $(namespaces_of "$pid") ]] || fail "the script made no hosts within 10 s: $(cat "$out")"
  sleep 0.5
  t0=$(now)
  kill -TERM "$pid"
  wait_exit "$pid" 15 code
  echo "SIGTERM to exit: $(elapsed "$t0") s"
  expect_eq "$code" 143 "the script's exit status after SIGTERM"
  ;;
*)
  echo "multinode_launch_test.sh: unknown case '$case_name'; accepted: table, sigterm" >&2
  exit 2
  ;;
esac
# The script waits for the bench before it exits, and removes its hosts with everything on them.
left=$(namespaces_of "$pid")
[[ -z $left ]] || fail "namespaces left behind: $left"
report "$out"
