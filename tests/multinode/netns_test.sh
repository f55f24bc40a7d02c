#!/usr/bin/env bash
# One fastrun per host, on separate hosts made of network namespaces (hosts.sh): each host has
# its own address, host name and /dev/shm, so nothing passes between the nodes that real
# machines would not share (the TCP store, gloo, failure propagation all go over the bridge).
# The mpirun_* cases start the job with mpirun on n0, reaching n1 through an rsh agent that
# enters n1's namespaces (hosts_rsh_agent), as ssh would reach another machine.
#   netns_test.sh CASE FASTRUN SPARRING_PARTNER HELLO [C10D_ALLREDUCE [TRAIN_MLP TRAIN_MLP_COMPARE [ALLREDUCE_BITS]]]
# CASE is one of the functions named case_* below; CTest runs each as its own test.
# Skips (test_support/skip.sh; CTest: Skipped) when not root (and, for mpirun_*, without Open MPI).
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=tests/multinode/hosts.sh
source "$here/hosts.sh"
# shellcheck source=tests/multinode/checks.sh
source "$here/checks.sh"

case_name=$1 fastrun=$2 partner=$3 hello=$4 c10d=${5:-} train_mlp=${6:-} train_mlp_compare=${7:-} bits=${8:-}
hosts_skip_unless_able
if [[ ($case_name == c10d_allreduce || $case_name == store_only_c10d) && -z $c10d ]]; then
  fastrun_skip "tests/c10d/c10d_allreduce not built (LibTorch not found, FASTRUN_WITH_TORCH=OFF, or a sanitizer build)"
fi
# Before hosts_up: its exit trap (hosts_down) would turn a later skip's exit code into its own.
if [[ $case_name == mpirun_* ]] && ! command -v mpirun >/dev/null; then
  fastrun_skip "'mpirun' is not installed (tools/install-deps.sh installs Open MPI)"
fi
hosts=(n0 n1)
[[ $case_name == gloo_allreduce || $case_name == elastic_* || $case_name == hier_bits_3_hosts ]] && hosts=(n0 n1 n2)
[[ $case_name == store_only_* ]] && hosts=(s n0 n1 n2)  # s: the store-only launcher's host
hosts_up "${hosts[@]}" || exit 1
master=$(host_addr n0)
[[ $case_name == store_only_* ]] && master=$(host_addr s)
port=29400  # each run has its own switch and addresses: a fixed port collides with nothing
work=$HOSTS_DIR/work
mkdir -p "$work"
export FASTRUN_STORE_TOKEN=netns-test-secret FASTRUN_TIMEOUT=20
unset FASTRUN_GLOO_HOST FASTRUN_BACKEND FASTRUN_GLOBAL_SEED


# Starts node $1's launcher on host n$1 in the background with the rest as its arguments;
# its stdout/stderr go to $work/out-$1 / err-$1, its pid into launcher[$1].
declare -a launcher=()
start_node() {
  local k=$1
  shift
  start_on_host "n$k" "$fastrun" --nnodes "${#hosts[@]}" --node-rank "$k" --master-addr "$master" --master-port "$port" "$@" \
    >"$work/out-$k" 2>"$work/err-$k" &
  launcher[k]=$!
}

# Waits for node $1's launcher (at most $2 s); sets code[$1] and took[$1] (seconds since $3).
declare -a code=() took=()
finish_node() {
  local k=$1 limit=$2 since=$3
  wait_exit "${launcher[k]}" "$limit" "code[$k]"
  took[k]=$(elapsed "$since")
}

nothing_left() {
  local name left
  for name in "${hosts[@]}"; do
    left=$(host_leftovers "$name")
    [[ -z $left ]] || fail "left behind: $left"
  done
}

