#pragma once
// The buffer-shape rules of all_gather and reduce_scatter, written once for every backend and
// for the group layer's local (FASTRUN_NO_SYNC=2) path. A mismatch is a caller bug: ConfigError
// whose message starts with `where` (e.g. "shm all_gather on group 'world'").
#include <string_view>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun {

// output.count == input.count * group_size, same dtype.
void check_all_gather_shapes(std::string_view where, const BufferView& input, const BufferView& output,
                             int group_size);
// input.count == output.count * group_size, same dtype.
void check_reduce_scatter_shapes(std::string_view where, const BufferView& input, const BufferView& output,
                                 int group_size);

// An all-reduce's prescale (process_group.h): 1, or a floating dtype (ConfigError otherwise).
void check_prescale(std::string_view where, const BufferView& buffer, double prescale);
// Applies it in place (nothing for 1).
void apply_prescale(const BufferView& buffer, double prescale);

}  // namespace fastrun
