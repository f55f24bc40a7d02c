#pragma once
// A rank's answer to a flight-record dump request (protocol in flight_recorder.h): one line per
// group, "name \t last started seq \t busy (0/1) \t state". The monitor writes it
// (FlightMonitor::dump), a recorder without a monitor writes its own line, and the requester
// reads it back; this file is the one place that knows the format.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace fastrun::flight {

struct GroupState {
  std::int64_t last_seq = 0;
  bool busy = false;
  std::string line;  // what the rank is doing on the group, in words
};

// One group's line, newline included. `name` and `state` must hold no tab or newline (group
// names and state lines are the runtime's own text).
std::string answer_line(std::string_view name, std::int64_t last_seq, bool busy, std::string_view state);

// The groups of an answer, by name; a malformed line is skipped.
std::map<std::string, GroupState> parse_answer(const std::string& text);

}  // namespace fastrun::flight