case_layout() {
  # What each rank sees, written where the test can read it (a shared filesystem, as on a
  # cluster), then a barrier through the job's store across the hosts (hello).
  local rank_says='printf "%s %s %s %s %s %s %s %s\n" "$FASTRUN_RANK" "$(hostname)" "$FASTRUN_LOCAL_RANK" \
    "$FASTRUN_LOCAL_WORLD_SIZE" "$FASTRUN_NODE_RANK" "$FASTRUN_WORLD_SIZE" "$FASTRUN_GLOO_HOST" "$MASTER_ADDR" \
    >"$1/rank-$FASTRUN_RANK" && exec "$2"'
  local t0
  t0=$(now)
  start_node 1 --nproc 3 sh -c "$rank_says" rank "$work" "$hello"
  start_node 0 --nproc 2 sh -c "$rank_says" rank "$work" "$hello"
  finish_node 0 30 "$t0"
  finish_node 1 30 "$t0"
  expect_eq "${code[0]}" 0 "node 0's exit code (stderr: $(cat "$work/err-0"))"
  expect_eq "${code[1]}" 0 "node 1's exit code (stderr: $(cat "$work/err-1"))"
  local g host=(n0 n0 n1 n1 n1) local_rank=(0 1 0 1 2) local_size=(2 2 3 3 3) node_rank=(0 0 1 1 1)
  local want
  for g in 0 1 2 3 4; do
    want="$g ${host[g]} ${local_rank[g]} ${local_size[g]} ${node_rank[g]} 5 $(host_addr "${host[g]}") $master"
    expect_eq "$(cat "$work/rank-$g" 2>/dev/null)" "$want" "rank $g: rank host local_rank local_size node world gloo_host master_addr"
  done
  expect_eq "$(grep -c 'passed the barrier' "$work/out-0" "$work/out-1" | awk -F: '{s += $2} END {print s}')" 5 \
    "ranks through the store barrier across hosts"
  echo "layout: both launchers done in ${took[1]} s"
  nothing_left
}

case_gloo_allreduce() {
  # Three hosts with 1, 2 and 1 ranks. `auto` must pick hier (shm inside n1, tcp between the
  # hosts' leaders): shm alone would need a /dev/shm the hosts do not share.
  local t0 k
  t0=$(now)
  FASTRUN_BACKEND=auto start_node 2 --nproc 1 "$partner" --allreduce
  FASTRUN_BACKEND=auto start_node 1 --nproc 2 "$partner" --allreduce
  FASTRUN_BACKEND=auto start_node 0 --nproc 1 "$partner" --allreduce
  for k in 0 1 2; do
    finish_node "$k" 30 "$t0"
    expect_eq "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
  done
  expect_eq "$(cat "$work"/out-* | grep -c 'allreduce 10 hier')" 4 \
    "ranks whose sum of rank+1 over 4 ranks on 3 hosts is 10, over hier (out: $(cat "$work"/out-*))"
  echo "all-reduce across 3 hosts: done in ${took[2]} s"
  nothing_left
}

case_shm_refused_across_hosts() {
  # Asked for by name, shm across hosts is a clear error in the ranks, not a hang; the first
  # rank to say so fails the job on both nodes.
  local t0 k
  t0=$(now)
  FASTRUN_BACKEND=shm start_node 1 --nproc 1 "$partner" --allreduce
  FASTRUN_BACKEND=shm start_node 0 --nproc 1 "$partner" --allreduce
  finish_node 0 30 "$t0"
  finish_node 1 30 "$t0"
  expect_ne "${code[0]}" 0 "node 0's exit code"
  expect_eq "${code[1]}" "${code[0]}" "node 1's exit code (the job's first failure, as node 0's)"
  expect_contains <(cat "$work"/err-*) "shm works on one node only" "the launchers relay why"
  expect_below "${took[1]}" 10 "seconds until both launchers exited"
  nothing_left
}

case_restart_node1() {
  # --max-restarts across hosts (docs/launching.md, "Restarts"): rank 3 (on n1) fails in attempt
  # 0 only; both nodes run attempt 1 together, whose ranks join on a fresh store and all-reduce
  # over hier (auto) across the hosts; then the job's count runs out for a rank that always fails.
  local t0 k
  t0=$(now)
  start_node 1 --nproc 2 --max-restarts 1 "$partner" --pidfile "$work/pid-%r" --on 3 --on-attempt 0 --exit 5 \
    --on-attempt 0 --sleep 60 --allreduce
  start_node 0 --nproc 2 --max-restarts 1 "$partner" --pidfile "$work/pid-%r" --on-attempt 0 --sleep 60 --allreduce
  finish_node 0 40 "$t0"
  finish_node 1 40 "$t0"
  for k in 0 1; do
    expect_eq "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
    expect_contains "$work/err-$k" "attempt 0 of the job failed (1 of --max-restarts 1 left)" "node $k's summary"
    expect_contains "$work/err-$k" "starting attempt 1 of the job" "node $k restarts"
  done
  expect_eq "$(cat "$work"/out-* | grep -c 'allreduce 10 hier')" 4 "attempt 1's ranks all-reduce across the hosts"
  echo "restart across hosts: both launchers done in ${took[0]} s / ${took[1]} s"
  t0=$(now)
  start_node 1 --nproc 2 --max-restarts 1 "$partner" --pidfile "$work/pid-%r" --on 2 --exit 6 --sleep 60
  start_node 0 --nproc 2 --max-restarts 1 "$partner" --pidfile "$work/pid-%r" --sleep 60
  finish_node 0 40 "$t0"
  finish_node 1 40 "$t0"
  for k in 0 1; do
    expect_eq "${code[k]}" 6 "node $k's exit code after the last attempt (stderr: $(cat "$work/err-$k"))"
    expect_contains "$work/err-$k" "attempt 1 of the job failed, the last one --max-restarts 1 allows" "node $k's summary"
  done
  nothing_left
}

