#!/usr/bin/env bash
# A real Slurm (Debian's slurm-wlm) on separate hosts (hosts.sh): munged and slurmctld on host
# `ctl` (the login node, where srun runs), one slurmd on each of hosts n0 and n1, all from a
# configuration generated in the run's temporary directory, all stopped with the hosts.
#   slurm_test.sh FASTRUN SPARRING_PARTNER HELLO TRAIN_MLP TRAIN_MLP_COMPARE
# Checks srun's own task layout across the two hosts; srun starting hello once per rank (the
# runtime's Slurm support: ranks, hosts, a gloo all-reduce across the hosts); then srun starting
# one bare fastrun per node (no --nnodes/--node-rank/--master-* flags, no MASTER_* variables):
# the global ranks and hosts, the example trainer (its weights against a one-host run), a
# failing rank's exit code and name, a restart within the allocation (--max-restarts: a rank of
# node 1 fails in attempt 0, attempt 1 joins and ends with 0), and scancel of a running job.
# Skips (test_support/skip.sh; CTest: Skipped) when not root or Slurm/munge is not installed.
#
# Why it is built this way:
# - Every daemon runs inside a host's namespaces, so removing the hosts stops them, also after a
#   SIGKILL of this script (hosts.sh's watchdog and stale sweep).
# - Node names resolve the same way everywhere: NodeAddr= in slurm.conf, and each host has the
#   same /etc/hosts (hosts.sh) for srun's and slurmstepd's own look-ups.
# - munged uses a key and a socket in the temporary directory (AuthInfo=socket=), so the
#   machine's own munge, if any, is neither used nor disturbed.
# - SlurmdParameters=config_overrides: the nodes are as big as slurm.conf says whatever the
#   machine has, so --ntasks-per-node=2 works on a 1-CPU runner too.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=tests/multinode/hosts.sh
source "$here/hosts.sh"
# shellcheck source=tests/multinode/checks.sh
source "$here/checks.sh"

fastrun=$(readlink -f "$1") partner=$(readlink -f "$2") hello=$(readlink -f "$3")
train_mlp=$(readlink -f "$4") train_mlp_compare=$(readlink -f "$5")
hosts_skip_unless_able
for tool in munged slurmctld slurmd srun sinfo; do
  if ! command -v "$tool" >/dev/null; then
    fastrun_skip "'$tool' is not installed (tools/install-deps.sh installs slurm-wlm and munge)"
  fi
done
hosts_up ctl n0 n1 || exit 1
dir=$HOSTS_DIR
work=$dir/work
mkdir -p "$work" "$dir/munge" "$dir/state" "$dir/spool/n0" "$dir/spool/n1"
chmod 700 "$dir/munge"
export SLURM_CONF=$dir/slurm.conf
unset FASTRUN_GLOO_HOST FASTRUN_BACKEND FASTRUN_GLOBAL_SEED
export FASTRUN_STORE_TOKEN=slurm-test-secret FASTRUN_TIMEOUT=20

# A daemon on a host, in the foreground (so its pid is known and it dies with the host).
daemon_on() {
  local host=$1 log=$2
  shift 2
  start_on_host "$host" "$@" </dev/null >"$log" 2>&1 &
  disown $!  # hosts_down stops it, with no job report (a slow one is SIGKILLed)
}

start_slurm() {
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  daemon_on ctl "$dir/munged.out" munged --foreground --force --socket="$dir/munge/munge.socket" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed"
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -S $dir/munge/munge.socket ]] && break
    sleep 0.05
  done
  [[ -S $dir/munge/munge.socket ]] || { fail "munged did not start: $(cat "$dir/munged.out" "$dir/munge/munged.log")"; return 1; }

  cat >"$SLURM_CONF" <<EOF
