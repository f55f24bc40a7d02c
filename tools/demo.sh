#!/usr/bin/env bash
# The main job: install, build, and train the example MLP on 4 CPU ranks with per-rank logs.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
log_dir=${LOG_DIR:-/tmp/fastrun-demo-logs}
echo "demo: fastrun --nproc 4 --log-dir $log_dir build/examples/train_mlp/train_mlp"
build/tools/fastrun --nproc 4 --log-dir "$log_dir" build/examples/train_mlp/train_mlp
echo "demo: per-rank logs are under $log_dir/<run-id>/rank-<r>/{stdout,stderr}.log:"
ls -d "$log_dir"/*/rank-* | tail -n 4