case_rank_fails_on_node1() {
  local t0 k
  t0=$(now)
  start_node 1 --nproc 2 "$partner" --pidfile "$work/pid-%r" --on 3 --sleep 0.5 --on 3 --exit 3 --sleep 60
  start_node 0 --nproc 2 "$partner" --pidfile "$work/pid-%r" --sleep 60
  finish_node 0 20 "$t0"
  finish_node 1 20 "$t0"
  for k in 0 1; do
    expect_eq "${code[k]}" 3 "node $k's exit code"
    expect_contains "$work/err-$k" "rank 3 (pid" "node $k names the failed rank"
    expect_contains "$work/err-$k" "on node 1 (host n1)" "node $k names the failed rank's node and host"
  done
  expect_below "${took[0]}" 8 "seconds until both launchers stopped (the other ranks sleep 60 s)"
  echo "rank failing on node 1: both launchers out in ${took[0]} s / ${took[1]} s"
  nothing_left
}

case_node_never_starts() {
  local t0
  t0=$(now)
  FASTRUN_TIMEOUT=2 start_node 0 --nproc 1 "$partner" --exit 0
  finish_node 0 15 "$t0"
  expect_eq "${code[0]}" 1 "node 0's exit code"
  expect_contains "$work/err-0" "1 of 2 nodes never arrived" "node 0 says a node is missing"
  expect_contains "$work/err-0" "node [1]" "node 0 names the missing node"
  expect_below "${took[0]}" 8 "seconds until node 0 gave up (join timeout 2 s)"
  # And the other way round: node 1 waiting for a master that never comes.
  t0=$(now)
  FASTRUN_TIMEOUT=2 start_node 1 --nproc 1 "$partner" --exit 0
  finish_node 1 15 "$t0"
  expect_ne "${code[1]}" 0 "node 1's exit code without a node 0"
  expect_contains "$work/err-1" "$master:$port" "node 1 names the master it could not reach"
  expect_below "${took[1]}" 8 "seconds until node 1 gave up (join timeout 2 s)"
  echo "node never starts: node 0 out in ${took[0]} s, node 1 in ${took[1]} s"
  nothing_left
}

case_master_sigkilled() {
  local t0 pids
  start_node 1 --nproc 2 "$partner" --pidfile "$work/pid-%r" --sleep 60
  start_node 0 --nproc 2 "$partner" --pidfile "$work/pid-%r" --sleep 60
  pids=$(wait_for_pidfiles "$work" 4 20) || fail "ranks never all started (stderr: $(cat "$work"/err-*))"
  t0=$(now)
  kill -KILL "${launcher[0]}"
  finish_node 1 20 "$t0"
  finish_node 0 5 "$t0"
  expect_ne "${code[1]}" 0 "node 1's exit code after node 0's launcher died"
  expect_contains "$work/err-1" "node 0" "node 1 names node 0"
  expect_below "${took[1]}" 5 "seconds from SIGKILL of node 0's launcher until node 1's launcher exited"
  wait_gone "$pids" 5 || fail "ranks still running 5 s after node 1's launcher exited: $pids"
  echo "master SIGKILLed: node 1's launcher out in ${took[1]} s"
  nothing_left
}

