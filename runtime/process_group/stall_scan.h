#pragma once
// What a stall report makes of one read of a node's stall board (stall_board.h; the launcher's,
// or, without a fastrun launcher, the one local rank 0 hosts):
// pure functions, so that the rules have table tests.
//
// Rules, per group (the slots with one key):
//   1. n = the highest collective number any member on this node has begun;
//   2. the waiting members are those that began op #n and have not recorded its end; none: no
//      stall (the op is done, or every member only issued it);
//   3. the late members are those whose last begun op is below n: they have not arrived;
//   4. a stall is when the first waiting member began op #n at least `threshold` ago, and some
//      member is late — or some members are not on this board (other nodes), which the waiting
//      ones may be waiting for: then the line says so instead of naming them.
// A stall is known by (group, n); StallLog turns the scans into lines: a report the first time a
// stall is seen, and an end line once the group has moved past it (or is gone from the board).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/stall_board.h"

namespace fastrun::stall {

struct Stall {
  std::string group;        // the board's key: "world#1"
  OpDesc op;                // op #n, as the first waiting member describes it
  double waited_s = 0;      // since the first waiting member began op #n
  std::vector<int> waiting;  // global ranks, ascending
  std::vector<SlotView> late;  // ascending global rank
  int group_size = 0;
  int on_board = 0;         // members of the group on this node's board
};

std::vector<Stall> find_stalls(const std::vector<SlotView>& board, std::int64_t now_ns, double threshold_s);

// The report line of `s` (without the trailing newline): "fastrun: stall: group 'world' op #2 …".
// `node`: "" on one node, else " on node K".
std::string report_line(const Stall& s, std::int64_t now_ns, const std::string& node);

// "world#1" -> "world", "world#2" -> "world#2": a group's name as messages show it (the board's
// instance count tells a second join's 'world' from the first).
std::string group_display_name(const std::string& key);

// The collective a rank began last, on any of its groups (the failure record's last_collective,
// docs/errors.md): from read_rank_slots of that rank; nullopt when it began none (point-to-point
// ops are not on the board).
struct LastCollective {
  std::string group;  // as group_display_name shows it
  OpDesc op;          // its kind and number (op.seq)
  // "in_progress": begun, its end not recorded; "completed" / "failed": its end, as recorded.
  std::string state;
};
std::optional<LastCollective> last_collective(const std::vector<SlotView>& slots);

// The lines (each ending in '\n') of one scan, given what earlier scans reported.
class StallLog {
 public:
  explicit StallLog(std::string node) : node_(std::move(node)) {}
  std::string update(const std::vector<SlotView>& board, std::int64_t now_ns, double threshold_s);

 private:
  struct Reported {
    std::int64_t seq = 0;
    std::string op;            // its description
    std::int64_t since_ns = 0;  // when the first waiting member began it
    bool late_here = false;     // the late members were on this board
  };
  std::string node_;
  std::map<std::string, Reported> open_;  // by group key
};

}  // namespace fastrun::stall
