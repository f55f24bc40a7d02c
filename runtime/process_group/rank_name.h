#pragma once
// How every message names a member of a group and the group itself, written once:
//   - "rank r", and "rank r (global rank g)" when the group rank is not the global one (a
//     sub-group), so a reader can find the rank's log;
//   - the label every message of a group starts with: "rank R in group 'G' (backend)", R the
//     global rank.
#include <string>
#include <vector>

namespace fastrun {

// Group rank `rank`'s global rank: `global_ranks[rank]` (empty or too short: `rank` itself).
int global_rank_at(int rank, const std::vector<int>& global_ranks);

std::string rank_name(int rank, const std::vector<int>& global_ranks);

// `group` "" is the world.
std::string group_label(int global_rank, const std::string& group, const std::string& backend);

}  // namespace fastrun