ClusterName=fastrun-test
SlurmctldHost=ctl($(host_addr ctl))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SwitchType=switch/none
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
NodeName=n0 NodeAddr=$(host_addr n0) CPUs=2 State=UNKNOWN
NodeName=n1 NodeAddr=$(host_addr n1) CPUs=2 State=UNKNOWN
PartitionName=test Nodes=n0,n1 Default=YES MaxTime=INFINITE State=UP
EOF
  daemon_on ctl "$dir/slurmctld.out" slurmctld -D -c -f "$SLURM_CONF"
  daemon_on n0 "$dir/slurmd-n0.out" slurmd -D -N n0 -f "$SLURM_CONF"
  daemon_on n1 "$dir/slurmd-n1.out" slurmd -D -N n1 -f "$SLURM_CONF"
  local states=""
  for ((i = 0; i < 300; i++)); do
    states=$(on_host ctl sinfo -h -N -o '%N %T' 2>/dev/null | sort | tr '\n' ' ')
    [[ $states == "n0 idle n1 idle " ]] && return 0
    sleep 0.1
  done
  fail "the Slurm nodes never became idle within 30 s (sinfo: '$states'); logs:
$(tail -n 15 "$dir"/*.out "$dir"/*.log)"
  return 1
}

# srun on the login node with the rest as its arguments; its output in $work/$1.{out,err}, its
# exit code in srun_code. Bounded: srun's own --time plus a kill.
srun_code=""
run_srun() {
  local name=$1
  shift
  start_on_host ctl srun --time=1 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  wait_exit $! 60 srun_code
}

# What each rank sees, then the program given as $2 (the rest its arguments).
rank_says='printf "%s %s %s %s %s\n" "$FASTRUN_RANK" "$(hostname)" "$FASTRUN_NODE_RANK" "$FASTRUN_LOCAL_RANK" \
  "$FASTRUN_WORLD_SIZE" >"$1/rank-$FASTRUN_RANK" && shift && exec "$@"'

# srun starts one fastrun per node in the bare form: fastrun takes the node count, its node rank
# and node 0's host from Slurm's variables and the port from the job and step ids.
srun_fastrun=(-N2 --ntasks-per-node=1 "$fastrun")

case_srun_layout() {
  run_srun layout -N2 --ntasks-per-node=2 sh -c 'echo "$SLURM_PROCID $SLURM_NODEID $SLURM_NTASKS $(hostname)"'
  expect_eq "$srun_code" 0 "srun's exit code (stderr: $(cat "$work/layout.err"))"
  expect_eq "$(sort "$work/layout.out" | tr '\n' ',')" "0 0 4 n0,1 0 4 n0,2 1 4 n1,3 1 4 n1," \
    "SLURM_PROCID SLURM_NODEID SLURM_NTASKS host of srun's 4 tasks"
}

case_srun_hello() {
  # srun starts hello once per rank, no launcher and no MASTER_* set: the runtime's Slurm support
  # derives the layout, the store on n0 and the port; the ranks all-reduce over hier across hosts.
  run_srun hello -N2 --ntasks-per-node=2 sh -c 'hostname >"$1/host-$SLURM_PROCID" && exec "$2"' hello "$work" "$hello"
  expect_eq "$srun_code" 0 "srun's exit code (stderr: $(cat "$work/hello.err"))"
  expect_hello_on_two_hosts "$work" "$work/hello.out" slurm
}

case_fastrun_per_node() {
  run_srun fastrun "${srun_fastrun[@]}" --nproc 2 sh -c "$rank_says" rank "$work" "$hello"
  expect_eq "$srun_code" 0 "srun's exit code (stderr: $(cat "$work/fastrun.err"))"
  local g want=("0 n0 0 0 4" "1 n0 0 1 4" "2 n1 1 0 4" "3 n1 1 1 4")
  for g in 0 1 2 3; do
    expect_eq "$(cat "$work/rank-$g" 2>/dev/null)" "${want[g]}" "rank $g: rank host node local_rank world"
  done
  expect_eq "$(grep -c 'passed the barrier' "$work/fastrun.out")" 4 "ranks through the store barrier across hosts"
}

case_trainer() {
  # The same seeded training on 2 nodes x 2 ranks under Slurm and on 4 ranks of one host must
  # end with the same weights (DDP over hier across hosts, shm on one).
  local train=("$train_mlp" --epochs 2 --samples 512 --seed 7)
  run_srun trainer "${srun_fastrun[@]}" --nproc 2 "${train[@]}" --weights-out "$work/slurm.weights"
  expect_eq "$srun_code" 0 "srun's exit code (stderr: $(cat "$work/trainer.err"))"
  expect_contains "$work/trainer.out" "4 rank(s) on hier" "the trainer's backend across hosts"
  on_host n0 "$fastrun" --nproc 4 "${train[@]}" --weights-out "$work/one-host.weights" >"$work/one-host.out" 2>&1 ||
    fail "the one-host run failed: $(cat "$work/one-host.out")"
  "$train_mlp_compare" "$work/one-host.weights" "$work/slurm.weights" 1e-4 >"$work/compare.out" 2>&1 ||
    fail "weights after training under Slurm differ from one host's: $(cat "$work/compare.out")"
}

case_failing_rank() {
  run_srun failing "${srun_fastrun[@]}" --nproc 2 "$partner" --on 3 --sleep 0.5 --on 3 --exit 3 --sleep 60
  expect_eq "$srun_code" 3 "srun's exit code: the failed rank's (stderr: $(cat "$work/failing.err"))"
  expect_contains "$work/failing.err" "rank 3 (pid" "the launchers name the failed rank"
  expect_contains "$work/failing.err" "on node 1 (host n1) exited with code 3" "... its node, host and code"
  expect_contains "$work/failing.err" "the job failed on node 1" "node 0's launcher says where the job failed"
}

case_restart() {
  # srun ... fastrun --max-restarts 1: rank 3 (node 1) fails in attempt 0; both launchers start
  # attempt 1 within the allocation (no requeue, no new srun), whose 4 ranks join afresh.
  run_srun restarted "${srun_fastrun[@]}" --nproc 2 --max-restarts 1 "$partner" --on 3 --on-attempt 0 --exit 3 --join
  expect_eq "$srun_code" 0 "srun's exit code after one restart (stderr: $(cat "$work/restarted.err"))"
  expect_contains "$work/restarted.err" "attempt 0 of the job failed (1 of --max-restarts 1 left)" \
    "the launchers name the failed attempt"
  expect_eq "$(grep -c '^joined rank [0-3] of 4' "$work/restarted.out")" 4 "ranks of attempt 1 through join()"
}

case_scancel() {
  # The job cancelled from the login node while its ranks run: every rank on both hosts stops.
  local pids job t0
  start_on_host ctl srun --time=1 --job-name=fastrun-scancel "${srun_fastrun[@]}" \
    --nproc 2 "$partner" --pidfile "$work/pid-%r" --sleep 60 >"$work/scancel.out" 2>"$work/scancel.err" &
  local srun_pid=$!
  pids=$(wait_for_pidfiles "$work" 4 30) || fail "ranks never all started (stderr: $(cat "$work/scancel.err"))"
  job=$(on_host ctl squeue -h -n fastrun-scancel -o %i)
  expect_ne "$job" "" "the job's id in squeue"
  t0=$(now)
  on_host ctl scancel "$job"
  wait_exit "$srun_pid" 30 srun_code
  expect_ne "$srun_code" 0 "srun's exit code after scancel"
  wait_gone "$pids" 10 || fail "ranks still running 10 s after scancel: $pids"
  echo "slurm: scancel: srun out and all 4 ranks gone $(elapsed "$t0") s after scancel"
}

t0=$(now)
if start_slurm; then
  echo "slurm: daemons up, both nodes idle after $(elapsed "$t0") s"
  for c in srun_layout srun_hello fastrun_per_node trainer failing_rank restart scancel; do
    t1=$(now)
    "case_$c"
    echo "slurm: $c done in $(elapsed "$t1") s"
  done
  # The daemons stay until hosts_down; anything else is left by a job. A job's slurmstepd may
  # take a moment to go after srun returns.
  for ((i = 0; i < 100; i++)); do
    left=$(for h in ctl n0 n1; do host_leftovers "$h"; done | grep -Ev '\((: )?(munged|slurmctld|slurmscriptd|slurmd) ')
    [[ -z $left ]] && break
    sleep 0.1
  done
  [[ -z $left ]] || fail "left behind 10 s after the last job: $left"
fi
report
