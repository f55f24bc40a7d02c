#include "fastrun/runtime/process_group/flight_answer.h"

#include <sstream>

#include <fmt/format.h>

#include "fastrun/runtime/text/number.h"

namespace fastrun::flight {

std::string answer_line(std::string_view name, std::int64_t last_seq, bool busy, std::string_view state) {
  return fmt::format("{}\t{}\t{}\t{}\n", name, last_seq, busy ? 1 : 0, state);
}

std::map<std::string, GroupState> parse_answer(const std::string& text) {
  std::map<std::string, GroupState> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find('\t');
    const auto b = a == std::string::npos ? a : line.find('\t', a + 1);
    const auto c = b == std::string::npos ? b : line.find('\t', b + 1);
    if (c == std::string::npos) continue;
    const auto seq = text::to_integer(std::string_view(line).substr(a + 1, b - a - 1));
    if (!seq) continue;
    GroupState s;
    s.last_seq = *seq;
    s.busy = line.substr(b + 1, c - b - 1) == "1";
    s.line = line.substr(c + 1);
    out[line.substr(0, a)] = s;
  }
  return out;
}

}  // namespace fastrun::flight
