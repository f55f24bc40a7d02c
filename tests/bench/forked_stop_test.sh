#!/usr/bin/env bash
# forked_stop_test.sh BENCH SIGNAL: a bench that forks its own ranks (fastrun-bench p2p), stopped
# by SIGNAL mid-run, dies of that signal within seconds and leaves neither a rank nor its store's
# segment in /dev/shm (bench/forked_group.h). The signal goes to the bench alone (kill PID), as
# `kill` from another terminal sends it; Ctrl-C (the whole process group) is the easier case.
set -uo pipefail
bench=$1 sig=$2
# pingpong on gloo runs for minutes (20,000 round trips per small size): stopped mid-run.
# As from a terminal: a shell starts background jobs with SIGINT ignored, and the bench keeps
# what it was started ignoring.
setsid env --default-signal=INT,TERM,HUP "$bench" p2p --backend gloo --op pingpong --max 67108864 --no-mpi >/dev/null 2>&1 &
pid=$!
segment=/dev/shm/fastrun-benchp2p$pid-store
ranks=
# Whatever the outcome, nothing of the bench outlives the test.
trap 'kill -9 $pid $ranks 2>/dev/null; rm -f "$segment"' EXIT
for _ in $(seq 100); do [ -e "$segment" ] && break; sleep 0.05; done
[ -e "$segment" ] || { echo "FAIL: no store segment $segment after 5 s"; exit 1; }
# The bench forks its 2 ranks after it made the store: under a sanitizer on a busy machine that
# can be a while after the segment appears.
for _ in $(seq 100); do
  ranks=$(pgrep -P "$pid" | tr '\n' ' ')
  [ "$(wc -w <<<"$ranks")" -ge 2 ] && break
  sleep 0.05
done
[ "$(wc -w <<<"$ranks")" -ge 2 ] || { echo "FAIL: the bench has ranks '$ranks' 5 s after its store, wanted 2"; exit 1; }
sleep 0.5
start=$(date +%s%N)
kill -"$sig" "$pid"
timeout 20 tail --pid="$pid" -f /dev/null
wait "$pid"
code=$?
took_ms=$((($(date +%s%N) - start) / 1000000))
want=$((128 + $(kill -l "$sig")))
echo "exit status $code after $took_ms ms (wanted $want); ranks were: $ranks"
[ "$code" -eq "$want" ] || { echo "FAIL: exit status $code, wanted $want (death by SIG$sig)"; exit 1; }
left=
for r in $ranks; do kill -0 "$r" 2>/dev/null && left="$left $r"; done
[ -z "$left" ] || { echo "FAIL: rank pids$left still run"; exit 1; }
[ ! -e "$segment" ] || { echo "FAIL: $segment left behind"; exit 1; }
echo "PASS: stopped by SIG$sig, nothing left"
