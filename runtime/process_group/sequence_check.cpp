#include "fastrun/runtime/process_group/sequence_check.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"

namespace fastrun {

std::string describe_mismatch(const std::vector<Fingerprint>& all, const std::string& group_name,
                              const std::vector<int>& global_ranks) {
  // Distinct fingerprints in order of their first rank, each with the ranks that sent it.
  std::vector<std::pair<Fingerprint, std::vector<int>>> kinds;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const int who = r < global_ranks.size() ? global_ranks[r] : static_cast<int>(r);
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == all[r]; });
    if (it == kinds.end()) kinds.push_back({all[r], {who}});
    else it->second.push_back(who);
  }
  if (kinds.size() <= 1) return {};
  const std::int64_t seq = all.front().words[0];
  std::string parts;
  for (const auto& [f, ranks] : kinds) {
    const OpDesc d = from_fingerprint(f);
    parts += fmt::format("{}rank{} {} called {}{}", parts.empty() ? "" : ", ", ranks.size() == 1 ? "" : "s",
                         fmt::join(ranks, ","), describe(d), d.seq == seq ? "" : fmt::format(" as its op #{}", d.seq));
  }
  return fmt::format("op #{} on group '{}': {} (FASTRUN_DEBUG=sequence found the ranks out of step; every rank "
                     "stops at this op)",
                     seq, group_name, parts);
}

void check_same_op(ProcessGroup& pg, const OpDesc& op, const std::string& group_name,
                   const std::vector<int>& global_ranks) {
  const auto n = static_cast<std::size_t>(pg.size());
  Fingerprint mine = fingerprint(op);
  std::vector<std::int64_t> words(n * Fingerprint::kWords);
  pg.all_gather(view_of(mine.words.data(), Fingerprint::kWords), view_of(words.data(), words.size()))->wait();
  std::vector<Fingerprint> all(n);
  for (std::size_t r = 0; r < n; ++r)
    std::memcpy(all[r].words.data(), words.data() + r * Fingerprint::kWords, sizeof(Fingerprint::words));
  const std::string text = describe_mismatch(all, group_name, global_ranks);
  if (!text.empty()) throw ConfigError(text);
}

}  // namespace fastrun
