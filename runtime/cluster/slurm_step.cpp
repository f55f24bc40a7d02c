// slurm_step(): the srun step this process is a task of (engine_job.h).
#include <charconv>

#include <fmt/format.h>

#include "fastrun/runtime/cluster/engine_job.h"
#include "fastrun/runtime/cluster/foreign_env.h"
#include "fastrun/runtime/cluster/slurm_hostlist.h"
#include "fastrun/runtime/error.h"

namespace fastrun::cluster {
namespace {

// SLURM_STEP_TASKS_PER_NODE: "2(x3),1" = 2 tasks on each of nodes 0-2, 1 on node 3.
int tasks_on_node(const char* name, const std::string& spec, int node) {
  const auto bad = [&] {
    return ConfigError(fmt::format("{}='{}' is not valid: expected counts such as 2(x3),1 covering node {}", name,
                                   spec, node));
  };
  int first = 0;  // first node the current entry covers
  std::size_t pos = 0;
  while (pos < spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string_view entry(spec.data() + pos, comma - pos);
    int count = 0, repeat = 1;
    auto [p, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), count);
    if (ec != std::errc() || count < 1) throw bad();
    const std::string_view rest(p, static_cast<std::size_t>(entry.data() + entry.size() - p));
    if (!rest.empty()) {
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')') throw bad();
      const auto [q, ec2] = std::from_chars(rest.data() + 2, rest.data() + rest.size() - 1, repeat);
      if (ec2 != std::errc() || q != rest.data() + rest.size() - 1 || repeat < 1) throw bad();
    }
    if (node < first + repeat) return count;
    first += repeat;
    pos = comma + 1;
  }
  throw bad();
}

}  // namespace

std::optional<EngineJob> slurm_step() {
  const char* step_name = first_set({"SLURM_STEP_ID", "SLURM_STEPID"});
  const char* job_name = first_set({"SLURM_JOB_ID", "SLURM_JOBID"});
  if (!step_name || !job_name || !getenv_opt("SLURM_PROCID")) return std::nullopt;
  EngineJob j;
  j.engine = "slurm";
  const auto job_id = foreign_int64(job_name, 0);
  const auto step_id = foreign_int64(step_name, 0);
  j.task = *foreign_int("SLURM_PROCID", 0);
  const char* ntasks_name = first_set({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  j.ntasks_from = ntasks_name ? ntasks_name : "SLURM_NTASKS";
  j.ntasks = foreign_int(j.ntasks_from.c_str(), 1).value_or(1);
  const char* nnodes_name = first_set({"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  j.nnodes_from = nnodes_name ? nnodes_name : "SLURM_NNODES";
  j.nnodes = foreign_int(j.nnodes_from.c_str(), 1).value_or(1);
  j.node_from = "SLURM_NODEID";
  j.node = foreign_int("SLURM_NODEID", 0).value_or(0);
  j.local_task = foreign_int("SLURM_LOCALID", 0).value_or(0);
  if (j.task >= j.ntasks)
    throw ConfigError(fmt::format("SLURM_PROCID={} is not valid with {}={}: a task must be below the task count",
                                  j.task, j.ntasks_from, j.ntasks));
  if (*j.node >= j.nnodes)
    throw ConfigError(fmt::format("SLURM_NODEID={} is not valid with {}={}: a node must be below the node count",
                                  *j.node, j.nnodes_from, j.nnodes));
  j.local_tasks = j.ntasks == j.nnodes ? 1 : j.ntasks;  // without a per-node count: one node or one task each
  if (const char* per_node = first_set({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}))
    j.local_tasks = tasks_on_node(per_node, *getenv_opt(per_node), *j.node);
  if (j.local_task >= j.local_tasks)
    throw ConfigError(fmt::format("SLURM_LOCALID={} is not valid with {} tasks on node {}", j.local_task,
                                  j.local_tasks, *j.node));

  const char* list_name = first_set({"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"});
  if (!list_name)
    throw ConfigError("inside an srun step but SLURM_STEP_NODELIST, SLURM_NODELIST and SLURM_JOB_NODELIST are "
                      "unset: set MASTER_ADDR to the host of task 0");
  const auto hosts = expand_hostlist(*getenv_opt(list_name), list_name);
  if (std::string(list_name) == "SLURM_STEP_NODELIST" && static_cast<int>(hosts.size()) != j.nnodes)
    throw ConfigError(fmt::format("SLURM_STEP_NODELIST='{}' names {} hosts but {}={}", *getenv_opt(list_name),
                                  hosts.size(), j.nnodes_from, j.nnodes));
  j.master_host = hosts.front();
  j.master_port = derived_port(static_cast<std::uint64_t>(*job_id), static_cast<std::uint64_t>(*step_id));
  j.master_from = fmt::format("the first host of {} and a port derived from {} and {}", list_name, job_name,
                              step_name);
  return j;
}

}  // namespace fastrun::cluster
