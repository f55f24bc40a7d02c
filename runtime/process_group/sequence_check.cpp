#include "fastrun/runtime/process_group/sequence_check.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/rank_name.h"

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

namespace {
constexpr const char* kSequenceFoundBy = "FASTRUN_DEBUG=sequence found the ranks out of step; every rank stops at this op";
}

std::string describe_mismatch(const std::vector<Fingerprint>& all, const std::string& group_name,
                              const std::vector<int>& global_ranks) {
  if (all.empty()) return {};
  std::vector<RankOp> ops;
  for (std::size_t r = 0; r < all.size(); ++r) ops.push_back({global_rank_at(static_cast<int>(r), global_ranks), all[r]});
  return describe_mismatch(ops, all.front().words[0], group_name, kSequenceFoundBy);
}

void check_ops_agree(const OpDesc& op, int rank, std::size_t ranks, const ExchangeWords& exchange,
                     const std::string& group_name, const std::vector<int>& global_ranks,
                     const std::string& found_by) {
  const Fingerprint mine = fingerprint(op);
  const PairCountSums sums = op.pair_counts ? pair_count_sums(rank, *op.pair_counts)
                                            : PairCountSums{};
  std::vector<std::int64_t> words(mine.words.begin(), mine.words.end());
  words.push_back(sums.sent);
  words.push_back(sums.expected);
  std::vector<std::int64_t> all(ranks * kOpCheckWords);
  exchange(words, all);
  std::vector<RankOp> ops(ranks);
  std::vector<PairCountSums> all_sums(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::int64_t* w = all.data() + r * kOpCheckWords;
    ops[r].rank = global_rank_at(static_cast<int>(r), global_ranks);
    std::memcpy(ops[r].op.words.data(), w, sizeof(Fingerprint::words));
    all_sums[r] = {w[Fingerprint::kWords], w[Fingerprint::kWords + 1]};
  }
  const std::string text = describe_mismatch(ops, op.seq, group_name, found_by);
  if (!text.empty()) throw ConfigError(text);
  if (!op.pair_counts || pair_counts_agree(all_sums)) return;
  // The same op on every rank, and some pair's counts differ: every rank saw the same sums, so
  // every rank is here and exchanges its counts (a rank's row: ranks sends, then ranks expects).
  std::vector<std::int64_t> row(2 * ranks, 0), rows(2 * ranks * ranks);
  for (std::size_t p = 0; p < ranks && p < op.pair_counts->send.size(); ++p)
    row[p] = static_cast<std::int64_t>(op.pair_counts->send[p]);
  for (std::size_t p = 0; p < ranks && p < op.pair_counts->recv.size(); ++p)
    row[ranks + p] = static_cast<std::int64_t>(op.pair_counts->recv[p]);
  exchange(row, rows);
  std::vector<PairCounts> counts(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    const auto at = rows.begin() + static_cast<std::ptrdiff_t>(2 * ranks * r);
    counts[r].send.assign(at, at + static_cast<std::ptrdiff_t>(ranks));
    counts[r].recv.assign(at + static_cast<std::ptrdiff_t>(ranks), at + static_cast<std::ptrdiff_t>(2 * ranks));
  }
  throw ConfigError(fmt::format("op #{} on group '{}': every rank called {}, and the counts disagree: {} ({})", op.seq,
                                group_name, describe(from_fingerprint(mine)), describe_pair_mismatch(counts, global_ranks),
                                found_by));
}

void check_same_op(Backend& pg, const OpDesc& op, const std::string& group_name,
                   const std::vector<int>& global_ranks) {
  // The exchanges are part of op #seq: the backend names them by that number ("all_gather #12").
  const auto all_gather = [&](const std::vector<std::int64_t>& mine, std::vector<std::int64_t>& all) {
    pg.all_gather(Op::numbered_as("all_gather", static_cast<std::uint64_t>(op.seq)),
                  view_of(const_cast<std::int64_t*>(mine.data()), mine.size()), view_of(all.data(), all.size()), {})
        ->wait();
  };
  check_ops_agree(op, pg.rank(), static_cast<std::size_t>(pg.size()), all_gather, group_name, global_ranks, kSequenceFoundBy);
}

}  // namespace fastrun
