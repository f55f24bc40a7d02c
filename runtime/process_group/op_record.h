#pragma once
// What one collective looks like from outside: its name, element type, count, root or peer and
// reduce op, and its sequence number on its group. The Group layer (group.h) builds one per op
// for the flight record (flight_recorder.h) and, in FASTRUN_DEBUG=sequence mode, compares them
// across ranks (sequence_check.h) through a fixed-size Fingerprint.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/op_name.h"
#include "fastrun/runtime/process_group/pair_counts.h"
#include "fastrun/runtime/process_group/types.h"

namespace fastrun {

struct OpDesc {
  OpName op;                // "all_reduce", "broadcast", ...
  std::int64_t seq = 0;     // 1, 2, ... per group, counting only ops that communicate (p2p apart)
  bool has_buffer = false;  // false for barrier
  DType dtype = DType::float32;
  std::int64_t count = 0;   // elements of the input buffer (-1: each rank's own, from a Fingerprint)
  int root = -1;            // root or peer (a group rank); -1: none
  int reduce = -1;          // a ReduceOp; -1: none
  bool point_to_point = false;  // send/recv: not a collective, never compared across ranks
  // all_to_allv: its count is this rank's own and is not compared. Where a check compares the
  // pairs' counts instead (FASTRUN_DEBUG=sequence, pair_counts.h), it also carries them: a copy
  // per op, so only there.
  bool count_per_rank = false;
  std::shared_ptr<const PairCounts> pair_counts;

  OpDesc& with_root(int r) { root = r; return *this; }
  // send/recv: numbered apart from the collectives (only two ranks take part, so the group's
  // collective numbers stay equal on every rank) and never compared across ranks.
  OpDesc& with_peer(int p) { root = p; point_to_point = true; return *this; }
  OpDesc& with_reduce(ReduceOp r) { reduce = static_cast<int>(r); return *this; }
  OpDesc& with_count_per_rank() { count_per_rank = true; return *this; }
  OpDesc& with_pair_counts(std::vector<std::size_t> send, std::vector<std::size_t> recv) {
    count_per_rank = true;
    pair_counts = std::make_shared<const PairCounts>(PairCounts{std::move(send), std::move(recv)});
    return *this;
  }
};

// Inline: every op a user issues makes one (two on shm: the Group's and the backend's check's).
inline OpDesc op_desc(OpName op, const BufferView& input) {  // an op on a buffer
  return OpDesc{.op = op, .has_buffer = true, .dtype = input.dtype, .count = static_cast<std::int64_t>(input.count),
                .pair_counts = nullptr};
}
inline OpDesc op_desc(OpName op) { return OpDesc{.op = op, .pair_counts = nullptr}; }  // without one (barrier)

// "all_reduce(float32 x 1024, sum)", "broadcast(float32 x 1024, root 0)", "barrier()";
// "all_to_allv(float32)" from a Fingerprint (its count is each rank's own).
std::string describe(const OpDesc& d);
// The same with its number: "op #12 all_reduce(float32 x 1024, sum)"; "p2p op #3 send(...)".
std::string describe_numbered(const OpDesc& d);

// A fixed-size image of an OpDesc that ranks exchange with one small all_gather (int64 words,
// so every backend moves it and no byte order question arises between ranks of one build).
struct Fingerprint {
  static constexpr std::size_t kWords = 8;
  static constexpr std::size_t kNameBytes = 24;
  std::array<std::int64_t, kWords> words{};
};
Fingerprint fingerprint(const OpDesc& d);
OpDesc from_fingerprint(const Fingerprint& f);
bool operator==(const Fingerprint& a, const Fingerprint& b);

}  // namespace fastrun
