#!/usr/bin/env bash
# The main job: install, build, and train the example MLP on 4 CPU ranks with per-rank logs.
# It installs and builds only what it runs (the build packages; the fastrun command, train_mlp
# and the hello example the README's next commands use), so that a fresh machine reaches the
# first training step in minutes; tools/test.sh installs and builds the rest into the same build/.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($#)); then  # before anything is installed or built: `--help` ran the whole demo
  echo "tools/demo.sh: takes no arguments, got '$*'; accepted: none (LOG_DIR sets where the logs go)" >&2
  exit 2
fi
tools/install-deps.sh build
BUILD_TARGETS="fastrun train_mlp hello" tools/build.sh -DFASTRUN_BUILD_TESTS=OFF
log_dir=${LOG_DIR:-/tmp/fastrun-demo-logs}
run_id=demo-$(date +%Y%m%d-%H%M%S)-$$
echo "demo: fastrun --nproc 4 --log-dir $log_dir --run-id $run_id build/examples/train_mlp/train_mlp"
build/tools/fastrun --nproc 4 --log-dir "$log_dir" --run-id "$run_id" build/examples/train_mlp/train_mlp
echo "demo: each rank's stdout.log and stderr.log are in:"
ls -d "$log_dir/$run_id"/rank-*
