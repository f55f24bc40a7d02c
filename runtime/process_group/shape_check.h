#pragma once
// The argument rules of the collectives and point-to-point ops, written once for every backend
// and for the group layer's local (FASTRUN_NO_SYNC=2) path. A mismatch is a caller bug:
// ConfigError whose message starts with `where`. The newer ops take `where` from op_where(),
// so that every backend words the same mistake the same way ("gather on group 'world': root 5
// is not a rank of the group (0..2)").
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/process_group/process_group.h"
#include "fastrun/runtime/process_group/types.h"

namespace fastrun {

// "<op> on group '<group>'".
std::string op_where(std::string_view op, std::string_view group);

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
// 0 <= root < group_size.
void check_root(std::string_view where, int root, int group_size);
// 0 <= peer < group_size, peer != rank (no send to self), tag >= 0.
void check_peer(std::string_view where, int peer, int tag, int rank, int group_size);
// What check_peer accepts, without building `where` (a send's fixed cost: call check_peer only
// when this is false, for the message).
inline bool peer_ok(int peer, int tag, int rank, int group_size) {
  return peer >= 0 && peer < group_size && peer != rank && tag >= 0;
}
// Every op of a batch (kinds, peers, tags); `where` names the batch.
void check_p2p_batch(std::string_view where, const std::vector<P2POp>& ops, int rank, int group_size);
// Root check, then at the root: output.count == input.count * group_size, same dtype.
void check_gather_shapes(std::string_view where, const BufferView& input, const BufferView& output, int root,
                         int rank, int group_size);
// Root check, then at the root: input.count == output.count * group_size, same dtype.
void check_scatter_shapes(std::string_view where, const BufferView& input, const BufferView& output, int root,
                          int rank, int group_size);
// input and output of the same count and dtype, the count a multiple of group_size.
void check_all_to_all_shapes(std::string_view where, const BufferView& input, const BufferView& output,
                             int group_size);
// group_size counts each, summing to the input's and output's counts; same dtype; this rank's
// own block of one size (send_counts[rank] == recv_counts[rank]).
void check_all_to_allv_shapes(std::string_view where, const BufferView& input,
                              const std::vector<std::size_t>& send_counts, const BufferView& output,
                              const std::vector<std::size_t>& recv_counts, int rank, int group_size);

}  // namespace fastrun