case_partition() {
  # Node 0's host unplugged: no FIN or RST reaches node 1, whose store requests go unanswered.
  # Node 0 stops at node 1's missing heartbeats (1.5 s, then up to 2 s for an ack that cannot
  # come); node 1 at the watch's 5 s store reply timeout, not at the job's (FASTRUN_TIMEOUT).
  local t0 pids
  export FASTRUN_TIMEOUT=60
  start_node 1 --nproc 2 "$partner" --pidfile "$work/pid-%r" --sleep 60
  start_node 0 --nproc 2 "$partner" --pidfile "$work/pid-%r" --sleep 60
  pids=$(wait_for_pidfiles "$work" 4 20) || fail "ranks never all started (stderr: $(cat "$work"/err-*))"
  t0=$(now)
  host_unplug n0
  finish_node 0 30 "$t0"
  finish_node 1 30 "$t0"
  expect_eq "${code[0]}" 1 "node 0's exit code"
  expect_eq "${code[1]}" 1 "node 1's exit code"
  expect_contains "$work/err-0" "node 1 (host n1): its launcher stopped answering" "node 0 names node 1"
  expect_contains "$work/err-1" "node 0 (host n0): lost the job's store" "node 1 names node 0"
  expect_below "${took[0]}" 6 "seconds from the cut until node 0's launcher exited"
  expect_below "${took[1]}" 9 "seconds from the cut until node 1's launcher exited"
  wait_gone "$pids" 5 || fail "ranks still running 5 s after the launchers exited: $pids"
  echo "partition: node 0 out in ${took[0]} s, node 1 in ${took[1]} s"
  nothing_left
}

case_elastic_cut_and_back() {
  # --nnodes 2:3 across hosts (docs/multinode.md, "Elastic membership"): host n2 cut off while
  # attempt 0 runs on 3 hosts x 2 ranks; nodes 0 and 1 go on with attempt 1 as 4 ranks (their
  # all-reduce over hier sums 1..4 = 10). n2 plugged back in and its launcher started again: its
  # arrival stops attempt 1, and attempt 2 runs on the three hosts (1..6 = 21).
  local t0 k pids
  export FASTRUN_TIMEOUT=60
  mkdir -p "$work/a1"
  local prog=("$partner" --on-attempt 0 --pidfile "$work/pid-%r" --on-attempt 0 --sleep 60 --on-attempt 1 --allreduce
    --on-attempt 1 --pidfile "$work/a1/pid-%r" --on-attempt 1 --sleep 60 --on-attempt 2 --allreduce)
  for k in 2 1 0; do start_node "$k" --nnodes 2:3 --nproc 2 "${prog[@]}"; done
  pids=$(wait_for_pidfiles "$work" 6 30) || fail "attempt 0's ranks never all started (stderr: $(cat "$work"/err-*))"
  t0=$(now)
  host_unplug n2
  wait_for_pidfiles "$work/a1" 4 30 >/dev/null || fail "attempt 1 never ran on n0 and n1 (stderr: $(cat "$work"/err-*))"
  echo "cut: attempt 1 on 2 hosts running $(elapsed "$t0") s after the cut"
  expect_eq "$(cat "$work"/out-0 "$work"/out-1 | grep -c 'allreduce 10 hier')" 4 "attempt 1's 4 ranks all-reduce across n0 and n1"
  finish_node 2 30 "$t0"  # the cut-off launcher: lost node 0's store
  expect_eq "${code[2]}" 1 "the cut-off launcher's exit code"
  host_plug n2
  start_node 2 --nnodes 2:3 --nproc 2 "${prog[@]}"
  t0=$(now)
  for k in 0 1 2; do finish_node "$k" 60 "$t0"; done
  for k in 0 1 2; do expect_eq "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"; done
  for k in 0 1; do
    expect_contains "$work/err-$k" "starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [2]" "node $k shrinks"
    expect_contains "$work/err-$k" "starting attempt 2 of the job on 3 nodes (--nnodes 2:3) with node [2] back" "node $k grows"
  done
  expect_contains "$work/err-2" "the job runs already (--nnodes 2:3); waiting for node 0" "node 2 asks to join"
  expect_eq "$(cat "$work"/out-* | grep -c 'allreduce 21 hier')" 6 "attempt 2's 6 ranks all-reduce across the 3 hosts"
  echo "back: attempt 2 on 3 hosts done $(elapsed "$t0") s after node 2's launcher started again"
  wait_gone "$pids" 5 || fail "ranks still running: $pids"
  nothing_left
}

# The same training ("${train[@]}" of the caller) as 4 ranks on host $1 without a failure: its
# weights must equal $work/elastic.weights, the job's that lost host $2 (train_mlp_compare's
# tolerance, as the kill-and-resume tests use).
expect_uninterrupted_weights() {
  on_host "$1" "$fastrun" --nproc 4 "${train[@]}" --weights-out "$work/straight.weights" >"$work/straight.out" 2>&1 ||
    fail "the uninterrupted run failed: $(cat "$work/straight.out")"
  "$train_mlp_compare" "$work/straight.weights" "$work/elastic.weights" 1e-4 >"$work/compare.out" 2>&1 ||
    fail "weights after losing $2 differ from an uninterrupted run's: $(cat "$work/compare.out")"
}

