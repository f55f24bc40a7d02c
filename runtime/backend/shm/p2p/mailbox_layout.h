#pragma once
// The byte layout of one shm group's point-to-point segment (the "mailboxes"), separate from
// the collective segment (layout.h) because the two protocols are independent: collectives
// move in lock step on every rank, a send/recv involves two ranks in any order.
//
//   [MailboxHeader][MailboxRank x n][PairControl x n*n][pad to 4 KiB][ring(0,0) .. ring(n-1,n-1)]
//
// Pair (s, d) is a single-producer single-consumer byte ring from rank s to rank d: s writes
// message headers and eager payloads and advances `head`; d reads and advances `tail` (both
// count bytes since set-up, so head - tail is what is in flight). Each rank has one doorbell
// word that peers bump (and FUTEX_WAKE) only when it sleeps. Every message starts on a 64-byte
// boundary with a header whose first word, its stamp, is written last: a receiver finds a new
// message by reading that line alone, without the sender's `head` (a second cache line to
// fetch from the sender's core on every message); `head` serves payloads streamed in parts.
// Ring size: kMailboxBudget / n^2, a power of two between kMinRingBytes and kMaxRingBytes, so
// the segment stays bounded for many ranks (2 ranks: 4 x 256 KiB; 64 ranks: 4096 x 8 KiB = 32 MiB). Large messages do not go
// through the ring at all (p2p_engine.h: single-copy rendezvous); pair (s, d) has the claim word
// of the one large message from s to d that both may copy at a time (PairCoop).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "fastrun/runtime/backend/shm/channel/layout.h"
#include "fastrun/runtime/os/page.h"

namespace fastrun::shm {

inline constexpr std::uint64_t kMailboxMagic = 0x66617374'6d626f78ULL;  // "fastmbox"
// 4: stamped headers on 64-byte boundaries; 5: cma_ok 0 = not known yet.
inline constexpr std::uint32_t kMailboxVersion = 5;
inline constexpr std::size_t kMailboxBudget = 32u << 20;
inline constexpr std::size_t kMinRingBytes = 4096;
inline constexpr std::size_t kMaxRingBytes = 256 * 1024;

struct alignas(kCacheLine) MailboxHeader {
  std::uint64_t magic;  // written last by the creator (release)
  std::uint32_t version;
  std::uint32_t nranks;
  std::uint64_t ring_bytes;
  std::uint64_t total_bytes;
  // Random, top bit set (the creator's): a message header's stamp is its ring position XOR this
  // key (p2p_ring.cpp), which neither an older lap's stamp nor a payload's bytes can forge.
  std::uint64_t stamp_key;
};

struct alignas(kCacheLine) MailboxRank {
  std::uint32_t doorbell;  // futex word: bumped by a peer that gave this rank something to do
  std::uint32_t sleepers;  // this rank's threads sleeping on `doorbell`
  std::int32_t pid;
  std::int32_t cpu;        // the CPU this rank ran on when it last published (a hint for waiters)
  std::uint64_t probe_addr;   // address (in this rank) of a word peers try to read with CMA
  std::uint64_t probe_value;  // what they must find there
};

inline constexpr std::uint32_t kCmaYes = 1;
inline constexpr std::uint32_t kCmaNo = 2;

// Sender's and receiver's words on separate lines (each is written by one side only).
struct alignas(kCacheLine) PairSender {
  std::uint64_t head;  // bytes written into the ring by the sender
};
struct alignas(kCacheLine) PairReceiver {
  std::uint64_t tail;    // bytes consumed by the receiver
  // Whether the receiver can read the sender's memory (process_vm_readv): 0 not known yet (the
  // receiver publishes its probe after the group's set-up, without a barrier), kCmaYes, kCmaNo.
  std::uint32_t cma_ok;
};
// The cooperative copy of one large message from s to d (p2p_engine.h): its chunks are claimed
// from the front by the receiver and from the back by the sender, by CAS on `claim`, so each is
// copied exactly once; the receiver acks once its own and `sender_done` add up to all of them.
struct alignas(kCacheLine) PairCoop {
  std::uint64_t claim;        // generation << 48 | front << 24 | back (chunk indices; front == back: all claimed)
  std::uint64_t sender_done;  // chunks of this generation the sender has copied
};
struct PairControl {
  PairSender sender;
  PairReceiver receiver;
  PairCoop coop;  // written by both sides (atomics only)
};

static_assert(std::is_trivially_copyable_v<MailboxHeader>);
static_assert(std::is_trivially_copyable_v<MailboxRank>);
static_assert(std::is_trivially_copyable_v<PairControl>);

struct MailboxLayout {
  std::size_t nranks = 0;
  std::size_t ring_bytes = 0;  // a power of two

  static MailboxLayout for_ranks(std::size_t nranks) {
    std::size_t ring = kMaxRingBytes;
    while (ring > kMinRingBytes && ring * nranks * nranks > kMailboxBudget) ring /= 2;
    return MailboxLayout{nranks, ring};
  }
  std::size_t rank_offset(std::size_t rank) const { return sizeof(MailboxHeader) + rank * sizeof(MailboxRank); }
  std::size_t pair_offset(std::size_t src, std::size_t dst) const {
    return rank_offset(nranks) + (src * nranks + dst) * sizeof(PairControl);
  }
  std::size_t data_offset() const { return os::round_up_to_page(pair_offset(nranks, 0)); }
  std::size_t ring_offset(std::size_t src, std::size_t dst) const {
    return data_offset() + (src * nranks + dst) * ring_bytes;
  }
  std::size_t total_bytes() const { return ring_offset(nranks, 0); }
};

}  // namespace fastrun::shm
