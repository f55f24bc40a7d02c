#include "fastrun/runtime/process_group/shape_check.h"

#include "fastrun/runtime/process_group/reduce_kernels.h"
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

// The checks' messages format `where` as its joined words.
template <>
struct fmt::formatter<fastrun::Where> : fmt::formatter<std::string_view> {
  auto format(const fastrun::Where& w, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(w.str(), ctx);
  }
};

namespace fastrun {
namespace {

// `whole` must hold group_size blocks of `block`'s element count, of the same dtype.
void check_blocks(const Where& where, std::string_view whole_name, const BufferView& whole,
                  std::string_view block_name, const BufferView& block, int group_size) {
  if (blocks_ok(whole, block, group_size)) return;
  throw ConfigError(fmt::format("{}: {} must hold size x {} = {} x {} {} elements, got {} {}", where, whole_name,
                                block_name, group_size, block.count, dtype_name(block.dtype), whole.count,
                                dtype_name(whole.dtype)));
}

void check_same_dtype(const Where& where, const BufferView& input, const BufferView& output) {
  if (input.dtype != output.dtype)
    throw ConfigError(fmt::format("{}: input is {} but output is {}; both must have the same dtype", where,
                                  dtype_name(input.dtype), dtype_name(output.dtype)));
}

void check_counts(const Where& where, std::string_view which, const std::vector<std::size_t>& counts,
                  std::string_view buffer_name, const BufferView& buffer, int group_size) {
  if (counts.size() != static_cast<std::size_t>(group_size))
    throw ConfigError(fmt::format("{}: {} has {} entries; expected one per rank of the group ({})", where, which,
                                  counts.size(), group_size));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  if (total != buffer.count)
    throw ConfigError(fmt::format("{}: {} sum to {} elements but the {} holds {}", where, which, total, buffer_name,
                                  buffer.count));
}

}  // namespace

std::string Where::str() const {
  std::string out;
  for (std::size_t i = 0; i < count_; ++i) out += parts_[i];
  return out;
}

void check_all_gather_shapes(const Where& where, const BufferView& input, const BufferView& output,
                             int group_size) {
  check_blocks(where, "output", output, "input", input, group_size);
}

void check_reduce_scatter_shapes(const Where& where, const BufferView& input, const BufferView& output,
                                 int group_size) {
  check_blocks(where, "input", input, "output", output, group_size);
}

void check_prescale(const Where& where, const BufferView& buffer, double prescale) {
  if (prescale == 1.0) return;
  if (buffer.dtype == DType::int32 || buffer.dtype == DType::int64)
    throw ConfigError(fmt::format("{}: prescale {} on a {} buffer: only floating dtypes can be prescaled; accepted: "
                                  "float32, float64, float16, bfloat16",
                                  where, prescale, dtype_name(buffer.dtype)));
  if (buffer.device != DeviceKind::cpu)
    throw ConfigError(fmt::format("{}: prescale {} on a CUDA buffer: prescale is for host buffers (use ReduceOp::avg "
                                  "for device memory)",
                                  where, prescale));
}

void apply_prescale(const BufferView& buffer, double prescale) {
  if (prescale != 1.0 && buffer.count > 0) kernels::scale(buffer.dtype, buffer.data, buffer.data, buffer.count, prescale);
}

void check_root(const Where& where, int root, int group_size) {
  if (!root_ok(root, group_size))
    throw ConfigError(
        fmt::format("{}: root {} is not a rank of the group (0..{})", where, root, group_size - 1));
}

void check_peer(const Where& where, int peer, int tag, int rank, int group_size) {
  if (peer < 0 || peer >= group_size)
    throw ConfigError(
        fmt::format("{}: peer {} is not a rank of the group (0..{})", where, peer, group_size - 1));
  if (peer == rank)
    throw ConfigError(fmt::format("{}: peer {} is this rank; send/recv to self is not supported (copy locally)",
                                  where, peer));
  if (tag < 0)
    throw ConfigError(fmt::format("{}: tag {} is negative; tags are 0 or more", where, tag));
}

void check_p2p_batch(const Where& where, const std::vector<P2POp>& ops, int rank, int group_size) {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    if (peer_ok(op.peer, op.tag, rank, group_size)) continue;
    check_peer(fmt::format("{} (op {}: {})", where, i, op.kind == P2POp::Kind::send ? "send" : "recv"), op.peer,
               op.tag, rank, group_size);
  }
}

void check_gather_shapes(const Where& where, const BufferView& input, const BufferView& output, int root,
                         int rank, int group_size) {
  check_root(where, root, group_size);
  if (rank == root) check_blocks(where, "output", output, "input", input, group_size);
}

void check_scatter_shapes(const Where& where, const BufferView& input, const BufferView& output, int root,
                          int rank, int group_size) {
  check_root(where, root, group_size);
  if (rank == root) check_blocks(where, "input", input, "output", output, group_size);
}

void check_all_to_all_shapes(const Where& where, const BufferView& input, const BufferView& output,
                             int group_size) {
  check_same_dtype(where, input, output);
  if (input.count != output.count || input.count % static_cast<std::size_t>(group_size) != 0)
    throw ConfigError(fmt::format("{}: input and output must hold the same number of elements, a multiple of the "
                                  "group size {}; got input {} and output {}",
                                  where, group_size, input.count, output.count));
}

void check_all_to_allv_shapes(const Where& where, const BufferView& input,
                              const std::vector<std::size_t>& send_counts, const BufferView& output,
                              const std::vector<std::size_t>& recv_counts, int rank, int group_size) {
  check_same_dtype(where, input, output);
  check_counts(where, "send_counts", send_counts, "input", input, group_size);
  check_counts(where, "recv_counts", recv_counts, "output", output, group_size);
  const auto me = static_cast<std::size_t>(rank);
  if (send_counts[me] != recv_counts[me])
    throw ConfigError(fmt::format("{}: send_counts[{}] = {} but recv_counts[{}] = {}: this rank's own block must "
                                  "have one size",
                                  where, me, send_counts[me], me, recv_counts[me]));
}

}  // namespace fastrun