case_elastic_trainer() {
  # --nnodes 2:3 with the example trainer (docs/multinode.md, "Elastic membership"): 3 hosts x 2
  # ranks train with a checkpoint every 50 steps and --resume-latest; host n2 is cut off once the
  # first checkpoint exists. Nodes 0 and 1 finish the run as 4 ranks from the last checkpoint,
  # with the weights of an uninterrupted run (DDP is world-size invariant at a fixed global batch;
  # 1e-4, the tolerance of the one-host against two-host comparison in multinode.slurm). 65520
  # samples, not 65536: with 65536 and --seed 7 the weights differ by 8.1e-3 even on one rank
  # between --accum 1 and --accum 3 (the same samples in every step, only the float sums grouped
  # otherwise), while 65520, and 65536 with seeds 8 and 9, agree within 2.5e-6. That data set
  # amplifies rounding; the sampler is not the cause (every step's samples are the same over 1,
  # 3, 4 and 6 ranks, --log-indices, and the 16 samples past the last whole batch are left out
  # the same way).
  local t0 k i
  export FASTRUN_TIMEOUT=60
  local train=("$train_mlp" --seed 7 --samples 65520 --epochs 1 --global-batch 48 --quiet 1)
  for k in 2 1 0; do
    start_node "$k" --nnodes 2:3 --nproc 2 "${train[@]}" --checkpoint "$work/ckpt" --checkpoint-every 50 \
      --resume-latest --weights-out "$work/elastic.weights"
  done
  for ((i = 0; i < 1200; i++)); do [[ -e $work/ckpt ]] && break; sleep 0.05; done
  [[ -e $work/ckpt ]] || fail "no checkpoint within 60 s (stderr: $(cat "$work"/err-*))"
  t0=$(now)
  host_unplug n2
  for k in 0 1 2; do finish_node "$k" 120 "$t0"; done
  for k in 0 1; do
    expect_eq "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
    expect_contains "$work/err-$k" "starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [2]" \
      "node $k goes on without n2"
  done
  expect_eq "${code[2]}" 1 "the cut-off launcher's exit code"
  echo "trainer: nodes 0 and 1 done ${took[0]} s after n2 was cut off"
  expect_uninterrupted_weights n0 n2
  nothing_left
}

case_store_only_trainer() {
  # fastrun --store-only on host s (docs/multinode.md, "A store outside the job"): the job's
  # store and coordinator on a host of its own; 3 compute hosts x 2 ranks train as in
  # case_elastic_trainer, with --external-store, and host n0 (compute node 0) is cut off once
  # the first checkpoint exists. Nodes 1 and 2 finish the run as 4 ranks, with the weights of an
  # uninterrupted run, and the store-only launcher exits 0.
  local t0 k i store_pid store_code
  export FASTRUN_TIMEOUT=60
  local train=("$train_mlp" --seed 7 --samples 65520 --epochs 1 --global-batch 48 --quiet 1)
  start_on_host s "$fastrun" --store-only --nnodes 2:3 --master-addr "$master" --master-port "$port" \
    >"$work/out-s" 2>"$work/err-s" &
  store_pid=$!
  for k in 2 1 0; do
    start_node "$k" --nnodes 2:3 --external-store --nproc 2 "${train[@]}" --checkpoint "$work/ckpt" \
      --checkpoint-every 50 --resume-latest --weights-out "$work/elastic.weights"
  done
  for ((i = 0; i < 1200; i++)); do [[ -e $work/ckpt ]] && break; sleep 0.05; done
  [[ -e $work/ckpt ]] || fail "no checkpoint within 60 s (stderr: $(cat "$work"/err-*))"
  t0=$(now)
  host_unplug n0
  for k in 0 1 2; do finish_node "$k" 120 "$t0"; done
  wait_exit "$store_pid" 30 store_code
  for k in 1 2; do
    expect_eq "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
    expect_contains "$work/err-$k" "starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [0]" \
      "node $k goes on without n0"
  done
  expect_eq "$store_code" 0 "the store-only launcher's exit code (stderr: $(cat "$work/err-s"))"
  expect_contains "$work/err-s" "without lost node [0]" "the store-only launcher names the lost node"
  expect_eq "${code[0]}" 1 "the cut-off launcher's exit code"
  expect_contains "$work/err-0" "the store-only launcher (host $master): lost the job's store" \
    "the cut-off node names the store-only launcher"
  echo "store-only trainer: nodes 1 and 2 done ${took[1]} s after n0 was cut off"
  expect_uninterrupted_weights n1 n0
  nothing_left
}

