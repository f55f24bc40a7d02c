#include "fastrun/runtime/process_group/op.h"

#include <charconv>

namespace fastrun {

std::string op_label(std::string_view name, std::uint64_t seq) {
  // Built by hand, not with fmt::format: this runs for every op a user issues, and formatting
  // cost about a third of a world-of-one op's ~700 ns (perf, 2026-12-03).
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, seq).ptr;
  std::string label;
  label.reserve(name.size() + 2 + static_cast<std::size_t>(end - digits));
  label.append(name).append(" #").append(digits, end);
  return label;
}

}  // namespace fastrun
