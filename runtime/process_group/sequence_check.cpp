#include "fastrun/runtime/process_group/sequence_check.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"

namespace fastrun {

std::string describe_mismatch(std::vector<RankOp> ops, std::int64_t seq, const std::string& group_name,
                              const std::string& found_by) {
  std::stable_sort(ops.begin(), ops.end(), [](const RankOp& a, const RankOp& b) { return a.rank < b.rank; });
  // Distinct fingerprints in order of their first rank, each with the ranks that sent it.
  std::vector<std::pair<Fingerprint, std::vector<int>>> kinds;
  for (const RankOp& r : ops) {
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == r.op; });
    if (it == kinds.end()) kinds.push_back({r.op, {r.rank}});
    else it->second.push_back(r.rank);
  }
  if (kinds.size() <= 1) return {};
  std::string parts;
  for (const auto& [f, ranks] : kinds) {
    const OpDesc d = from_fingerprint(f);
    parts += fmt::format("{}rank{} {} called {}{}", parts.empty() ? "" : ", ", ranks.size() == 1 ? "" : "s",
                         fmt::join(ranks, ","), describe(d), d.seq == seq ? "" : fmt::format(" as its op #{}", d.seq));
  }
  return fmt::format("op #{} on group '{}': {} ({})", seq, group_name, parts, found_by);
}

std::string describe_mismatch(const std::vector<Fingerprint>& all, const std::string& group_name,
                              const std::vector<int>& global_ranks) {
  if (all.empty()) return {};
  std::vector<RankOp> ops;
  for (std::size_t r = 0; r < all.size(); ++r)
    ops.push_back({r < global_ranks.size() ? global_ranks[r] : static_cast<int>(r), all[r]});
  return describe_mismatch(ops, all.front().words[0], group_name,
                           "FASTRUN_DEBUG=sequence found the ranks out of step; every rank stops at this op");
}

void check_same_op(Backend& pg, const OpDesc& op, const std::string& group_name,
                   const std::vector<int>& global_ranks) {
  const auto n = static_cast<std::size_t>(pg.size());
  Fingerprint mine = fingerprint(op);
  std::vector<std::int64_t> words(n * Fingerprint::kWords);
  // The exchange is part of op #seq: the backend names it by that number ("all_gather #12").
  pg.all_gather(Op::numbered_as("all_gather", static_cast<std::uint64_t>(op.seq)),
                view_of(mine.words.data(), Fingerprint::kWords), view_of(words.data(), words.size()), {})
      ->wait();
  std::vector<Fingerprint> all(n);
  for (std::size_t r = 0; r < n; ++r)
    std::memcpy(all[r].words.data(), words.data() + r * Fingerprint::kWords, sizeof(Fingerprint::words));
  const std::string text = describe_mismatch(all, group_name, global_ranks);
  if (!text.empty()) throw ConfigError(text);
}

}  // namespace fastrun
