#include "fastrun/runtime/process_group/shape_check.h"

#include "fastrun/runtime/process_group/reduce_kernels.h"

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun {
namespace {

// `whole` must hold group_size blocks of `block`'s element count, of the same dtype.
void check_blocks(std::string_view where, std::string_view whole_name, const BufferView& whole,
                  std::string_view block_name, const BufferView& block, int group_size) {
  if (whole.dtype == block.dtype && whole.count == block.count * static_cast<std::size_t>(group_size)) return;
  throw ConfigError(fmt::format("{}: {} must hold size x {} = {} x {} {} elements, got {} {}", where, whole_name,
                                block_name, group_size, block.count, dtype_name(block.dtype), whole.count,
                                dtype_name(whole.dtype)));
}

}  // namespace

void check_all_gather_shapes(std::string_view where, const BufferView& input, const BufferView& output,
                             int group_size) {
  check_blocks(where, "output", output, "input", input, group_size);
}

void check_reduce_scatter_shapes(std::string_view where, const BufferView& input, const BufferView& output,
                                 int group_size) {
  check_blocks(where, "input", input, "output", output, group_size);
}

void check_prescale(std::string_view where, const BufferView& buffer, double prescale) {
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

}  // namespace fastrun
