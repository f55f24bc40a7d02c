# Checks and bounded waits for the multi-node test scripts (source it from bash). A failed check
# is reported and counted, the script goes on; `report` exits 1 if any failed.
checks_failed=0

fail() {
  echo "FAILED: $*" >&2
  checks_failed=$((checks_failed + 1))
}
expect_eq() { [[ $1 == "$2" ]] || fail "$3: got '$1', expected '$2'"; }
expect_ne() { [[ $1 != "$2" ]] || fail "$3: got '$1', expected anything else"; }
# expect_contains FILE TEXT WHAT
expect_contains() { grep -qF -- "$2" "$1" 2>/dev/null || fail "$3: '$2' not in $(basename "$1"): $(cat "$1" 2>/dev/null)"; }
# expect_below VALUE LIMIT WHAT (decimal numbers)
expect_below() { awk -v v="$1" -v l="$2" 'BEGIN {exit !(v < l)}' || fail "$3: $1, expected under $2"; }

# expect_hosts_gone PID: the run of process PID (a script that made hosts with hosts.sh) left
# no namespace behind.
expect_hosts_gone() {
  local left
  left=$(hosts_of_run "$1")
  [[ -z $left ]] || fail "namespaces left behind: $left"
}

# report [FILE...]: the verdict; on failure the tails of FILEs (the launchers' stderr) first.
report() {
  if ((checks_failed)); then
    (($#)) && tail -n 20 "$@" >&2
    echo "$checks_failed check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
}

# expect_hello_on_two_hosts DIR OUT SOURCE: hello's 4 ranks, started by an engine (SOURCE: slurm,
# openmpi) two per host on hosts n0 and n1, each having written its host to DIR/host-<rank>:
# every rank's host and layout, and the all-reduce 1+2+3+4 over hier (auto, across nodes) across the hosts (in OUT).
expect_hello_on_two_hosts() {
  local dir=$1 out=$2 source=$3 g hosts=(n0 n0 n1 n1) want=("0/2, node 0" "1/2, node 0" "0/2, node 1" "1/2, node 1")
  for g in 0 1 2 3; do
    expect_eq "$(cat "$dir/host-$g" 2>/dev/null)" "${hosts[g]}" "the host of $source's rank $g"
    expect_contains "$out" "hello from rank $g of 4 (local ${want[g]}, from $source)" "rank $g's layout"
    expect_contains "$out" "rank $g: all-reduce of 1..4 = 10 over hier" "rank $g's all-reduce across hosts"
  done
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }

# wait_exit PID LIMIT_S VAR: sets VAR to the exit code of this shell's background child PID;
# after LIMIT_S it is SIGKILLed, reported, and the code is 124. (Not in $(...): a subshell can
# neither wait for this shell's children nor count a failure.)
wait_exit() {
  local pid=$1 limit=$2 i status
  for ((i = 0; i < limit * 20; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    fail "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) still running after $limit s: killed"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    status=124
  else
    wait "$pid"
    status=$?
  fi
  printf -v "$3" '%s' "$status"
}

# wait_for_pidfiles DIR N LIMIT_S: prints the pids in DIR/pid-0..N-1 once all exist.
wait_for_pidfiles() {
  local dir=$1 n=$2 limit=$3 i r pids
  for ((i = 0; i < limit * 20; i++)); do
    pids=""
    for ((r = 0; r < n; r++)); do
      [[ -s $dir/pid-$r ]] && pids+="$(cat "$dir/pid-$r") "
    done
    if [[ $(wc -w <<<"$pids") == "$n" ]]; then
      echo "$pids"
      return 0
    fi
    sleep 0.05
  done
  return 1
}

# wait_gone "PID..." LIMIT_S: true once none of the pids runs.
wait_gone() {
  local pids=$1 limit=$2 i p alive
  for ((i = 0; i < limit * 20; i++)); do
    alive=""
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive+="$p "; done
    [[ -z $alive ]] && return 0
    sleep 0.05
  done
  return 1
}
