#include "fastrun/runtime/process_group/pair_counts.h"

#include <fmt/format.h>

#include "fastrun/runtime/process_group/rank_name.h"

namespace fastrun {
namespace {

// splitmix64's finaliser: every input bit moves every output bit, so sums of hashes of distinct
// triples do not cancel by accident.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash(std::size_t from, std::size_t to, std::size_t count) {
  return mix(mix(mix(from) ^ to) ^ count);
}

}  // namespace

PairCountSums pair_count_sums(int rank, const PairCounts& counts) {
  const auto me = static_cast<std::size_t>(rank);
  std::uint64_t sent = 0, expected = 0;
  for (std::size_t p = 0; p < counts.send.size(); ++p) sent += hash(me, p, counts.send[p]);
  for (std::size_t p = 0; p < counts.recv.size(); ++p) expected += hash(p, me, counts.recv[p]);
  return {static_cast<std::int64_t>(sent), static_cast<std::int64_t>(expected)};
}

bool pair_counts_agree(const std::vector<PairCountSums>& all) {
  std::uint64_t sent = 0, expected = 0;
  for (const PairCountSums& s : all) {
    sent += static_cast<std::uint64_t>(s.sent);
    expected += static_cast<std::uint64_t>(s.expected);
  }
  return sent == expected;
}

std::string describe_pair(int from, int to, std::uint64_t sent, std::uint64_t expected,
                          const std::vector<int>& global_ranks) {
  return fmt::format("rank {} sends {} element{} to rank {}, which expects {} from it",
                     global_rank_at(from, global_ranks), sent, sent == 1 ? "" : "s", global_rank_at(to, global_ranks),
                     expected);
}

std::string more_pairs(std::size_t more) {
  if (!more) return "";
  return fmt::format(" (and {} more pair{} disagree{})", more, more == 1 ? "" : "s", more == 1 ? "s" : "");
}

std::string describe_pair_mismatch(const std::vector<PairCounts>& all, const std::vector<int>& global_ranks) {
  std::string first;
  std::size_t more = 0;
  for (std::size_t from = 0; from < all.size(); ++from)
    for (std::size_t to = 0; to < all.size(); ++to) {
      const auto& sends = all[from].send;
      const auto& expects = all[to].recv;
      const std::size_t sent = to < sends.size() ? sends[to] : 0;
      const std::size_t expected = from < expects.size() ? expects[from] : 0;
      if (sent == expected) continue;
      if (!first.empty()) {
        ++more;
        continue;
      }
      first = describe_pair(static_cast<int>(from), static_cast<int>(to), sent, expected, global_ranks);
    }
  return first + more_pairs(more);
}

}  // namespace fastrun
