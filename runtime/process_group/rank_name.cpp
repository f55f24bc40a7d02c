#include "fastrun/runtime/process_group/rank_name.h"

#include <fmt/format.h>

namespace fastrun {

int global_rank_at(int rank, const std::vector<int>& global_ranks) {
  const auto r = static_cast<std::size_t>(rank);
  return rank >= 0 && r < global_ranks.size() ? global_ranks[r] : rank;
}

std::string rank_name(int rank, const std::vector<int>& global_ranks) {
  const int global = global_rank_at(rank, global_ranks);
  if (global != rank) return fmt::format("rank {} (global rank {})", rank, global);
  return fmt::format("rank {}", rank);
}

std::string group_label(int global_rank, const std::string& group, const std::string& backend) {
  return fmt::format("rank {} in group '{}' ({})", global_rank, group.empty() ? "world" : group, backend);
}

}  // namespace fastrun
