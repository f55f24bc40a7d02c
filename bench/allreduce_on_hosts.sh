#!/usr/bin/env bash
# All-reduce bandwidth across separate hosts (network namespaces, tests/multinode/hosts.sh): one
# `fastrun --nnodes H` per host, each with --nproc P, running
#   fastrun-bench OP --backend B --min MIN --max MAX      (OP: allreduce, broadcast or allgather)
# for each backend B in BACKENDS (hier: the default across nodes; gloo: flat), then Open MPI's
# MPI_Allreduce (fastrun-mpi-allreduce, back to back) over the same hosts through an rsh agent
# that enters them, when mpirun and that binary exist. RATE (e.g. 10gbit; default none) is set
# with `tc` on every host's link (both ends) to make the bridge look like a network. Prints each
# table as rank 0 printed it. The hosts are removed whatever happens. Root only.
#   bench/allreduce_on_hosts.sh [BUILD_DIR]    env: HOSTS=2 PER_HOST=2 BACKENDS="hier gloo"
#                                                   MIN=4K MAX=64M RATE= MPI=yes MPI_ARGS=
#                                                   OP=allreduce (the others: no Open MPI column)
#                                                   ITERS= (fastrun's timed calls per size; default: as
#                                                     Open MPI's, whose program takes no count)
#                                                   ROUNDS=3 (both sides' timed rounds per size, the best shown)
#                                                   REPEAT=1 (runs of the whole comparison in turn; from 2,
#                                                     a last table of each column's median and range)
# fastrun and Open MPI are timed alike: per size, after a warm-up call, ROUNDS rounds of the same
# count of calls back to back (64 MiB / size, 3..2000; for fastrun fewer where a round would pass
# 0.25 s), the slowest rank's mean per call, the best round.
# Open MPI busy-polls: with more ranks than free cores give MPI_ARGS="--mca mpi_yield_when_idle 1".
# Exit status: 0; 1 when a backend's job or Open MPI failed (its errors are shown, the other
# tables still are); 2 for a bad setting, named with what is accepted, before any host is made.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
build=$(readlink -f "${1:-$here/../build}")
bench=$build/bench/fastrun-bench fastrun=$build/tools/fastrun mpi_bench=$build/bench/fastrun-mpi-allreduce
for bin in "$bench" "$fastrun"; do
  [[ -x $bin ]] || { echo "allreduce_on_hosts.sh: no $bin; accepted: a build directory holding it" >&2; exit 2; }
