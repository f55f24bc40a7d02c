#include "fastrun/launcher/child_env.h"

#include <unistd.h>  // environ

#include <cstdlib>
#include <set>
#include <string_view>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"

namespace fastrun::launcher {

std::vector<std::pair<std::string, std::string>> rank_variables(const JobConfig& job, int rank) {
  // `rank` is the local one; the job-wide names carry this node's offset (docs/multinode.md).
  const std::string g = std::to_string(job.node.rank_offset + rank);
  const std::string n = std::to_string(job.global_world_size());
  const std::string r = std::to_string(rank);
  const std::string local_n = std::to_string(job.world_size);
  const std::string node = std::to_string(job.node.node_rank);
  std::vector<std::pair<std::string, std::string>> vars = {
      {std::string(env::kRank.name), g},
      {std::string(env::kWorldSize.name), n},
      {std::string(env::kLocalRank.name), r},
      {std::string(env::kLocalWorldSize.name), local_n},
      {std::string(env::kNodeRank.name), node},
      {std::string(env::kNnodes.name), std::to_string(job.node.nnodes)},
      {std::string(env::kRunId.name), job.run_id},
      {std::string(env::kStore.name), job.store_address},
      {std::string(env::kGlobalSeed.name), job.seed},
      {"RANK", g},
      {"WORLD_SIZE", n},
      {"LOCAL_RANK", r},
      {"LOCAL_WORLD_SIZE", local_n},
      {"GROUP_RANK", node},
      {std::string(env::kRestartCount.name), std::to_string(job.attempt)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.attempt)},
  };
  if (job.rank_master_port > 0) {
    vars.emplace_back("MASTER_ADDR", job.rank_master_addr);
    vars.emplace_back("MASTER_PORT", std::to_string(job.rank_master_port));
  }
  if (!job.node.store_token.empty()) vars.emplace_back(std::string(env::kStoreToken.name), job.node.store_token);
  if (!job.node.gloo_host.empty()) vars.emplace_back(std::string(env::kGlooHost.name), job.node.gloo_host);
  if (job.devices) {
    vars.emplace_back("CUDA_VISIBLE_DEVICES", job.devices->rank_devices.at(static_cast<std::size_t>(rank)));
    vars.emplace_back("USER_CUDA_VISIBLE_DEVICES", job.devices->user_visible);
  } else {
    // --nproc ranks are CPU ranks: hide the GPUs, or on a GPU machine every rank would see the
    // same device 0 (join refuses two ranks on one GPU, and `auto` would pick nccl for host
    // buffers). The user's value is kept, as for --devices.
    vars.emplace_back("CUDA_VISIBLE_DEVICES", "");
    vars.emplace_back("USER_CUDA_VISIBLE_DEVICES", job.user_visible_devices);
  }
  return vars;
}

std::vector<std::string> build_child_env(const std::vector<std::string>& base, const JobConfig& job, int rank) {
  const auto vars = rank_variables(job, rank);
  std::set<std::string_view> replaced;
  for (const auto& [name, value] : vars) replaced.insert(name);
  std::vector<std::string> out;
  out.reserve(base.size() + vars.size());
  for (const std::string& entry : base) {
    const std::size_t eq = entry.find('=');
    if (eq != std::string::npos && replaced.count(std::string_view(entry).substr(0, eq))) continue;
    out.push_back(entry);
  }
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
  return out;
}

void apply_to_self(const JobConfig& job, int rank) {
  for (const auto& [name, value] : rank_variables(job, rank)) {
    if (::setenv(name.c_str(), value.c_str(), 1) != 0) throw_errno("setenv " + name, errno);
  }
}

}  // namespace fastrun::launcher
