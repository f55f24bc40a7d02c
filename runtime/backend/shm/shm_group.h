#pragma once
// The shm backend's ProcessGroup: every rank of the group on one node, data moving through one
// shared segment per group (see docs/backend-shm.md for the design and the numbers).
//
// Collectives run to completion on the calling thread (no comm thread: a hand-off would cost
// more than a small all-reduce) and return an already-completed Work; an error (PeerFailure,
// TimeoutError) is carried by that Work and rethrown by wait(). After a failure the group is
// unusable: later ops fail with BackendError naming the first error. Bad arguments (wrong
// counts, device memory, a root out of range) throw ConfigError at once.
//
// Threading: one thread issues collectives on a group (process_group.h); Works may be waited
// on from any thread.
#include <cstdint>
#include <memory>
#include <string>

#include "fastrun/runtime/backend/shm/channel.h"
#include "fastrun/runtime/process_group/process_group.h"

namespace fastrun::shm {

// Sizes of the data path, shared by set-up (segment size) and the algorithms: one pipeline
// chunk per step (layout.h). Measured on the 2-core VM (16-256 MiB all-reduce, docs/backend-shm.md):
// 2 ranks do best with 256 KiB regions; with more ranks than cores two ranks share each core's
// L2, and 128 KiB x 4 beat the 1 MiB regions used before by 20-45 %.
inline constexpr std::size_t kRegionBytes = 256 * 1024;
inline constexpr std::size_t kRingBytesPerRank = 2u << 20;  // > a core's L2, see layout.h
inline constexpr std::size_t kOversubscribedRegionBytes = 128 * 1024;
inline constexpr std::size_t kOversubscribedRingBytesPerRank = 512 * 1024;
inline constexpr std::size_t kMaxSegmentBytes = 256u << 20;   // the ring shrinks for many ranks
inline constexpr std::size_t kSmallAllReduceBytes = 64 * 1024;  // one-step all-reduce up to here

// The segment layout rank 0 chooses for a group of `nranks` on a machine with `cpus` usable
// CPUs (the others read it from the segment header).
Layout shm_layout(int nranks, int cpus);

class ShmGroup final : public ProcessGroup {
 public:
  // `channel` is null for a group of one (everything is local then).
  ShmGroup(const GroupSpec& spec, std::unique_ptr<Channel> channel);
  ~ShmGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "shm"; }

  WorkHandle all_reduce(BufferView buffer, const AllReduceOptions& options = {}) override;
  WorkHandle broadcast(BufferView buffer, const BroadcastOptions& options = {}) override;
  WorkHandle all_gather(BufferView input, BufferView output, const AllGatherOptions& options = {}) override;
  WorkHandle reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options = {}) override;
  WorkHandle barrier(const BarrierOptions& options = {}) override;

 private:
  template <typename Body> WorkHandle run(const char* op, Body&& body);
  void check_host(const char* op, const BufferView& b) const;

  void all_reduce_small(const BufferView& b, ReduceOp op);
  void all_reduce_large(const BufferView& b, ReduceOp op);
  void broadcast_chunks(const BufferView& b, int root);
  void all_gather_chunks(const BufferView& in, const BufferView& out);
  void reduce_scatter_chunks(const BufferView& in, const BufferView& out, ReduceOp op);

  int rank_;
  int size_;
  std::string name_;
  Duration op_timeout_;
  std::unique_ptr<Channel> chan_;
  std::string broken_;  // the first error; non-empty = unusable
};

// The backend factory (registered as "shm"): builds the segment through spec.store.
std::unique_ptr<ProcessGroup> make_shm_group(const GroupSpec& spec);

}  // namespace fastrun::shm
