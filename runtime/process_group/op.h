#pragma once
// An op as a value: made once, where the user calls it (Group::forward, group.h), and carried
// down unchanged, as the first argument of the Backend's method, to the backend's
// group runtime (group_runtime.h), which runs it. It says which op this is and how it is named
// everywhere: the flight record, the stall board, FASTRUN_DEBUG=sequence and the backend's own
// messages ("all_reduce #7", shm's op check, gloo's tags, nccl's records) show its one number.
// The buffers and options are the call's own typed arguments beside it.
//
// One numbering authority: the Group numbers its ops (collectives #1, #2, ... equal on every
// member; point-to-point "p2p op #1", ... apart). An op issued on a backend directly, without a
// Group (a backend's own tests, the object collectives' calls on Group::backend()), is
// bare (seq 0) and the backend's runtime numbers it, on from the last number it ran.
#include <cstdint>
#include <string>
#include <string_view>

#include "fastrun/runtime/duration.h"
#include "fastrun/runtime/process_group/op_name.h"

namespace fastrun {

// "name #seq", the label of op #seq named `name` (what a runtime names a bare op it numbered).
std::string op_label(std::string_view name, std::uint64_t seq);

struct Op {
  OpName name;                 // "all_reduce", "send", ... (a literal or an interned text)
  std::uint64_t seq = 0;       // op #seq of its group; 0: bare, not numbered yet
  bool point_to_point = false; // numbered apart from the collectives
  Duration timeout{};          // how long the op may take; zero: the group's op timeout

  bool numbered() const { return seq != 0; }
  // "all_reduce #7"; "" while bare. Formatted when asked (a message), not for every op.
  std::string label() const { return numbered() ? op_label(name, seq) : std::string(); }

  // An op the caller does not number: the backend's runtime will.
  static Op bare(OpName name, bool point_to_point = false) {
    Op op;
    op.name = name;
    op.point_to_point = point_to_point;
    return op;
  }
  // Op #seq named `name`: its label is "name #seq".
  static constexpr Op numbered_as(OpName name, std::uint64_t seq, bool point_to_point = false) {
    Op op;
    op.name = name;
    op.seq = seq;
    op.point_to_point = point_to_point;
    return op;
  }
};

}  // namespace fastrun
