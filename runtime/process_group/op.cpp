#include "fastrun/runtime/process_group/op.h"

#include <fmt/format.h>

namespace fastrun {

Op Op::numbered_as(std::string name, std::uint64_t seq, bool point_to_point) {
  Op op;
  op.label = fmt::format("{} #{}", name, seq);
  op.name = std::move(name);
  op.seq = seq;
  op.point_to_point = point_to_point;
  return op;
}

}  // namespace fastrun
