#pragma once
// The argument rules of the collectives and point-to-point ops, written once for every backend
// and for the group layer's local (FASTRUN_NO_SYNC=2) path. A mismatch is a caller bug:
// ConfigError whose message starts with `where`. The newer ops take `where` from op_where(),
// so that every backend words the same mistake the same way ("gather on group 'world': root 5
// is not a rank of the group (0..2)").
#include <array>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/process_group/types.h"

namespace fastrun {

// Where a check runs: the first words of its message. Checks run on every op and almost never
// fail, so the words are kept as pieces and joined only when one fails (formatting them for
// every op cost ~100 ns of a ~300 ns small op). Implicit from any string; the pieces' characters
// must outlive the check call (literals and the group's own name do).
class Where {
 public:
  Where(std::string_view whole) : parts_{whole}, count_(1) {}
  Where(const std::string& whole) : Where(std::string_view(whole)) {}
  Where(const char* whole) : Where(std::string_view(whole)) {}
  // The concatenation of `parts` (at most kMaxParts). Inline, as op_where: the pieces' lengths
  // are then known where the literals are.
  static Where joined(std::initializer_list<std::string_view> parts) {
    if (parts.size() > kMaxParts) throw std::logic_error("Where::joined: too many parts");
    Where w;
    for (std::string_view p : parts) w.parts_[w.count_++] = p;
    return w;
  }
  std::string str() const;

 private:
  static constexpr std::size_t kMaxParts = 6;
  Where() = default;
  std::array<std::string_view, kMaxParts> parts_{};
  std::size_t count_ = 0;
};

// "<op> on group '<group>'".
inline Where op_where(std::string_view op, std::string_view group) {
  return Where::joined({op, " on group '", group, "'"});
}

// output.count == input.count * group_size, same dtype.
void check_all_gather_shapes(const Where& where, const BufferView& input, const BufferView& output,
                             int group_size);
// input.count == output.count * group_size, same dtype.
void check_reduce_scatter_shapes(const Where& where, const BufferView& input, const BufferView& output,
                                 int group_size);

// An all-reduce's prescale (backend.h): 1, or a floating dtype (ConfigError otherwise).
void check_prescale(const Where& where, const BufferView& buffer, double prescale);
// Applies it in place (nothing for 1).
void apply_prescale(const BufferView& buffer, double prescale);
// 0 <= root < group_size.
void check_root(const Where& where, int root, int group_size);
// What check_root accepts, without building `where` (call check_root only when this is false).
inline bool root_ok(int root, int group_size) { return root >= 0 && root < group_size; }
// 0 <= peer < group_size, peer != rank (no send to self), tag >= 0.
void check_peer(const Where& where, int peer, int tag, int rank, int group_size);
// What check_peer accepts, without building `where` (a send's fixed cost: call check_peer only
// when this is false, for the message).
inline bool peer_ok(int peer, int tag, int rank, int group_size) {
  return peer >= 0 && peer < group_size && peer != rank && tag >= 0;
}
// Every op of a batch (kinds, peers, tags); `where` names the batch.
void check_p2p_batch(const Where& where, const std::vector<P2POp>& ops, int rank, int group_size);
// What the shape checks accept, without building `where` (a small op's fixed cost: call the
// check only when this is false, for its message). blocks_ok(whole, block): whole.count ==
// block.count * group_size, same dtype (all_gather: (output, input); reduce_scatter: (input,
// output)).
inline bool blocks_ok(const BufferView& whole, const BufferView& block, int group_size) {
  return whole.dtype == block.dtype && whole.count == block.count * static_cast<std::size_t>(group_size);
}
inline bool gather_shapes_ok(const BufferView& input, const BufferView& output, int root, int rank,
                             int group_size) {
  return root_ok(root, group_size) && (rank != root || blocks_ok(output, input, group_size));
}
inline bool scatter_shapes_ok(const BufferView& input, const BufferView& output, int root, int rank,
                              int group_size) {
  return root_ok(root, group_size) && (rank != root || blocks_ok(input, output, group_size));
}
inline bool all_to_all_shapes_ok(const BufferView& input, const BufferView& output, int group_size) {
  return input.dtype == output.dtype && input.count == output.count &&
         input.count % static_cast<std::size_t>(group_size) == 0;
}
// Root check, then at the root: output.count == input.count * group_size, same dtype.
void check_gather_shapes(const Where& where, const BufferView& input, const BufferView& output, int root,
                         int rank, int group_size);
// Root check, then at the root: input.count == output.count * group_size, same dtype.
void check_scatter_shapes(const Where& where, const BufferView& input, const BufferView& output, int root,
                          int rank, int group_size);
// input and output of the same count and dtype, the count a multiple of group_size.
void check_all_to_all_shapes(const Where& where, const BufferView& input, const BufferView& output,
                             int group_size);
// group_size counts each, summing to the input's and output's counts; same dtype; this rank's
// own block of one size (send_counts[rank] == recv_counts[rank]).
void check_all_to_allv_shapes(const Where& where, const BufferView& input,
                              const std::vector<std::size_t>& send_counts, const BufferView& output,
                              const std::vector<std::size_t>& recv_counts, int rank, int group_size);

}  // namespace fastrun
