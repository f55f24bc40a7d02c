#pragma once
// all_to_allv's counts differ by rank when the ranks agree, so its count is no part of what the
// mismatch checks compare (op_record.h's Fingerprint). What must agree is each pair's: rank i's
// send_counts[j] equals rank j's recv_counts[i]. The checks compare that without moving the
// counts: each rank sums a 64-bit hash of every (from, to, count) it sends and of every one it
// expects, and when every pair agrees the two sums over all ranks are equal (a pair that
// disagrees makes them differ unless two 64-bit hashes collide). Only when they differ do the
// ranks exchange their counts, to name the pair.
#include <cstdint>
#include <string>
#include <vector>

namespace fastrun {

struct PairCounts {
  std::vector<std::size_t> send, recv;  // this rank's send_counts and recv_counts (group ranks)
};

// This rank's two sums, as int64 words for the exchanges (wrapping arithmetic, any order).
struct PairCountSums {
  std::int64_t sent = 0, expected = 0;
};
PairCountSums pair_count_sums(int rank, const PairCounts& counts);
// Whether the ranks' sums (one per rank) say that every pair agrees.
bool pair_counts_agree(const std::vector<PairCountSums>& all);

// "rank 0 sends 7 elements to rank 1, which expects 6 from it": one pair that disagrees (group
// ranks, named by `global_ranks`; empty: group ranks are global). Gloo's message lengths
// (backend/gloo/sized_messages.h) say it in the same words.
std::string describe_pair(int from, int to, std::uint64_t sent, std::uint64_t expected,
                          const std::vector<int>& global_ranks);
// " (and 2 more pairs disagree)" after the first; "" for none.
std::string more_pairs(std::size_t more);

// The first pair that disagrees and how many more, from every rank's counts in group rank order; "" when they all agree. `global_ranks`
// name the ranks (empty: group ranks are global).
std::string describe_pair_mismatch(const std::vector<PairCounts>& all, const std::vector<int>& global_ranks);

}  // namespace fastrun
