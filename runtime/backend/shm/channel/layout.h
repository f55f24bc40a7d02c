#pragma once
// The byte layout of one shm group's segment (trivially copyable structs only; every rank maps
// the same bytes, possibly at different addresses, so nothing here holds a pointer).
//
//   [SegmentHeader][RankControl x n][FingerprintSlot x 2R x n][pad to 4 KiB]
//   [region(0,0) .. region(0,R-1) .. region(n-1,R-1)]
//
// Each rank owns one RankControl (cache-line padded so ranks never false-share) and a ring of R
// data regions. Why a ring and not a double buffer: a core that overwrites lines a peer core has
// just read must invalidate the peer's copies line by line, which is slow; once the ring is larger
// than a core's L2, those copies have left the peer's private caches and rewriting runs at full
// speed (docs/benchmarks.md, "Figures behind the constants"). Rank p writes only its own control
// block and regions; every rank reads everyone's. Synchronisation words are accessed through
// std::atomic_ref (see channel.h for the protocol).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "fastrun/runtime/os/page.h"

namespace fastrun::shm {

inline constexpr std::uint64_t kSegmentMagic = 0x66617374'72756e73ULL;  // "fastruns"
inline constexpr std::uint32_t kLayoutVersion = 6;  // 6: each rank's CPU affinity in its RankControl
inline constexpr std::size_t kCacheLine = 128;  // two lines: defeats the adjacent-line prefetcher
// Readers are done with the data of step k before they publish k + kMaxReadLag (channel.h); a
// ring shorter than kMinRing would make a writer wait for peers that wait for it.
inline constexpr std::uint32_t kMaxReadLag = 2;
inline constexpr std::size_t kMinRing = 4;
inline constexpr std::size_t kAffinityWords = 16;  // 1,024 CPUs, glibc's cpu_set_t

struct alignas(kCacheLine) SegmentHeader {
  std::uint64_t magic;  // written last by the creator (release), checked by openers
  std::uint32_t version;
  std::uint32_t nranks;
  std::uint64_t region_bytes;
  std::uint64_t total_bytes;
  std::uint32_t ring;
};

struct alignas(kCacheLine) RankControl {
  std::uint32_t step;      // futex word: the last step this rank published (wraps; compare with int32 diff)
  std::uint32_t sleepers;  // ranks sleeping on `step`; the publisher calls FUTEX_WAKE only when non-zero
  std::int32_t pid;        // for liveness checks and messages
  std::uint32_t aborted;   // 1 once this rank gave up on the group (error or destruction)
  std::int32_t cpu;        // the CPU this rank ran on when it last published (a hint for waiters)
  // The CPUs this rank may run on (its sched_getaffinity mask, bit c = CPU c), written once
  // before the set-up's barrier: their union is how many cores the group has (shm_setup.cpp).
  alignas(kCacheLine) std::uint64_t affinity[kAffinityWords];
};

// The fingerprint of the op a rank began at step `first_step` (op_fingerprint.h says why a ring
// of them, and how it is read). Words are accessed through std::atomic_ref.
struct FingerprintSlot {
  std::uint64_t first_step;  // 0: never written (steps start at 1)
  std::int64_t words[8];     // process_group/op_record.h's Fingerprint
};

static_assert(std::is_trivially_copyable_v<SegmentHeader>);
static_assert(std::is_trivially_copyable_v<RankControl>);
static_assert(std::is_trivially_copyable_v<FingerprintSlot>);

// Offsets of everything in a segment for `nranks` ranks with regions of `region_bytes`.
struct Layout {
  std::size_t nranks = 0;
  std::size_t region_bytes = 0;
  std::size_t ring = kMinRing;  // regions per rank (a power of two)

  std::size_t control_offset(std::size_t rank) const { return sizeof(SegmentHeader) + rank * sizeof(RankControl); }
  // Twice the ring: a peer is never more than a ring of steps ahead (op_fingerprint.h).
  std::size_t fingerprint_slots() const { return 2 * ring; }
  // Each rank's slots on cache lines of their own: only their owner writes them.
  std::size_t fingerprint_block() const {
    return (fingerprint_slots() * sizeof(FingerprintSlot) + kCacheLine - 1) / kCacheLine * kCacheLine;
  }
  std::size_t fingerprint_offset(std::size_t rank, std::size_t slot) const {
    return control_offset(nranks) + rank * fingerprint_block() + slot * sizeof(FingerprintSlot);
  }
  std::size_t data_offset() const {
    return os::round_up_to_page(control_offset(nranks) + nranks * fingerprint_block());
  }
  // Region `slot` (< ring) of `rank`.
  std::size_t region_offset(std::size_t rank, std::size_t slot) const {
    return data_offset() + (ring * rank + slot) * region_bytes;
  }
  std::size_t total_bytes() const { return region_offset(nranks, 0); }
};

}  // namespace fastrun::shm