done
nhosts=${HOSTS:-2} per_host=${PER_HOST:-2} min=${MIN:-4K} max=${MAX:-64M} op=${OP:-allreduce} rounds=${ROUNDS:-3}
repeat=${REPEAT:-1}
# Every setting is checked before a host is made: a bad one is named with what is accepted.
refuse() { echo "allreduce_on_hosts.sh: $1; accepted: $2" >&2; exit 2; }
in_range() { [[ $1 =~ ^[1-9][0-9]*$ ]] && ((${#1} <= 6 && $1 >= $2 && $1 <= $3)); }
in_range "$nhosts" 2 16 || refuse "HOSTS=$nhosts" "2 to 16"
in_range "$per_host" 1 64 || refuse "PER_HOST=$per_host" "1 to 64"
in_range "$rounds" 1 100 || refuse "ROUNDS=$rounds" "1 to 100"
in_range "$repeat" 1 100 || refuse "REPEAT=$repeat" "1 to 100"
[[ -z ${ITERS:-} ]] || in_range "$ITERS" 1 100000 || refuse "ITERS=$ITERS" "1 to 100000, or unset (as many as Open MPI's)"
for size in "MIN=$min" "MAX=$max"; do
  [[ ${size#*=} =~ ^([1-9][0-9]{0,10}|[1-9][0-9]{0,6}[KMG])$ ]] || refuse "$size" "a size in bytes, with K, M or G for KiB, MiB, GiB (4K, 64M)"
done
(($(numfmt --from=iec "$min") <= $(numfmt --from=iec "$max"))) || refuse "MIN=$min above MAX=$max" "MIN at most MAX"
[[ $op == allreduce || $op == broadcast || $op == allgather ]] || refuse "OP=$op" "allreduce, broadcast, allgather"
for backend in ${BACKENDS-hier gloo}; do
  [[ $backend == hier || $backend == gloo || $backend == auto ]] || refuse "BACKENDS=${BACKENDS}" "hier, gloo, auto, space-separated, or empty"
done
[[ ${MPI:-yes} == yes || ${MPI:-yes} == no ]] || refuse "MPI=$MPI" "yes, no"
[[ -z ${RATE:-} || ${RATE,,} =~ ^[0-9]+(\.[0-9]+)?[kmgt]?(bit|bps)$ ]] ||
  refuse "RATE=$RATE" "a tc rate (1gbit, 100mbit, 500kbps), or unset for none"
[[ $(id -u) == 0 ]] || { echo "allreduce_on_hosts.sh: needs root (network namespaces)" >&2; exit 2; }
# shellcheck source=tests/multinode/hosts.sh
source "$here/../tests/multinode/hosts.sh"
names=()
for ((k = 0; k < nhosts; k++)); do names+=("n$k"); done
hosts_up "${names[@]}" || exit 1
if [[ -n ${RATE:-} ]]; then
  for name in "${names[@]}"; do
    on_host "$name" tc qdisc add dev eth0 root tbf rate "$RATE" burst 1mb latency 50ms || exit 1
    tc -n "$HOSTS_RUN-switch" qdisc add dev "${HOSTS_PORT[$name]}" root tbf rate "$RATE" burst 1mb latency 50ms || exit 1
  done
fi
export FASTRUN_STORE_TOKEN=allreduce-on-hosts
count=(--mpi-iters)
[[ -n ${ITERS:-} ]] && count=(--iters "$ITERS")
echo "# $nhosts hosts x $per_host ranks, rate ${RATE:-unlimited (veth)}; $(uptime)"
port=29500
status=0  # 1 when a part failed: the table above it is then short

# One run: each backend's table, then Open MPI's lines; each is also kept as $HOSTS_DIR/rep-R-WHO
# for the spread below.
run_once() {
  local rep=$1 backend k pid pids failed hostlist
  for backend in ${BACKENDS-hier gloo}; do
    port=$((port + 1))
    pids=()
    for ((k = nhosts - 1; k >= 0; k--)); do
      start_on_host "n$k" "$fastrun" --nnodes "$nhosts" --node-rank "$k" --master-addr "$(host_addr n0)" \
        --master-port "$port" --nproc "$per_host" "$bench" "$op" --backend "$backend" --min "$min" --max "$max" \
        "${count[@]}" --rounds "$rounds" \
        >"$HOSTS_DIR/out-$backend-$k" 2>"$HOSTS_DIR/err-$backend-$k" &
      pids+=($!)
    done
    failed=0
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    ((failed)) && { echo "backend $backend failed:"; cat "$HOSTS_DIR/err-$backend-"*; status=1; }
    cat "$HOSTS_DIR/out-$backend-0"
    cp "$HOSTS_DIR/out-$backend-0" "$HOSTS_DIR/rep-$rep-$backend"
  done
  if [[ ${MPI:-yes} != yes ]]; then
    :
  elif [[ $op != allreduce ]]; then
    echo "# Open MPI: only its all-reduce is timed here (fastrun-mpi-allreduce)"
  elif command -v mpirun >/dev/null && [[ -x $mpi_bench ]]; then
    hostlist=$(for name in "${names[@]}"; do printf '%s:%s,' "$name" "$per_host"; done)
    mkdir -p "$HOSTS_DIR/ompi-tmp"
    echo "# Open MPI MPI_Allreduce, $nhosts hosts x $per_host ranks (b2b <bytes> <s per op>)"
    on_host n0 mpirun --allow-run-as-root --oversubscribe --mca plm_rsh_agent "$(hosts_rsh_agent)" \
      --mca orte_tmpdir_base "$HOSTS_DIR/ompi-tmp" ${MPI_ARGS:-} --host "${hostlist%,}" -np $((nhosts * per_host)) \
      "$mpi_bench" "$(numfmt --from=iec "$min")" "$(numfmt --from=iec "$max")" "$rounds" back-to-back |
      tee "$HOSTS_DIR/rep-$rep-mpi" || { echo "Open MPI failed (mpirun's exit status $?)"; status=1; }
  else
    echo "# Open MPI: mpirun or $mpi_bench missing"
  fi
}

# REPEAT > 1: per size, each column's median and range over the runs (each run's figure its
# best of ROUNDS), so that a comparison shows its run-to-run spread beside Open MPI's.
spread() {
  local who=() name
  for name in ${BACKENDS-hier gloo} mpi; do [[ -e $HOSTS_DIR/rep-1-$name ]] && who+=("$name"); done
  echo "# spread over $repeat runs in turn, µs per call: median [min-max] (each run's figure: its best of $rounds rounds)"
  for name in "${who[@]}"; do cat "$HOSTS_DIR"/rep-*-"$name" | sed "s/^/$name /"; done | awk -v cols="${who[*]}" '
    function bytes(n, unit) { return n * (unit == "GiB" ? 2^30 : unit == "MiB" ? 2^20 : unit == "KiB" ? 2^10 : 1) }
    function label(b) { return b >= 2^30 ? b / 2^30 " GiB" : b >= 2^20 ? b / 2^20 " MiB" : b >= 2^10 ? b / 2^10 " KiB" : b " B" }
    function sort(v, n,   i, j, x) {  # ascending, in place: a few values per cell
      for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j] < v[j - 1]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
    }
    $2 == "b2b" { t[$3, $1] = t[$3, $1] " " $4 * 1e6; sizes[$3]; next }
    $3 ~ /^(B|KiB|MiB|GiB)$/ && $6 ~ /^[0-9.]+$/ { b = bytes($2, $3); t[b, $1] = t[b, $1] " " $6; sizes[b] }
    function cell(list,   v, n) {
      n = split(list, v, " ")
      if (n == 0) return "-"
      sort(v, n)
      return sprintf("%.1f [%.1f-%.1f]", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2, v[1], v[n])
    }
    END {
      ncol = split(cols, c, " ")
      line = sprintf("#%9s", "size")
      for (k = 1; k <= ncol; k++) line = line sprintf(" %28s", c[k] == "mpi" ? "Open MPI" : c[k])
      print line
      n = 0
      for (b in sizes) order[++n] = b + 0
      sort(order, n)
      for (i = 1; i <= n; i++) {
        line = sprintf("%10s", label(order[i]))
        for (k = 1; k <= ncol; k++) line = line sprintf(" %28s", cell(t[order[i], c[k]]))
        print line
      }
    }'
}

for ((rep = 1; rep <= repeat; rep++)); do
  ((repeat == 1)) || echo "# run $rep of $repeat"
  run_once "$rep"
done
((repeat == 1)) || spread
exit "$status"
