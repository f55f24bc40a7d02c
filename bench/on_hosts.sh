#!/usr/bin/env bash
# A multi-node benchmark on separate hosts: makes two hosts out of network namespaces
# (tests/multinode/hosts.sh: own address, host name and /dev/shm each, joined by a bridge that
# the machine's own network never sees), then runs
#   fastrun-bench SUBJECT --nodes 2 --on-node 'enter n0' --on-node 'enter n1' --master-addr <n0>
# SUBJECT: launch (one fastrun per host against the one-node job of the same total; default
# --ranks 1,4,16) or restart (a rank of the last host dies and the job restarts across both,
# beside torchrun 2.x's c10d rendezvous; default --ranks 2). The hosts are removed whatever
# happens (exit, Ctrl-C, SIGTERM; a SIGKILLed run by the watchdog of hosts.sh). Without root or
# iproute2/util-linux it says so and runs both launchers here on 127.0.0.1.
#   bench/on_hosts.sh launch|restart [BUILD_DIR] [fastrun-bench SUBJECT options]
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
subject=${1:-}
case $subject in
launch) default_ranks=1,4,16 ;;
restart) default_ranks=2 ;;
*) echo "on_hosts.sh: unknown subject '$subject'; accepted: launch, restart" >&2; exit 2 ;;
esac
shift
build=$(readlink -f "${1:-$here/../build}")  # absolute: nsenter -m starts in the holder's directory
shift $(($# > 0 ? 1 : 0))
bench=$build/bench/fastrun-bench fastrun=$build/tools/fastrun
for bin in "$bench" "$fastrun"; do
  [[ -x $bin ]] || { echo "on_hosts.sh: no $bin; accepted: a build directory holding it (tools/build.sh)" >&2; exit 2; }
done
options=("$@")
((${#options[@]})) || options=(--ranks "$default_ranks")

able=yes
if [[ $(id -u) != 0 ]]; then
  able="not root (namespaces need it)"
else
  for tool in ip nsenter unshare setsid; do
    command -v "$tool" >/dev/null || able="'$tool' is not installed (tools/install-deps.sh)"
  done
fi
if [[ $able != yes ]]; then
  echo "note: no separate hosts: $able; both launchers run on this host, master 127.0.0.1"
  exec "$bench" "$subject" --nodes 2 --fastrun "$fastrun" "${options[@]}"
fi

# shellcheck source=tests/multinode/hosts.sh
source "$here/../tests/multinode/hosts.sh"
hosts_up n0 n1 || exit 1
# In the background, so that a signal runs its trap at once (bash defers traps until a
# foreground command ends); the trap stops the bench, and the EXIT trap then removes the hosts.
"$bench" "$subject" --nodes 2 --fastrun "$fastrun" --master-addr "$(host_addr n0)" \
  --on-node "nsenter -t ${HOSTS_HOLDER[n0]} -n -u -m -r --" --on-node "nsenter -t ${HOSTS_HOLDER[n1]} -n -u -m -r --" \
  "${options[@]}" &
bench_pid=$!
trap 'kill "$bench_pid" 2>/dev/null; wait "$bench_pid"; exit 130' INT
trap 'kill "$bench_pid" 2>/dev/null; wait "$bench_pid"; exit 143' TERM
wait "$bench_pid"
