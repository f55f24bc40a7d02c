#pragma once
// The environment contract (docs/environment.md): the variables every rank gets. A child's environment is
// always built as a fresh vector of "NAME=value" strings from a copy of the parent's; the
// parent's environ is never changed to pass values on (in-process spawn sets rank 0's own
// variables with apply_to_self, once, before any child exists).
#include <string>
#include <utility>
#include <vector>

#include "fastrun/launcher/job_config.h"

namespace fastrun::launcher {

// The contract's variables for local rank `rank` of `job` (global rank: job.node.rank_offset +
// rank), in a fixed order: FASTRUN_RANK, FASTRUN_WORLD_SIZE, FASTRUN_LOCAL_RANK,
// FASTRUN_LOCAL_WORLD_SIZE, FASTRUN_NODE_RANK, FASTRUN_NNODES, FASTRUN_RUN_ID, FASTRUN_STORE,
// FASTRUN_GLOBAL_SEED, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// FASTRUN_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT (the attempt, torchrun's name too), then
// MASTER_ADDR/MASTER_PORT (when a port was picked), FASTRUN_STORE_TOKEN and FASTRUN_GLOO_HOST
// (multi-node), then CUDA_VISIBLE_DEVICES and USER_CUDA_VISIBLE_DEVICES.
std::vector<std::pair<std::string, std::string>> rank_variables(const JobConfig& job, int rank);

// `base` ("NAME=value" entries, e.g. a copy of environ) with rank_variables() replacing any entry
// of the same name. Entries without '=' are kept as they are.
std::vector<std::string> build_child_env(const std::vector<std::string>& base, const JobConfig& job, int rank);

// A copy of this process's environ.
std::vector<std::string> current_environment();

// setenv() every rank_variables(job, rank) in this process (rank 0 of the in-process spawn).
void apply_to_self(const JobConfig& job, int rank);

}  // namespace fastrun::launcher
