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

Chunks::Chunks(std::size_t count_, DType dtype)
    : count(count_), chunk(std::max<std::size_t>(1, kChainChunkBytes / dtype_size(dtype))), n((count + chunk - 1) / chunk) {}

std::size_t Chunks::size(std::size_t c) const { return std::min(chunk, count - first(c)); }

namespace {

// Receive, accumulator and staging space: a thread runs one op at a time, so one buffer per
// thread is never shared, and a training loop does not fault in fresh pages per call.
std::uint8_t* scratch(int which, std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buffers[4];
  auto& b = buffers[which];
  if (b.size() < bytes) b.resize(bytes);
  return b.data();
}

// One two-level all-reduce on one rank, chunk by chunk (chain_all_reduce.h). Every rank of a
// node issues the node's shm ops in the same order: spread_in(0), spread_in(1), ..., and from
// chunk kBroadcastLag on, spread_out(c - kBroadcastLag) after spread_in(c), then the rest.
// A rank that carries a part of each chunk round a ring (a leader; with rails every rank) posts
// its receives first, folds and passes its part on, and takes its result back.
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
        me_(l_.local_rank()),
        rails_(p.rails && buffer.bytes() >= kRailsFromBytes),
        carrier_(rails_ || l_.leader()),
        esize_(dtype_size(buffer.dtype)),
        chunks_(buffer.count, buffer.dtype) {}

  void run() {
    if (carrier_) post_receives();
    for (std::size_t c = 0; c < chunks_.n; ++c) {
      spread_in(c);
      if (carrier_) fold_and_pass(c);
      if (c >= kBroadcastLag) finish(c - kBroadcastLag);
    }
    for (std::size_t c = chunks_.n > kBroadcastLag ? chunks_.n - kBroadcastLag : 0; c < chunks_.n; ++c) finish(c);
    if (carrier_) p_.ring->flush(deadline_);
  }

 private:
  std::size_t first(std::size_t c) const { return chunks_.first(c); }
  std::size_t size(std::size_t c) const { return chunks_.size(c); }
  BufferView part(const BufferView& b, std::size_t c) const { return chunks_.part(b, c); }
  // With rails, local rank q carries elements [offset(c, q), + share(c, q)) of chunk c: the chunk
  // split into nlocal_ nearly equal slices; else the leader carries the whole chunk.
  std::size_t share(std::size_t c, int q) const {
    const std::size_t n = static_cast<std::size_t>(nlocal_), len = size(c);
    if (!rails_) return len;
    return len / n + (static_cast<std::size_t>(q) < len % n ? 1 : 0);
  }
  std::size_t offset(std::size_t c, int q) const {
    const std::size_t n = static_cast<std::size_t>(nlocal_), len = size(c), u = static_cast<std::size_t>(q);
    return rails_ ? u * (len / n) + std::min(u, len % n) : 0;
  }
  // What this rank carries of chunk c, in `b` (the buffer or the accumulator).
  BufferView mine(const BufferView& b, std::size_t c) const {
    return slice(b, first(c) + offset(c, me_), share(c, me_));
  }
  bool forwards_result() const { return k_ < last_ - 1; }  // node K-2 is the return path's end

  // Every receive first, so a message is read straight into its place: the accumulator from the
  // previous node, and the result on the way back (into the buffer: it comes only after this
  // node sent that chunk on, so after the chunk's spread_in read it). Both come from the
  // previous rank on the ring (node 0's result from the last node).
  void post_receives() {
    acc_ = BufferView{scratch(1, buffer_.bytes()), buffer_.count, buffer_.dtype, DeviceKind::cpu};
    for (std::size_t c = 0; c < chunks_.n; ++c) {
      if (k_ > 0) expect(kChainTag, c, mine(acc_, c));
      if (k_ < last_) expect(kReturnTag, c, mine(buffer_, c));
    }
  }
  void expect(std::uint32_t tag, std::size_t c, const BufferView& into) {
    p_.ring->expect(tag, static_cast<std::uint32_t>(c), into.data, into.bytes());
  }
  void send(std::uint32_t tag, std::size_t c, const BufferView& from) {
    p_.ring->send(tag, static_cast<std::uint32_t>(c), from.data, from.bytes());
  }
  BufferView host(void* data, std::size_t count) const { return {data, count, buffer_.dtype, DeviceKind::cpu}; }

