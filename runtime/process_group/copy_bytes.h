#pragma once
// The runtime's bulk copy of host memory (the shm backend's regions and rings, the reduce
// kernels' second destination, DDP's buckets): memcpy, except where glibc's memcpy is
// pathologically slow.
// glibc copies 4 KiB-256 KiB with `rep movsb` on CPUs with fast short rep-mov (FSRM), and on
// this project's AMD EPYC VM that instruction runs 10-20x slower when the destination lies 1-31
// bytes past the source modulo 64 (256 KiB in cache: 89 us against 6.2; at 512 KiB and more
// glibc takes another path and the phase does not matter). User buffers from malloc sit at any
// 16-byte phase to the shm regions and rings and to each other, so copies hit it by chance.
// Such copies go through a 16-byte vector loop instead, as fast as memcpy at its best (6.3 us);
// the others through memcpy. The kernel's copy for process_vm_readv / _writev has the same
// pathology (256 KiB: 110 us against 25): cma_copy (backend/shm/p2p/p2p_rendezvous.cpp) routes those copies
// through a bounce buffer in phase with the other process's memory, with copy_bytes between.
#include <cstddef>
#include <cstdint>

namespace fastrun {

// From this many bytes glibc's memcpy (and the kernel's copy) use the string copy; below, vector
// moves whatever the phase (measured in the slow phase: 2 KiB level with the loop, 3 KiB 10x
// slower).
inline constexpr std::size_t kStringCopyBytes = 2048;

// Whether a string copy from `src` to `dst` has the slow phase: (dst - src) mod 64 in 1..31.
inline bool slow_copy_phase(std::uintptr_t dst, std::uintptr_t src) {
  const std::uintptr_t phase = (dst - src) & 63;
  return phase != 0 && phase < 32;
}

// memcpy(dst, src, bytes), fast whatever the phase (the ranges must not overlap).
void copy_bytes(void* dst, const void* src, std::size_t bytes);

}  // namespace fastrun
