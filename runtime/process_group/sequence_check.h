#pragma once
// FASTRUN_DEBUG=sequence: before each collective the members of a group exchange a fingerprint of
// the op they are about to issue (op_record.h) with one small all_gather of 80 bytes per rank on
// the same group; when the fingerprints differ, every rank throws the same ConfigError before
// any rank issues the mismatching op, so nothing crashes or hangs:
//   "op #12 on group 'world': ranks 0,2 called all_reduce(float32 x 1024, sum), rank 1 called
//    broadcast(float32 x 1024, root 0)"
// (c10d's TORCH_DISTRIBUTED_DEBUG=DETAIL is the precedent). The exchange itself is the same op on
// every rank whatever the ranks were about to do, so it is always safe to issue.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun {

// `pg` must work on host memory. `global_ranks` name the members in the message.
void check_same_op(Backend& pg, const OpDesc& op, const std::string& group_name,
                   const std::vector<int>& global_ranks);

// The comparison itself, over any all-gather of int64 words (`all` is sized for every rank's
// `mine`, in group rank order; `rank` is this rank's group rank): the ranks exchange their op's Fingerprint and its pair-count sums
// (pair_counts.h; zero for an op without per-rank counts), kOpCheckWords words each; when the
// sums differ they exchange their counts too, to name the pair. Throws the ConfigError naming
// the ranks' ops (or the pair), ending in `found_by`, when they disagree. Every rank decides
// from the same words, so every rank makes the same exchanges and throws the same error.
using ExchangeWords = std::function<void(const std::vector<std::int64_t>& mine, std::vector<std::int64_t>& all)>;
constexpr std::size_t kOpCheckWords = Fingerprint::kWords + 2;
void check_ops_agree(const OpDesc& op, int rank, std::size_t ranks, const ExchangeWords& exchange,
                     const std::string& group_name, const std::vector<int>& global_ranks,
                     const std::string& found_by);

// The message for gathered fingerprints, or "" when they all agree (pure; tested on its own).
std::string describe_mismatch(const std::vector<Fingerprint>& all, const std::string& group_name,
                              const std::vector<int>& global_ranks);

// One rank's op as another check saw it (the shm channel's, gloo's stall check): `rank` is the
// global rank named in the message.
struct RankOp {
  int rank = 0;
  Fingerprint op;
};
// The same message for the ops of some of the ranks (those the check could see, in any order),
// numbered from `seq` (this rank's op number); `found_by` ends it and says which check found it
// and what happens now. "" when they all agree.
std::string describe_mismatch(std::vector<RankOp> ops, std::int64_t seq, const std::string& group_name,
                              const std::string& found_by);

}  // namespace fastrun