  // Step 1 for chunk c: the node's inputs of what this rank carries, back to back in group rank
  // order at local_: at the leader (gather), or with rails each rank's slice from every rank of
  // the node (all-to-all).
  void spread_in(std::size_t c) {
    const BufferView in = part(buffer_, c);
    const std::size_t carried = share(c, me_);
    local_ = carrier_ ? scratch(0, carried * esize_ * static_cast<std::size_t>(nlocal_)) : nullptr;
    const BufferView out = host(local_, carrier_ ? carried * static_cast<std::size_t>(nlocal_) : 0);
    if (!p_.node) {
      copy_bytes(local_, in.data, in.bytes());
    } else if (!rails_) {
      p_.node->gather(in, out, GatherOptions{0})->wait(deadline_.left());
    } else {
      counts_out_.assign(static_cast<std::size_t>(nlocal_), 0);
      for (int q = 0; q < nlocal_; ++q) counts_out_[static_cast<std::size_t>(q)] = share(c, q);
      counts_in_.assign(static_cast<std::size_t>(nlocal_), carried);
      p_.node->all_to_allv(in, counts_out_, out, counts_in_, AllToAllOptions{})->wait(deadline_.left());
    }
    if (carrier_) p_.ring->progress();  // what came or could leave meanwhile
  }

  // Step 2 for chunk c: fold this node's inputs onto the accumulator that came (node 0: start
  // it) and send it on; the last node finishes its part into the buffer and sends it back.
  void fold_and_pass(std::size_t c) {
    const std::size_t n = share(c, me_);
    const BufferView a = mine(acc_, c), result = mine(buffer_, c);
    const ReduceOp fold = op_ == ReduceOp::avg ? ReduceOp::sum : op_;  // avg divides once, at the end
    srcs_.clear();
    if (k_ > 0) {
      p_.ring->wait_arrived(kChainTag, static_cast<std::uint32_t>(c), deadline_);
      srcs_.push_back(a.data);
    }
    for (int r = 0; r < nlocal_; ++r) srcs_.push_back(local_ + static_cast<std::size_t>(r) * n * esize_);
    // The last node folds straight into the buffer (its chunk's input was read already).
    void* into = k_ < last_ ? a.data : result.data;
    kernels::reduce(buffer_.dtype, fold, into, nullptr, srcs_.data(), static_cast<int>(srcs_.size()), n);
    if (k_ < last_) {
      send(kChainTag, c, a);
      return;
    }
    if (op_ == ReduceOp::avg) kernels::divide(buffer_.dtype, result.data, n, p_.group_size);
    send(kReturnTag, c, result);
  }

  // Step 3 for chunk c: the carrier has its result (waiting for it on the way back, and passing
  // it on), then the node's ranks spread the chunk: the leader broadcasts it, or with rails the
  // ranks all-gather their slices (equal blocks: the slices padded to the largest when the chunk
  // does not split evenly, through a staging block).
  void finish(std::size_t c) {
    if (carrier_ && k_ < last_) {
      p_.ring->wait_arrived(kReturnTag, static_cast<std::uint32_t>(c), deadline_);
      if (forwards_result()) send(kReturnTag, c, mine(buffer_, c));
    }
    if (!p_.node) return;
    const BufferView whole = part(buffer_, c);
    if (!rails_) {
      p_.node->broadcast(whole, BroadcastOptions{0})->wait(deadline_.left());
      return;
    }
    const std::size_t block = share(c, 0), n = static_cast<std::size_t>(nlocal_);  // slice 0 is the largest
    const BufferView own = mine(buffer_, c);
    std::uint8_t* in = scratch(2, block * esize_);
    copy_bytes(in, own.data, own.bytes());  // the output holds it too: no aliasing in and out
    const bool even = block * n == whole.count;
    std::uint8_t* out = even ? static_cast<std::uint8_t*>(whole.data) : scratch(3, block * n * esize_);
    p_.node->all_gather(host(in, block), host(out, block * n), AllGatherOptions{})->wait(deadline_.left());
    if (even) return;
    for (int q = 0; q < nlocal_; ++q)
      copy_bytes(static_cast<std::uint8_t*>(whole.data) + offset(c, q) * esize_,
                 out + static_cast<std::size_t>(q) * block * esize_, share(c, q) * esize_);
  }

  static constexpr std::uint32_t kChainTag = 0, kReturnTag = 1;
  const ChainParts& p_;
  const NodeLayout& l_;
  BufferView buffer_;
  ReduceOp op_;
  Deadline deadline_;
  int k_, last_, nlocal_, me_;
  bool rails_;    // this op goes in slices, one per local rank (chain_all_reduce.h)
  bool carrier_;  // carries a part of each chunk round a ring
  std::size_t esize_;
  Chunks chunks_;
  BufferView acc_{};
  std::uint8_t* local_ = nullptr;  // the node's inputs of what this rank carries
  std::vector<const void*> srcs_;  // the fold's sources, reused chunk to chunk
  std::vector<std::size_t> counts_out_, counts_in_;  // the all-to-all's, reused chunk to chunk
};

}  // namespace

void chain_all_reduce(const ChainParts& p, BufferView buffer, ReduceOp op, Duration timeout) {
  Chain(p, buffer, op, timeout).run();
}

}  // namespace fastrun::hier
