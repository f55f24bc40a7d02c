#include "fastrun/runtime/backend/hier/chain_all_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fastrun/runtime/backend/hier/leader_ring.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/process_group/copy_bytes.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::hier {

BufferView slice(const BufferView& b, std::size_t first, std::size_t count) {
  BufferView s = b;
  s.data = static_cast<std::uint8_t*>(b.data) + first * dtype_size(b.dtype);
  s.count = count;
  return s;
}

namespace {

// Receive and accumulator space: ops run one at a time on the backend's comm thread, so one
// buffer per thread is never shared, and a training loop does not fault in fresh pages per call.
std::vector<std::uint8_t>& scratch(int which, std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buffers[2];
  auto& b = buffers[which];
  if (b.size() < bytes) b.resize(bytes);
  return b;
}

// One two-level all-reduce on one rank, chunk by chunk (chain_all_reduce.h). Every rank of a
// node issues the node's shm ops in the same order: gather(0), gather(1), ..., and from chunk
// kBroadcastLag on, broadcast(c - kBroadcastLag) after gather(c), then the broadcasts left.
class Chain {
 public:
  Chain(const ChainParts& p, BufferView buffer, ReduceOp op, Duration timeout)
      : p_(p),
        l_(*p.layout),
        buffer_(buffer),
        op_(op),
        deadline_(timeout),
        k_(l_.my_node),
        last_(l_.nodes() - 1),
        nlocal_(l_.count[static_cast<std::size_t>(k_)]),
        esize_(dtype_size(buffer.dtype)),
        chunk_(std::max<std::size_t>(1, kChainChunkBytes / esize_)),
        chunks_((buffer.count + chunk_ - 1) / chunk_) {}

  void run() {
    if (l_.leader()) post_receives();
    for (std::size_t c = 0; c < chunks_; ++c) {
      gather(c);
      if (l_.leader()) fold_and_pass(c);
      if (c >= kBroadcastLag) finish(c - kBroadcastLag);
    }
    for (std::size_t c = chunks_ > kBroadcastLag ? chunks_ - kBroadcastLag : 0; c < chunks_; ++c) finish(c);
    if (l_.leader()) p_.ring->flush(deadline_);
  }

 private:
  std::size_t first(std::size_t c) const { return c * chunk_; }
  std::size_t size(std::size_t c) const { return std::min(chunk_, buffer_.count - first(c)); }
  BufferView part(const BufferView& b, std::size_t c) const { return slice(b, first(c), size(c)); }
  bool forwards_result() const { return k_ < last_ - 1; }  // node K-2 is the return path's end

  // Every receive first, so a message is read straight into its place: the accumulator from the
  // previous node, and the result on the way back (into the buffer: it comes only after this
  // node sent that chunk on, so after the chunk's gather read it). Both come from the previous
  // leader on the ring (node 0's result from the last node).
  void post_receives() {
    acc_ = BufferView{scratch(1, buffer_.bytes()).data(), buffer_.count, buffer_.dtype, DeviceKind::cpu};
    for (std::size_t c = 0; c < chunks_; ++c) {
      if (k_ > 0) expect(kChainTag, c, part(acc_, c));
      if (k_ < last_) expect(kReturnTag, c, part(buffer_, c));
    }
  }
  void expect(std::uint32_t tag, std::size_t c, const BufferView& into) {
    p_.ring->expect(tag, static_cast<std::uint32_t>(c), into.data, into.bytes());
  }
  void send(std::uint32_t tag, std::size_t c, const BufferView& from) {
    p_.ring->send(tag, static_cast<std::uint32_t>(c), from.data, from.bytes());
  }

  // This node's inputs of chunk c at the leader, back to back in group rank order.
  void gather(std::size_t c) {
    const BufferView in = part(buffer_, c);
    if (!l_.leader()) {
      p_.node->gather(in, BufferView{nullptr, 0, buffer_.dtype, DeviceKind::cpu}, GatherOptions{0})
          ->wait(deadline_.left());
      return;
    }
    local_ = scratch(0, in.bytes() * static_cast<std::size_t>(nlocal_)).data();
    const BufferView out{local_, in.count * static_cast<std::size_t>(nlocal_), buffer_.dtype, DeviceKind::cpu};
    if (p_.node) p_.node->gather(in, out, GatherOptions{0})->wait(deadline_.left());
    else copy_bytes(local_, in.data, in.bytes());
    p_.ring->progress();  // what came or could leave while the node gathered
  }

  // Step 2 for chunk c: fold this node's inputs onto the accumulator that came (node 0: start
  // it) and send it on; the last node finishes the chunk into the buffer and sends it back.
  void fold_and_pass(std::size_t c) {
    const std::size_t n = size(c);
    const BufferView a = part(acc_, c), result = part(buffer_, c);
    const ReduceOp fold = op_ == ReduceOp::avg ? ReduceOp::sum : op_;  // avg divides once, at the end
    srcs_.clear();
    if (k_ > 0) {
      p_.ring->wait_arrived(kChainTag, static_cast<std::uint32_t>(c), deadline_);
      srcs_.push_back(a.data);
    }
    for (int r = 0; r < nlocal_; ++r) srcs_.push_back(local_ + static_cast<std::size_t>(r) * n * esize_);
    // The last node folds straight into the buffer (its chunk's input was gathered already).
    void* into = k_ < last_ ? a.data : result.data;
    kernels::reduce(buffer_.dtype, fold, into, nullptr, srcs_.data(), static_cast<int>(srcs_.size()), n);
    if (k_ < last_) {
      send(kChainTag, c, a);
      return;
    }
    if (op_ == ReduceOp::avg) kernels::divide(buffer_.dtype, result.data, n, p_.group_size);
    send(kReturnTag, c, result);
  }

  // Step 3 for chunk c: the leader has the result (waiting for it on the way back, and passing
  // it on), then broadcasts it to the node.
  void finish(std::size_t c) {
    if (l_.leader() && k_ < last_) {
      p_.ring->wait_arrived(kReturnTag, static_cast<std::uint32_t>(c), deadline_);
      if (forwards_result()) send(kReturnTag, c, part(buffer_, c));
    }
    if (p_.node) p_.node->broadcast(part(buffer_, c), BroadcastOptions{0})->wait(deadline_.left());
  }

  static constexpr std::uint32_t kChainTag = 0, kReturnTag = 1;
  const ChainParts& p_;
  const NodeLayout& l_;
  BufferView buffer_;
  ReduceOp op_;
  Deadline deadline_;
  int k_, last_, nlocal_;
  std::size_t esize_, chunk_, chunks_;
  BufferView acc_{};
  std::uint8_t* local_ = nullptr;  // the leader's gathered chunk
  std::vector<const void*> srcs_;  // the fold's sources, reused chunk to chunk
};

}  // namespace

void chain_all_reduce(const ChainParts& p, BufferView buffer, ReduceOp op, Duration timeout) {
  Chain(p, buffer, op, timeout).run();
}

}  // namespace fastrun::hier