case_store_only_lost() {
  # The store-only launcher's host cut off while 3 compute hosts x 1 rank run (--nnodes 2:3):
  # every compute node stops its rank and exits 1 within seconds, naming the store-only
  # launcher, as nodes do when node 0 is lost; the store-only launcher, cut off from all of
  # them, ends too (fewer than MIN nodes left) rather than wait forever.
  local t0 k store_pid store_code pids
  export FASTRUN_TIMEOUT=60
  start_on_host s "$fastrun" --store-only --nnodes 2:3 --master-addr "$master" --master-port "$port" \
    >"$work/out-s" 2>"$work/err-s" &
  store_pid=$!
  for k in 2 1 0; do
    start_node "$k" --nnodes 2:3 --external-store --nproc 1 "$partner" --pidfile "$work/pid-%r" --sleep 60
  done
  pids=$(wait_for_pidfiles "$work" 3 30) || fail "ranks never all started (stderr: $(cat "$work"/err-*))"
  t0=$(now)
  host_unplug s
  for k in 0 1 2; do finish_node "$k" 30 "$t0"; done
  wait_exit "$store_pid" 30 store_code
  for k in 0 1 2; do
    expect_eq "${code[k]}" 1 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
    expect_contains "$work/err-$k" "the store-only launcher (host $master): lost the job's store" \
      "node $k names the store-only launcher"
    expect_below "${took[k]}" 20 "seconds from the cut until node $k's launcher exited"
  done
  expect_eq "$store_code" 1 "the cut-off store-only launcher's exit code (stderr: $(cat "$work/err-s"))"
  wait_gone "$pids" 5 || fail "ranks still running 5 s after the launchers exited: $pids"
  echo "store-only host cut off: compute nodes out in ${took[0]} / ${took[1]} / ${took[2]} s"
  nothing_left
}

# mpirun on n0 reaching n1 through an rsh agent that enters n1's namespaces (as ssh would reach
# another machine); the rest as mpirun's arguments. Output in $work/out-$1 / err-$1, its exit
# code in mpirun_code. No MASTER_* anywhere: the store is at mpirun's host (n0), as documented.
mpirun_code=""
run_mpirun() {
  local name=$1
  shift
  # Open MPI's session directory is /tmp/ompi.<host name>.<uid>: every test's hosts are named
  # n0, n1, so two tests at once (ctest -j) would race creating it. Each run gets its own.
  mkdir -p "$work/ompi-tmp"
  start_on_host n0 mpirun --allow-run-as-root --oversubscribe --mca plm_rsh_agent "$(hosts_rsh_agent)" \
    --mca orte_tmpdir_base "$work/ompi-tmp" -x FASTRUN_STORE_TOKEN -x FASTRUN_TIMEOUT "$@" >"$work/out-$name" 2>"$work/err-$name" &
  wait_exit $! 60 mpirun_code
}

case_mpirun_hello() {
  # mpirun starts hello once per rank on two hosts; the runtime's Open MPI support joins them.
  run_mpirun hello --host n0:2,n1:2 -np 4 sh -c 'hostname >"$1/host-$OMPI_COMM_WORLD_RANK" && exec "$2"' \
    hello "$work" "$hello"
  expect_eq "$mpirun_code" 0 "mpirun's exit code (stderr: $(cat "$work/err-hello"))"
  expect_hello_on_two_hosts "$work" "$work/out-hello" openmpi
  nothing_left
}

