#pragma once
// The NCCL model's shared-memory segment: one per communicator, named by its unique id, made by
// whichever rank comes first and unlinked as soon as every rank has it mapped (or by an abort
// before that), so no name outlives an init.
//
//   Header | Rank[n] | Channel[n*n] | slot data: n * kSlotBytes | channel data: n*n * kChannelBytes
//
// Collectives move data through the slots in lock step: each rank copies its chunk into its
// slot, raises its `step` and waits for every rank's step (so every slot is full); then each
// rank reads what it needs, raises its step again and waits (so no slot is refilled before
// everyone read it). Ranks that called different collectives never pass the first step (NCCL
// hangs, or reads garbage: the model always hangs, see Rank::signature). Point-to-point goes through Channel[src*n + dst], a byte ring with a
// writer counter and a reader counter. A rank's liveness is an OFD lock on byte `rank` of the
// segment's file: the kernel drops it when the process dies (even before it is reaped), so a
// peer that is `alive` without its lock was killed.
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fastrun_nccl_model {

inline constexpr std::size_t kSlotBytes = 256 * 1024;
inline constexpr std::size_t kChannelBytes = 128 * 1024;
inline constexpr char kMagic[8] = {'F', 'R', 'N', 'C', 'C', 'L', 'M', '1'};

enum RankState : std::uint32_t { kAbsent = 0, kAlive = 1, kLeft = 2, kAborted = 3 };

struct alignas(64) Header {
  std::atomic<std::int32_t> nranks;   // 0 until the first rank sets it
  std::atomic<std::int32_t> arrived;  // ranks registered so far
};

struct alignas(64) Rank {
  std::atomic<std::uint32_t> state;
  std::atomic<std::int32_t> pid;
  std::atomic<std::uint64_t> step;  // lock-step counter of the collectives
  // What this rank's collective #k is (kind, count, type, op, root hashed; never 0), at [k % 2]:
  // a rank waits at a collective's first step for every rank's to be the same. Two slots are
  // enough: no rank can start collective #k+2 before every rank has finished #k.
  std::atomic<std::uint64_t> signature[2];
};

struct alignas(64) Channel {
  std::atomic<std::uint64_t> written;  // bytes ever written by the sender
  alignas(64) std::atomic<std::uint64_t> read;  // bytes ever consumed by the receiver
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int32_t>::is_always_lock_free,
              "the segment's counters are shared between processes: they must be lock-free");

struct Layout {
  int n;
  std::size_t ranks() const { return sizeof(Header); }
  std::size_t channels() const { return ranks() + sizeof(Rank) * static_cast<std::size_t>(n); }
  std::size_t slots() const { return channels() + sizeof(Channel) * static_cast<std::size_t>(n) * n; }
  std::size_t channel_data() const { return slots() + kSlotBytes * static_cast<std::size_t>(n); }
  std::size_t size() const { return channel_data() + kChannelBytes * static_cast<std::size_t>(n) * n; }
};

}  // namespace fastrun_nccl_model
