#!/usr/bin/env bash
# The nccl backend's GPU checks, for a machine with at least one CUDA GPU (a few minutes):
#   1. configure with CUDA on (must report "NCCL ON") and build the check program, the Catch2
#      backend and DDP tests and the launcher CLI;
#   2. world of one through the launcher: `fastrun --devices 0 fastrun-nccl-checks` joins on the
#      nccl backend and runs every collective, dtype and op on device buffers, values checked
#      (without a launcher binary: the program alone with FASTRUN_RANK=0 FASTRUN_WORLD_SIZE=1);
#      (and, with two GPUs or more, the same with --devices 0,1);
#   3. the watchdog paths with FASTRUN_NCCL_ON_ERROR=raise: an op timeout (a group whose op
#      timeout is 1 s, its stream stalled by a sleeping host function; the next collective and
#      point-to-point op are then refused by the group runtime, quoting it), a peer failure marked
#      under the failure key, and an init whose second rank never joins (aborted at the deadline);
#   4. the exit policy: after an op timeout the watchdog must end the rank with exit 70;
#   5. the Catch2 cases tagged [nccl], DDP on CUDA buffers (test_ddp "[cuda]") and the forked
#      ranks of test_nccl_ranks (one GPU each; cases needing more GPUs than visible skip: with
#      two GPUs, send/recv numbered by the Group and refused after a failure): they skip without
#      a GPU; here they must run;
#   6. the CUDA example trainer: `fastrun --devices 0 train_mlp_cuda` (and --accum 2, and with
#      two GPUs --devices 0,1) must end with the CPU trainer's single-rank weights on the same
#      seed, within 1e-4 relative (train_mlp_compare prints PASS/FAIL).
# Usage: tools/gpu_checks.sh            (BUILD_DIR=build-gpu by default; extra args go to cmake)
#        GPU_CHECKS_PREBUILT=DEST tools/gpu_checks.sh
#          on a GPU machine that cannot configure the project (a bare CUDA image without the
#          Debian development packages): step 1 takes the programs tools/gpu_stage.sh DEST built
#          and staged elsewhere, and NCCL from the system or from the nvidia-nccl wheel.
# Exit status: 0 when every step passed. docs/backend-nccl.md explains what each step shows.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build_dir=${BUILD_DIR:-build-gpu}
jobs=$(nproc)
failures=0
step() { echo; echo "=== $*"; }
pass() { echo "PASS step: $*"; }
fail() { echo "FAIL step: $*"; failures=$((failures + 1)); }

step "0. machine"
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "(no nvidia-smi)"
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"