case_mpirun_fastrun() {
  # mpirun starts one fastrun per host in the bare form: each launcher is a node, its node rank
  # its MPI rank; then a rank failing on node 1 is mpirun's exit code.
  local per_node=(--host "n0,n1" --map-by ppr:1:node "$fastrun" --nproc 2)
  run_mpirun fastrun "${per_node[@]}" sh -c 'printf "%s %s %s %s\n" "$FASTRUN_RANK" "$(hostname)" \
    "$FASTRUN_NODE_RANK" "$FASTRUN_WORLD_SIZE" >"$1/rank-$FASTRUN_RANK" && exec "$2"' rank "$work" "$hello"
  expect_eq "$mpirun_code" 0 "mpirun's exit code (stderr: $(cat "$work/err-fastrun"))"
  local g want=("0 n0 0 4" "1 n0 0 4" "2 n1 1 4" "3 n1 1 4")
  for g in 0 1 2 3; do
    expect_eq "$(cat "$work/rank-$g" 2>/dev/null)" "${want[g]}" "rank $g: rank host node world"
  done
  expect_eq "$(grep -c 'all-reduce of 1..4 = 10 over hier' "$work/out-fastrun")" 4 "ranks' all-reduce across hosts"
  run_mpirun failing "${per_node[@]}" "$partner" --on 3 --sleep 0.5 --on 3 --exit 3 --sleep 60
  expect_eq "$mpirun_code" 3 "mpirun's exit code: the failed rank's (stderr: $(cat "$work/err-failing"))"
  expect_contains "$work/err-failing" "on node 1 (host n1) exited with code 3" "the launchers name the failed rank's node and host"
  nothing_left
}
# The c10d program on nodes 1 and 0, two ranks each, with the launcher flags given ($@): both
# nodes exit 0 and all four ranks print the right sum.
c10d_on_two_nodes() {
  local t0 k
  t0=$(now)
  start_node 1 "$@" --nproc 2 "$c10d"
  start_node 0 "$@" --nproc 2 "$c10d"
  for k in 0 1; do
    finish_node "$k" 60 "$t0"
    expect_eq "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
  done
  expect_eq "$(cat "$work"/out-[0-9]* | grep -c 'all_reduce 10 ok')" 4 "c10d ranks with the right sum across hosts"
}

case_c10d_allreduce() {
  # A plain c10d program (tests/c10d/c10d_allreduce.cpp: LibTorch's TCPStore + ProcessGroupGloo
  # from env://) on two hosts of two ranks each: fastrun's MASTER_ADDR/MASTER_PORT are all it needs.
  c10d_on_two_nodes
  nothing_left
}

case_store_only_c10d() {
  # The same c10d program under fastrun --store-only on host s (docs/multinode.md): the ranks'
  # MASTER_ADDR/MASTER_PORT must name compute node 0's host (n0), where LibTorch's rank 0 hosts
  # its TCPStore, not the store-only launcher's host.
  local store_pid store_code
  start_on_host s "$fastrun" --store-only --nnodes 2 --master-addr "$master" --master-port "$port" \
    >"$work/out-s" 2>"$work/err-s" &
  store_pid=$!
  c10d_on_two_nodes --nnodes 2 --external-store
  wait_exit "$store_pid" 30 store_code
  expect_eq "$store_code" 0 "the store-only launcher's exit code (stderr: $(cat "$work/err-s"))"
  nothing_left
}

