# Separate hosts on one machine, for tests (source it from bash; needs root, iproute2, util-linux).
#
# Each host is a network namespace with its own address on one private /24, its own host name
# (a UTS namespace) and its own /dev/shm and /etc/hosts (a mount namespace), kept alive by one
# holder process that the other functions enter with nsenter. The hosts are joined by veth
# pairs to a bridge that lives in a namespace of its own (the "switch"), so the machine's own
# network namespace gets neither an interface nor a route to the test addresses: traffic stays
# inside these namespaces. Every host's /etc/hosts names all the hosts.
#
#   hosts_skip_unless_able          skip the test (test_support/skip.sh) unless root with the tools
#   hosts_up NAME...                one host per name, addresses HOSTS_NET.11, .12, ... in order
#   on_host NAME CMD...             run CMD on that host and wait for it
#   start_on_host NAME CMD... &     the same in the background; it execs, so $! is CMD's pid
#   host_addr NAME                  its address
#   host_unplug NAME                its switch port down: the network to it is cut
#   host_leftovers NAME             pids on that host other than its holder, and its /dev/shm entries
#   hosts_rsh_agent                 prints the path of an rsh agent for mpirun (--mca plm_rsh_agent)
#   hosts_down                      stop everything on the hosts and remove them (also on EXIT/INT/TERM)
#   hosts_of_run PID                the namespaces still named for the run of process PID (a script
#                                   that sourced this file, e.g. a bench), space-separated
#   $HOSTS_DIR                      a temporary directory of the run, removed with the hosts
#
# Names are frmn-<pid of the test>-<name>, so parallel runs never collide; a run that dies by
# SIGKILL is cleaned up by its watchdog (a setsid'd process that outlives the process group),
# and any namespace of a dead run is swept by the next hosts_up.

# shellcheck source=tests/test_support/skip.sh
source "$(dirname "${BASH_SOURCE[0]}")/../test_support/skip.sh"
HOSTS_PREFIX=frmn
HOSTS_NET=10.77.0
declare -gA HOSTS_HOLDER=() HOSTS_ADDR=() HOSTS_PORT=()
declare -ga HOSTS_NAMES=()
HOSTS_RUN="$HOSTS_PREFIX-$$"
HOSTS_DIR=""
HOSTS_WATCHDOG=""

hosts_skip_unless_able() {
  if [[ $(id -u) != 0 ]]; then
    fastrun_skip "separate hosts need root (network, UTS and mount namespaces); running as $(id -un)"
  fi
  local tool
  for tool in ip nsenter unshare setsid; do
    if ! command -v "$tool" >/dev/null; then
      fastrun_skip "'$tool' is not installed (tools/install-deps.sh installs iproute2 and util-linux)"
    fi
  done
}

# Processes of run $1 in a network namespace whose inode is among $2...: found through /proc,
# for a namespace whose name is gone. The run's mark in the environment (FRMN_HOSTS_RUN, which
# everything started on the hosts inherits) is required too: a freed namespace's inode number
# is soon given to a new one, maybe another job's.
hosts_pids_by_inode() {
  local run=$1 p link ino
  shift
  for p in /proc/[0-9]*; do
    link=$(readlink "$p/ns/net" 2>/dev/null) || continue
    for ino in "$@"; do
      [[ $link == "net:[$ino]" ]] || continue
      grep -qzx "FRMN_HOSTS_RUN=$run" "$p/environ" 2>/dev/null && echo "${p#/proc/}"
    done
  done
}

# The namespaces of run $1 (frmn-<pid>): every process in them (TERM, up to 3 s, then KILL),
# then the namespaces. Fails, naming them, if any process or namespace is still there.
# A namespace whose name someone else removed (`ip netns del`) lives on while processes are in
# it, out of `ip netns pids`' sight: hosts_up recorded every namespace's inode in the run's
# directory, and those processes are found by it (seen: two slurmstepd left running for an hour
# after another job's clean-up deleted this run's names mid-test).
hosts_remove_run() {
  local run=$1 namespaces inodes pids
  namespaces=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$run-")
  inodes=$(cat /tmp/"$run".*/netns-inodes 2>/dev/null | tr '\n' ' ')
  [[ -z $namespaces && -z $inodes ]] && return 0
  run_pids() {
    { for ns in $namespaces; do ip netns pids "$ns" 2>/dev/null; done
      [[ -z $inodes ]] || hosts_pids_by_inode "$run" $inodes; } | sort -u | tr '\n' ' '
  }
  # signal_and_wait SIG TENTHS: sends SIG to what still runs, waits for it to go; sets pids.
  signal_and_wait() {
    local i
    pids=$(run_pids)
    [[ -z $pids ]] && return
    kill "-$1" $pids 2>/dev/null
    for ((i = 0; i < $2; i++)); do
      pids=$(run_pids)
      [[ -z $pids ]] && return
      sleep 0.1
    done
  }
  signal_and_wait TERM 30
  [[ -n $pids ]] && signal_and_wait KILL 20
  for ns in $namespaces; do ip netns del "$ns" 2>/dev/null; done
  namespaces=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$run-")
  if [[ -n $pids || -n $namespaces ]]; then
    echo "hosts: could not remove everything of $run: pids [$pids], namespaces [$namespaces]" >&2
    return 1
  fi
}