# use_prebuilt: the programs tools/gpu_stage.sh staged in $GPU_CHECKS_PREBUILT, at the absolute
# path they were built at (their RUNPATH and the launcher path two tests start), with the staged
# libraries and an NCCL found here on the loader's path.
use_prebuilt() {
  local stage origin nccl_dir=""
  stage=$(cd "$GPU_CHECKS_PREBUILT" && pwd) || return 1
  origin=$(cat "$stage/origin") || return 1
  if [ "$(cd "$build_dir" 2>/dev/null && pwd -P)" != "$origin" ]; then  # else: staged here, used in place
    if [ -e "$origin" ]; then echo "$origin exists and is not $build_dir: cannot place the programs"; return 1; fi
    rm -rf "$build_dir" && cp -a "$stage/$build_dir" "$build_dir" || return 1
    mkdir -p "$(dirname "$origin")" && ln -s "$PWD/$build_dir" "$origin" || return 1
  fi
  if ! ldconfig -p | grep -q 'libnccl\.so\.2 '; then
    nccl_dir=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    [ -e "$nccl_dir/libnccl.so.2" ] || { echo "no libnccl.so.2: neither ldconfig nor the nvidia-nccl wheel has one"; return 1; }
  fi
  export LD_LIBRARY_PATH=$stage/lib${nccl_dir:+:$nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "programs from $stage (built at $origin); NCCL from ${nccl_dir:-the system}"
  ldd "$build_dir/tests/gpu/fastrun-nccl-checks" | grep -E 'not found|nccl|cudart'
  ! ldd "$build_dir/tests/gpu/fastrun-nccl-checks" "$build_dir/tools/fastrun" | grep -q 'not found'
}

have_launcher=0
have_tests=0
if [ -n "${GPU_CHECKS_PREBUILT:-}" ]; then
  step "1. prebuilt programs ($GPU_CHECKS_PREBUILT, made by tools/gpu_stage.sh)"
  if ! use_prebuilt; then echo "FAIL step: prebuilt programs"; exit 1; fi
  checks=$build_dir/tests/gpu/fastrun-nccl-checks
  have_launcher=1
  have_tests=1
else
  step "1. configure and build ($build_dir)"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if ! cmake -S . -B "$build_dir" "${generator[@]}" -DFASTRUN_WITH_CUDA=ON -DFASTRUN_CUDA_MODEL=OFF -DFASTRUN_WERROR=ON "${launcher[@]}" "$@" \
      >"$build_dir.configure.log" 2>&1; then
    cat "$build_dir.configure.log"; echo "FAIL step: configure"; exit 1
  fi
  grep "fastrun: CUDA" "$build_dir.configure.log"
  if ! grep -q "NCCL ON" "$build_dir.configure.log"; then
    echo "FAIL step: configure did not find CUDA and NCCL (see $build_dir.configure.log)"; exit 1
  fi
  if ! timeout 900 cmake --build "$build_dir" -j"$jobs" --target fastrun-nccl-checks; then
    echo "FAIL step: build fastrun-nccl-checks"; exit 1
  fi
  checks=$build_dir/tests/gpu/fastrun-nccl-checks
  if timeout 900 cmake --build "$build_dir" -j"$jobs" --target fastrun >/dev/null 2>&1 && [ -x "$build_dir/tools/fastrun" ]; then
    have_launcher=1
  else
    echo "(no launcher binary: step 2 runs the check program directly)"
  fi
  if timeout 900 cmake --build "$build_dir" -j"$jobs" --target test_backend test_ddp test_nccl_ranks; then have_tests=1; else fail "build test_backend test_ddp test_nccl_ranks"; fi
  pass "build"
fi

step "2. world of one: init and every collective"
if [ "$have_launcher" = 1 ]; then
  timeout 300 "$build_dir/tools/fastrun" --devices 0 "$checks"
else
  FASTRUN_RANK=0 FASTRUN_WORLD_SIZE=1 timeout 300 "$checks"
fi
rc=$?
if [ "$rc" = 0 ]; then pass "collectives"; else fail "collectives (exit $rc)"; fi

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$have_launcher" = 1 ] && [ "${gpus:-0}" -ge 2 ]; then
  step "2b. two ranks on two GPUs through the launcher"
  timeout 300 "$build_dir/tools/fastrun" --devices 0,1 "$checks"
  rc=$?
  if [ "$rc" = 0 ]; then pass "collectives, 2 ranks"; else fail "collectives, 2 ranks (exit $rc)"; fi
fi

step "3. watchdog: op timeout, peer failure, init deadline (FASTRUN_NCCL_ON_ERROR=raise)"
FASTRUN_NCCL_ON_ERROR=raise timeout 120 "$checks" --failures
rc=$?
if [ "$rc" = 0 ]; then pass "watchdog paths"; else fail "watchdog paths (exit $rc)"; fi

step "4. watchdog exit policy: the rank is ended with exit 70"
start=$(date +%s)
FASTRUN_NCCL_ON_ERROR="exit" timeout 120 "$checks" --exit-policy
rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" = 70 ] && [ "$took" -le 20 ]; then pass "exit policy (exit 70 after ${took} s)"; else fail "exit policy (exit $rc after ${took} s, want 70 within 20 s)"; fi

step "5. Catch2 [nccl] cases and DDP on CUDA buffers"
# run_catch BINARY FILTER SKIP_TEXT: the cases must pass, and none may skip for want of a GPU
# (other skips are allowed: test_backend's no-GPU error case skips where a GPU is visible).
# One process per case, as CTest runs them: a skip (tests/test_support/skip.h) ends its process
# with exit code 77.
run_catch() {
  local name case_name out rc
  while IFS= read -r case_name; do
    [ -n "$case_name" ] || continue
    name="$(basename "$1") $case_name"
    # Catch's test spec splits on "," and reads "[...]" as tags: escape them as CTest's entries do.
    out=$(timeout 300 "$build_dir/tests/$1" "$(printf '%s' "$case_name" | sed 's/[],[]/\\&/g')" 2>&1)
    rc=$?
    echo "$out" | tail -20
    if [ "$rc" = 77 ]; then
      if echo "$out" | grep -q "FASTRUN-SKIPPED: $3"; then fail "$name skipped although a GPU should be visible"
      else pass "$name (skipped: $(echo "$out" | grep -m1 'FASTRUN-SKIPPED:'))"; fi
    elif [ "$rc" != 0 ]; then fail "$name (exit $rc)"
    else pass "$name"; fi
  done < <("$build_dir/tests/$1" --list-test-names-only "$2")
}
if [ "$have_tests" = 1 ]; then
  run_catch backend/test_backend "[nccl]" "no GPU visible"
  run_catch ddp/test_ddp "[cuda]" "no CUDA device visible"
  # forked ranks, one GPU each: the 2- and 3-rank cases skip where fewer GPUs are visible
  run_catch gpu/test_nccl_ranks "[nccl]" ".*a rank sees 0\$"
fi

step "6. train_mlp_cuda against the CPU trainer (same seed, same samples)"
if [ -n "${GPU_CHECKS_PREBUILT:-}" ] || timeout 900 cmake --build "$build_dir" -j"$jobs" --target train_mlp train_mlp_cuda train_mlp_compare; then
  ex=$build_dir/examples/train_mlp
  tmp=$(mktemp -d /tmp/fastrun-gpu-train-XXXXXX)
  cfg=(--samples 2048 --epochs 2 --global-batch 64 --hidden 32 --seed 7)
  # The CPU reference with the GPUs hidden: a world of one on gloo, host buffers.
  CUDA_VISIBLE_DEVICES="" timeout 120 "$ex/train_mlp" "${cfg[@]}" --weights-out "$tmp/cpu.ckpt"
  rc=$?
  [ "$rc" = 0 ] || fail "train_mlp CPU reference (exit $rc)"
  gpu_run() {  # gpu_run DEVICES OUT [flags...]: train_mlp_cuda through the launcher (or alone)
    local devices=$1 out=$2; shift 2
    if [ "$have_launcher" = 1 ]; then
      timeout 180 "$build_dir/tools/fastrun" --devices "$devices" "$ex/train_mlp_cuda" "${cfg[@]}" --weights-out "$out" "$@"
    else
      FASTRUN_RANK=0 FASTRUN_WORLD_SIZE=1 timeout 180 "$ex/train_mlp_cuda" "${cfg[@]}" --weights-out "$out" "$@"
    fi
  }
  compare() {  # compare NAME RC CHECKPOINT
    if [ "$2" != 0 ]; then fail "$1 (exit $2)"
    elif "$ex/train_mlp_compare" "$tmp/cpu.ckpt" "$3" 1e-4; then pass "$1"
    else fail "$1 (weights differ from the CPU trainer's)"; fi
  }
  gpu_run 0 "$tmp/gpu1.ckpt"; compare "train_mlp_cuda, world of one" $? "$tmp/gpu1.ckpt"
  gpu_run 0 "$tmp/gpu1acc.ckpt" --accum 2; compare "train_mlp_cuda, --accum 2 (no_sync on device)" $? "$tmp/gpu1acc.ckpt"
  if [ "$have_launcher" = 1 ] && [ "${gpus:-0}" -ge 2 ]; then
    gpu_run 0,1 "$tmp/gpu2.ckpt"; compare "train_mlp_cuda, 2 ranks on 2 GPUs" $? "$tmp/gpu2.ckpt"
  fi
  rm -rf "$tmp"
else
  fail "build train_mlp_cuda (needs a CUDA compiler: see the configure log)"
fi

echo
if [ "$failures" = 0 ]; then echo "GPU checks: all steps passed"; else echo "GPU checks: $failures step(s) failed"; fi
[ "$failures" = 0 ]