# The hier backend (docs/backend-hier.md): the bits of the world all-reduce (allreduce_bits.cpp
# prints one hash per case and checks it against the rank-order kernel) on one node (shm) and
# on the hosts of this run ($@: ranks per host), which must be the same hashes.
hier_bits_against_one_node() {
  local per_host=("$@") total=0 t0 k
  for k in "${per_host[@]}"; do total=$((total + k)); done
  [[ -x $bits ]] || fail "allreduce_bits binary not given"
  t0=$(now)
  start_on_host n0 "$fastrun" --nproc "$total" "$bits" >"$work/out-one" 2>"$work/err-one" &
  local one=$! one_code
  wait_exit "$one" 60 one_code
  expect_eq "$one_code" 0 "one node's exit code (stderr: $(cat "$work/err-one"))"
  t0=$(now)
  for ((k = ${#per_host[@]} - 1; k >= 0; k--)); do start_node "$k" --nproc "${per_host[k]}" "$bits"; done
  for k in "${!per_host[@]}"; do
    finish_node "$k" 60 "$t0"
    expect_eq "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
  done
  local cases=8
  expect_eq "$(grep -c ' ok shm$' "$work/out-one")" $((cases * total)) "one node: results equal to the rank-order kernel's, over shm"
  expect_eq "$(cat "$work"/out-[0-9]* | grep -c ' ok hier$')" $((cases * total)) \
    "across hosts: results equal to the rank-order kernel's, over hier (out: $(cat "$work"/out-[0-9]*))"
  expect_eq "$(cat "$work"/out-[0-9]* | grep -o 'bits [^ ]* [0-9a-f]*' | sort -u)" \
    "$(grep -o 'bits [^ ]* [0-9a-f]*' "$work/out-one" | sort -u)" "the hashes across hosts and on one node"
  echo "hier bits on ${#per_host[@]} hosts (${per_host[*]} ranks) = one node's: done in ${took[0]} s"
  nothing_left
}

case_hier_bits_2x2() { hier_bits_against_one_node 2 2; }
case_hier_bits_3_hosts() { hier_bits_against_one_node 2 1 2; }

# A rank SIGKILLed while the hier all-reduces run (rank $1: 3 is a plain rank of n1, 2 its
# leader): every launcher stops promptly with the killed rank's code and names it, and every
# survivor's op fails by itself (the ranks ignore SIGTERM and the launchers wait 60 s before
# SIGKILL), each with an error that names the dead rank.
hier_rank_killed() {
  local victim=$1 t0 k pid
  [[ -x $bits ]] || fail "allreduce_bits binary not given"
  t0=$(now)
  start_node 1 --nproc 2 --kill-timeout 60 "$bits" --loop "$work/pid-%r"
  start_node 0 --nproc 2 --kill-timeout 60 "$bits" --loop "$work/pid-%r"
  for ((k = 0; k < 300; k++)); do [[ -s $work/pid-0 && -s $work/pid-1 && -s $work/pid-2 && -s $work/pid-3 ]] && break; sleep 0.1; done
  pid=$(cat "$work/pid-$victim" 2>/dev/null) || fail "rank $victim never started its loop (stderr: $(cat "$work"/err-*))"
  t0=$(now)
  kill -KILL "$pid"
  finish_node 0 40 "$t0"
  finish_node 1 40 "$t0"
  # The launcher of the killed rank exits with its code; the other may see its own rank's error
  # (67) before the record of the kill.
  expect_eq "${code[1]}" 137 "node 1's exit code: the killed rank's (stderr: $(cat "$work/err-1"))"
  expect_ne "${code[0]}" 0 "node 0's exit code (stderr: $(cat "$work/err-0"))"
  for k in 0 1; do expect_contains "$work/err-$k" "rank $victim (pid" "node $k names the killed rank"; done
  # Each survivor's op failed by itself (exit 67 with its error), and the errors name the dead
  # rank (a rank whose shm peer left first names that peer, whose own error names the dead one).
  expect_eq "$(cat "$work"/err-* | grep -c '^allreduce_bits: ')" 3 "the survivors' own errors (stderr: $(cat "$work"/err-*))"
  expect_contains <(cat "$work"/err-* | grep '^allreduce_bits: ') "rank $victim" "a survivor's error names rank $victim"
  expect_below "${took[0]}" 15 "seconds until node 0's launcher stopped after the kill (the survivors' errors included)"
  echo "hier: rank $victim killed mid-op: launchers out in ${took[0]} s / ${took[1]} s"
  nothing_left
}
case_hier_rank_killed() { hier_rank_killed 3; }
case_hier_leader_killed() { hier_rank_killed 2; }

# Ranks out of step across hosts (issue 25's default check): ranks 0-2 all-reduce over hier
# while rank 3 broadcasts over the flat gloo group. The op timeout is left at its 600 s, and the
# ranks ignore SIGTERM (the launchers wait 60 s before SIGKILL), so every rank must fail by
# itself, within seconds, with the message that names both ops.
case_hier_mismatch() {
  local t0 k
  [[ -x $bits ]] || fail "allreduce_bits binary not given"
  t0=$(now)
  start_node 1 --nproc 2 --kill-timeout 60 "$bits" --mismatch
  start_node 0 --nproc 2 --kill-timeout 60 "$bits" --mismatch
  for k in 0 1; do
    finish_node "$k" 60 "$t0"
    expect_ne "${code[k]}" 0 "node $k's exit code (stderr: $(cat "$work/err-$k"))"
  done
  expect_eq "$(cat "$work"/out-[0-9]* | grep -c 'mismatched op returned')" 0 "ranks whose mismatched op returned"
  expect_eq "$(cat "$work"/err-[0-9]* | grep -c '^allreduce_bits: ')" 4 "the ranks' own errors (stderr: $(cat "$work"/err-[0-9]*))"
  expect_eq "$(cat "$work"/err-[0-9]* | grep '^allreduce_bits: ' | grep -c 'called all_reduce(float32 x 65536, sum).*called broadcast(float32 x 65536, root 0)')" 4 \
    "errors naming both ops (stderr: $(cat "$work"/err-[0-9]*))"
  expect_below "${took[0]}" 30 "seconds until node 0's launcher stopped"
  echo "hier: all_reduce against broadcast across hosts: launchers out in ${took[0]} s / ${took[1]} s"
  nothing_left
}

declare -F "case_$case_name" >/dev/null || { echo "no case '$case_name'" >&2; exit 2; }
"case_$case_name"
report "$work"/err-*
