#pragma once
// The environment srun (Slurm 22.05) gives one task of a step, for tests that play srun on one
// machine: the same names and formats as a real step (block distribution: node 0 gets the first
// tasks), so a check written against it also holds for a real srun (the real-Slurm harness).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "test_support/scoped_env.h"

namespace fastrun::test {

struct SlurmStep {
  long job_id = 4242;
  long step_id = 0;
  std::string nodelist = "127.0.0.[1-2]";  // compressed, as Slurm prints it
  std::vector<int> tasks_per_node = {2, 2};
};

// "2(x2),1": Slurm's compressed per-node task counts.
inline std::string compressed_counts(const std::vector<int>& counts) {
  std::string out;
  for (std::size_t i = 0; i < counts.size();) {
    std::size_t j = i;
    while (j < counts.size() && counts[j] == counts[i]) ++j;
    if (!out.empty()) out += ',';
    out += j - i > 1 ? fmt::format("{}(x{})", counts[i], j - i) : std::to_string(counts[i]);
    i = j;
  }
  return out;
}

// Every SLURM_* variable fastrun reads (and a few it does not), for task `task` of the step.
inline std::map<std::string, std::string> slurm_task_env(const SlurmStep& s, int task) {
  int ntasks = 0, node = -1, local = 0;
  for (std::size_t k = 0; k < s.tasks_per_node.size(); ++k) {
    if (node < 0 && task < ntasks + s.tasks_per_node[k]) {
      node = static_cast<int>(k);
      local = task - ntasks;
    }
    ntasks += s.tasks_per_node[k];
  }
  const std::string nnodes = std::to_string(s.tasks_per_node.size());
  const std::string per_node = compressed_counts(s.tasks_per_node);
  return {
      {"SLURM_JOB_ID", std::to_string(s.job_id)}, {"SLURM_JOBID", std::to_string(s.job_id)},
      {"SLURM_STEP_ID", std::to_string(s.step_id)}, {"SLURM_STEPID", std::to_string(s.step_id)},
      {"SLURM_JOB_NODELIST", s.nodelist}, {"SLURM_NODELIST", s.nodelist}, {"SLURM_STEP_NODELIST", s.nodelist},
      {"SLURM_JOB_NUM_NODES", nnodes}, {"SLURM_NNODES", nnodes}, {"SLURM_STEP_NUM_NODES", nnodes},
      {"SLURM_NTASKS", std::to_string(ntasks)}, {"SLURM_NPROCS", std::to_string(ntasks)},
      {"SLURM_STEP_NUM_TASKS", std::to_string(ntasks)},
      {"SLURM_TASKS_PER_NODE", per_node}, {"SLURM_STEP_TASKS_PER_NODE", per_node},
      {"SLURM_PROCID", std::to_string(task)}, {"SLURM_LOCALID", std::to_string(local)},
      {"SLURM_NODEID", std::to_string(node)}, {"SLURM_JOB_NAME", "fastrun-test"},
      {"SLURM_CPUS_ON_NODE", "2"},
  };
}

// The SLURM_* and OMPI_* names a test must clear so that only what it sets is seen.
inline std::vector<std::string> engine_variable_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : slurm_task_env(SlurmStep{}, 0)) names.push_back(k);
  for (const char* n : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_num_nodes", "OMPI_MCA_ess_base_jobid",
                        "OMPI_MCA_orte_hnp_uri"})
    names.emplace_back(n);
  return names;
}

// Exactly `vars` among the engine and rendezvous variables, for the scope (setenv: before any
// thread starts).
class EngineEnv {
 public:
  explicit EngineEnv(const std::map<std::string, std::string>& vars) {
    std::vector<std::string> clear = engine_variable_names();
    for (const char* n : {"FASTRUN_RANK", "FASTRUN_WORLD_SIZE", "FASTRUN_STORE", "FASTRUN_STORE_TOKEN", "RANK",
                          "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "FASTRUN_NNODES", "FASTRUN_NODE_RANK",
                          "FASTRUN_MASTER_ADDR", "FASTRUN_MASTER_PORT"})
      clear.emplace_back(n);
    for (const auto& n : clear) scoped_.push_back(std::make_unique<ScopedEnv>(n.c_str(), nullptr));
    for (const auto& [k, v] : vars) scoped_.push_back(std::make_unique<ScopedEnv>(k.c_str(), v.c_str()));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> scoped_;
};

}  // namespace fastrun::test
