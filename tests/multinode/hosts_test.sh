#!/usr/bin/env bash
# The separate-hosts harness itself (hosts.sh): hosts are really apart, and nothing of a run
# outlives it, even when it is SIGKILLed.
#   hosts_test.sh CASE      (CASE: one of the case_* functions below)
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=tests/multinode/hosts.sh
source "$here/hosts.sh"
# shellcheck source=tests/multinode/checks.sh
source "$here/checks.sh"
hosts_skip_unless_able

case_apart() {
  hosts_up n0 n1 || exit 1
  expect_eq "$(on_host n0 hostname)" n0 "n0's host name"
  expect_eq "$(on_host n1 hostname)" n1 "n1's host name"
  expect_ne "$(hostname)" n0 "the machine's host name"
  on_host n0 touch /dev/shm/frmn-probe
  expect_eq "$(on_host n0 ls /dev/shm)" frmn-probe "n0's /dev/shm"
  expect_eq "$(on_host n1 ls /dev/shm)" "" "n1's /dev/shm"
  [[ -e /dev/shm/frmn-probe ]] && fail "n0's /dev/shm entry shows in the machine's /dev/shm"
  expect_eq "$(on_host n1 getent hosts n0 | awk '{print $1}')" "$(host_addr n0)" "n0's address as n1 resolves it"
  expect_eq "$(ip -o addr show | grep -c "$HOSTS_NET\.")" 0 "the machine's addresses in the test /24"
  expect_eq "$(ip -o link show | grep -c 'br0\|veth')" 0 "the machine's test links"
  # The bridge carries TCP between the hosts: a store of a one-node job on n0 seen from n1 is
  # left to the netns tests; here just the link layer.
  on_host n0 ip neigh flush all
  on_host n1 bash -c "exec 3<>/dev/tcp/$(host_addr n0)/1" 2>/dev/null
  expect_contains <(on_host n1 ip neigh show "$(host_addr n0)") "lladdr" "n0's MAC address as n1 learnt it"
  hosts_down
  expect_eq "$(ip netns list | grep -c "^$HOSTS_RUN-")" 0 "namespaces of this run after hosts_down"
}

# A test SIGKILLed with its whole process group (as CTest's timeout does): its watchdog removes
# its hosts and what runs on them.
case_sigkilled() {
  local dir victim run sleeper t0 i
  dir=$(mktemp -d)
  setsid bash -c 'source "$1"; hosts_up n0 n1 || exit 1; start_on_host n0 sleep 300 & echo $! >"$2/sleeper"; sleep 300' \
    victim "$here/hosts.sh" "$dir" </dev/null >"$dir/out" 2>&1 &
  victim=$!
  run="$HOSTS_PREFIX-$victim"
  for ((i = 0; i < 200; i++)); do
    [[ -s $dir/sleeper ]] && break
    sleep 0.05
  done
  sleeper=$(cat "$dir/sleeper" 2>/dev/null)
  [[ -n $sleeper ]] || fail "the victim never started its hosts: $(cat "$dir/out")"
  expect_eq "$(ip netns list | grep -c "^$run-")" 3 "the victim's namespaces (2 hosts, 1 switch)"
  t0=$(now)
  kill -KILL -- "-$victim"
  wait "$victim" 2>/dev/null
  for ((i = 0; i < 200; i++)); do
    # The watchdog removes the namespaces, then the directory: wait for all of it.
    [[ -z $(ip netns list | grep "^$run-") ]] && ! kill -0 "$sleeper" 2>/dev/null &&
      [[ -z $(ls -d /tmp/"$run".* 2>/dev/null) ]] && break
    sleep 0.05
  done
  expect_eq "$(ip netns list | grep "^$run-" | tr '\n' ' ')" "" "the victim's namespaces 10 s after its SIGKILL"
  kill -0 "$sleeper" 2>/dev/null && fail "pid $sleeper, started on the victim's host n0, still runs"
  expect_eq "$(ls -d /tmp/"$run".* 2>/dev/null)" "" "the victim's temporary directory"
  echo "sigkilled: everything gone $(elapsed "$t0") s after the SIGKILL"
  rm -rf "$dir"
}

# A namespace of a run that is gone is swept by the next hosts_up.
case_stale_swept() {
  local dead stale sleeper said
  sleep 0 & dead=$!
  wait "$dead"
  stale="$HOSTS_PREFIX-$dead-n0"
  ip netns add "$stale" || { fail "could not add $stale"; return; }
  ip netns exec "$stale" sleep 300 </dev/null >/dev/null 2>&1 &
  sleeper=$!
  said=$(mktemp)
  hosts_up n0 2>"$said" || exit 1
  expect_eq "$(ip netns list | grep -c "^$stale")" 0 "the stale namespace after hosts_up"
  expect_contains "$said" "removing the namespaces of $HOSTS_PREFIX-$dead (its test, pid $dead, is gone)" \
    "hosts_up's note"
  wait_gone "$sleeper" 5 || fail "pid $sleeper in the stale namespace still runs"
  rm -f "$said"
}

# The names of this run's namespaces removed by someone else mid-test (an `ip netns del` from
# another job's clean-up): the namespaces live on while processes are in them, and hosts_down
# still stops those processes (found by the namespaces' recorded inodes).
case_names_deleted() {
  local sleeper_a sleeper_b ns
  hosts_up n0 n1 || exit 1
  start_on_host n0 sleep 301 </dev/null >/dev/null 2>&1 &
  sleeper_a=$!
  sleeper_b=$(on_host n1 sh -c 'setsid sleep 302 </dev/null >/dev/null 2>&1 & echo $!')
  for ns in $(ip netns list | awk '{print $1}' | grep "^$HOSTS_RUN-"); do ip netns del "$ns"; done
  expect_eq "$(ip netns list | grep -c "^$HOSTS_RUN-")" 0 "names of this run after the foreign ip netns del"
  hosts_down || fail "hosts_down failed"
  wait_gone "$sleeper_a" 5 || fail "pid $sleeper_a, started on n0, still runs"
  wait_gone "$sleeper_b" 5 || fail "pid $sleeper_b, started on n1 in its own session, still runs"
}

case_name=$1
declare -F "case_$case_name" >/dev/null || { echo "no case '$case_name'" >&2; exit 2; }
"case_$case_name"
report