# Namespaces and directories of runs whose test process is gone (killed before its trap and
# watchdog could run).
hosts_sweep_stale() {
  local run owner
  for run in $(ip netns list 2>/dev/null | awk '{print $1}' | sed -nE "s/^($HOSTS_PREFIX-[0-9]+)-.*/\1/p" | sort -u); do
    owner=${run#"$HOSTS_PREFIX"-}
    [[ $owner == "$$" ]] && continue
    kill -0 "$owner" 2>/dev/null && continue
    echo "hosts: removing the namespaces of $run (its test, pid $owner, is gone)" >&2
    hosts_remove_run "$run"
  done
  local dir
  for dir in /tmp/"$HOSTS_PREFIX"-*.*; do
    [[ -d $dir && $dir =~ ^/tmp/$HOSTS_PREFIX-([0-9]+)\. ]] || continue
    kill -0 "${BASH_REMATCH[1]}" 2>/dev/null && continue
    hosts_remove_run "$HOSTS_PREFIX-${BASH_REMATCH[1]}"  # its namespaces may have lost their names
    rm -rf "$dir"
  done
}

hosts_down() {
  local code=$?
  trap - EXIT INT TERM
  hosts_remove_run "$HOSTS_RUN" || code=1
  if [[ -n $HOSTS_WATCHDOG ]]; then
    kill "$HOSTS_WATCHDOG" 2>/dev/null
  fi
  [[ -n $HOSTS_DIR ]] && rm -rf "$HOSTS_DIR"
  HOSTS_NAMES=() HOSTS_WATCHDOG="" HOSTS_DIR=""
  return $code
}

hosts_up() {
  hosts_sweep_stale
  trap 'hosts_down; exit $?' EXIT  # a failed removal fails the test
  trap 'exit 130' INT
  trap 'exit 143' TERM
  HOSTS_DIR=$(mktemp -d "/tmp/$HOSTS_RUN.XXXXXX")
  export FRMN_HOSTS_RUN=$HOSTS_RUN  # marks what runs on the hosts (hosts_pids_by_inode)
  # Outlives a SIGKILL of this shell (and of its process group, as CTest's timeout does).
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 0.5; done; source "$2"; hosts_remove_run "$3"; rm -rf "$4"' \
    hosts-watchdog "$$" "${BASH_SOURCE[0]}" "$HOSTS_RUN" "$HOSTS_DIR" </dev/null >/dev/null 2>&1 &
  HOSTS_WATCHDOG=$!
  disown "$HOSTS_WATCHDOG"  # no "Terminated" job report when hosts_down stops it

  local sw="$HOSTS_RUN-switch" name ns i=0
  ip netns add "$sw" || return 1
  stat -L -c %i "/run/netns/$sw" >>"$HOSTS_DIR/netns-inodes" || return 1
  ip -n "$sw" link add br0 type bridge || return 1
  ip -n "$sw" link set br0 up || return 1

  local hosts_file="$HOSTS_DIR/hosts"
  printf '127.0.0.1 localhost\n' >"$hosts_file"
  for name in "$@"; do
    HOSTS_ADDR[$name]="$HOSTS_NET.$((11 + i))"
    printf '%s %s\n' "${HOSTS_ADDR[$name]}" "$name" >>"$hosts_file"
    i=$((i + 1))
  done
  i=0
  for name in "$@"; do
    ns="$HOSTS_RUN-$name"
    ip netns add "$ns" || return 1
    stat -L -c %i "/run/netns/$ns" >>"$HOSTS_DIR/netns-inodes" || return 1
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns" || return 1
    ip -n "$sw" link set "p$i" master br0 up || return 1
    HOSTS_PORT[$name]="p$i"
    ip -n "$ns" addr add "${HOSTS_ADDR[$name]}/24" dev eth0 || return 1
    ip -n "$ns" link set eth0 up || return 1
    ip -n "$ns" link set lo up || return 1
    # The holder: its own host name, /dev/shm and /etc/hosts, then nothing until it is stopped.
    # Its /sys is the namespace's (as `ip netns exec` gives), with the machine's cgroup mounts
    # carried over (slurmd needs them; `ip netns exec` alone loses them).
    mkdir "$HOSTS_DIR/cgroup-$name"
    nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private sh -c '
      set -e
      hostname "$1"
      if mountpoint -q /sys/fs/cgroup; then
        mount --rbind /sys/fs/cgroup "$4"
        umount -l /sys
        mount -t sysfs sysfs /sys
        mount --rbind "$4" /sys/fs/cgroup
        umount -l "$4"
      else
        umount -l /sys
        mount -t sysfs sysfs /sys
      fi
      mount -t tmpfs -o size=512m,mode=1777 tmpfs /dev/shm
      mount --bind "$2" /etc/hosts
      touch "$3"
      exec sleep infinity' \
      holder "$name" "$hosts_file" "$HOSTS_DIR/ready-$name" "$HOSTS_DIR/cgroup-$name" \
      </dev/null >/dev/null 2>"$HOSTS_DIR/holder-$name.err" &
    HOSTS_HOLDER[$name]=$!
    disown "${HOSTS_HOLDER[$name]}"
    HOSTS_NAMES+=("$name")
    i=$((i + 1))
  done
  for name in "$@"; do
    for ((i = 0; i < 200; i++)); do
      [[ -e $HOSTS_DIR/ready-$name ]] && break
      if ! kill -0 "${HOSTS_HOLDER[$name]}" 2>/dev/null; then
        echo "hosts: host $name failed to start: $(cat "$HOSTS_DIR/holder-$name.err")" >&2
        return 1
      fi
      sleep 0.05
    done
    [[ -e $HOSTS_DIR/ready-$name ]] || { echo "hosts: host $name not ready within 10 s" >&2; return 1; }
  done
}

host_addr() { echo "${HOSTS_ADDR[$1]}"; }

# The host's cable out of the switch: no packet in or out, no FIN, no RST (a crash or a cut).
host_unplug() { ip -n "$HOSTS_RUN-switch" link set "${HOSTS_PORT[$1]}" down; }
# ... and back in (a host that comes back after a cut).
host_plug() { ip -n "$HOSTS_RUN-switch" link set "${HOSTS_PORT[$1]}" up; }

# nsenter -r: the holder's root directory too. Entering a mount namespace resets the root to the
# namespace's own; run from a chroot (tools/fresh_root.sh), that is the machine's root, whose
# /dev/shm and /etc/hosts are not the host's.
host_enter() {
  [[ -n ${HOSTS_HOLDER[$1]:-} ]] || { echo "hosts: no host '$1' (hosts: ${HOSTS_NAMES[*]})" >&2; return 2; }
  HOSTS_ENTER=(nsenter -t "${HOSTS_HOLDER[$1]}" -n -u -m -r --wd="$PWD" --)
}

on_host() {
  host_enter "$1" || return
  shift
  "${HOSTS_ENTER[@]}" "$@"
}

start_on_host() {
  host_enter "$1" || exit
  shift
  exec "${HOSTS_ENTER[@]}" "$@"
}

hosts_of_run() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$HOSTS_PREFIX-$1-" | tr '\n' ' '; }

host_leftovers() {
  local name=$1 pid
  for pid in $(ip netns pids "$HOSTS_RUN-$name" 2>/dev/null); do
    [[ $pid == "${HOSTS_HOLDER[$name]}" ]] && continue
    echo "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) still runs on $name"
  done
  nsenter -t "${HOSTS_HOLDER[$name]}" -m -r -- find /dev/shm -mindepth 1 -maxdepth 1 -printf "/dev/shm/%f is left on $name\n"
}

# An rsh agent, as ssh is to mpirun: `AGENT HOST COMMAND...` runs COMMAND on that host through a
# shell (Open MPI hands it one command line to interpret, as ssh would). It enters the host by
# its holder's pid, so it works from inside any host's namespaces.
hosts_rsh_agent() {
  local agent="$HOSTS_DIR/rsh-agent" name
  if [[ ! -x $agent ]]; then
    {
      printf '#!/bin/sh\ncase "$1" in\n'
      for name in "${HOSTS_NAMES[@]}"; do printf '  %s) holder=%s ;;\n' "$name" "${HOSTS_HOLDER[$name]}"; done
      printf '  *) echo "rsh-agent: no host '"'"'$1'"'"' (hosts: %s)" >&2; exit 255 ;;\nesac\n' "${HOSTS_NAMES[*]}"
      printf 'shift\nexec nsenter -t "$holder" -n -u -m -r -- sh -c "$*"\n'
    } >"$agent"
    chmod +x "$agent"
  fi
  echo "$agent"
}
