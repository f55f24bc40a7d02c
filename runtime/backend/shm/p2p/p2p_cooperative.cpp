#include <algorithm>
#include <atomic>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine_state.h"

// Cooperative rendezvous (messages of kCoopMinBytes or more): the receiver answers the
// rendezvous with a clear-to-send carrying its buffer's address and copies chunks from the
// front, while the sender copies chunks from the back with process_vm_writev; the two claim
// chunks by CAS on the pair's claim word (PairCoop), so each is copied once.

namespace fastrun::shm {
namespace {

// Cooperative copies (p2p_engine.h): a message of `bytes` is cut into chunks of a 32nd of it in
// whole pages, 32 KiB to 1 MiB, and each side claims half of what is left at a time (at least a
// chunk): a side alone copies in about log2(32) system calls, and two sides end within a small
// chunk of each other.
constexpr std::size_t kCoopMinChunk = 32 * 1024, kCoopMaxChunk = 1u << 20;
// Smaller messages are read by the receiver alone. From 128 KiB the second copier pays on a quiet
// machine, since pinning the pages is most of a process_vm_readv (9 us for 128 KiB on the
// development VM, where a memcpy takes 1): 2 ranks, alternating runs, a 256 KiB ping-pong 20-23
// -> 14-15 us, a gather of 128 KiB blocks 11-12 -> 9.4-9.9, a 512 KiB broadcast 42-43 -> 25-27.
// (At load 15-20, when the sender has no CPU to help with, 1 MiB was the better line: a
// ping-pong of 64-256 KiB took 1.13-1.28 times as long.)
constexpr std::size_t kCoopMinBytes = 128u << 10;
// Below this, a sender that is reading a message of ours (an all-to-all in step) is left out
// (coop_suits); from it both directions cooperate, as before 128 KiB was the line. (Left out at
// every size, a 2-rank all-to-all of 4 MiB took 168-176 us against 179-190, 16 MiB level: too
// little to give up the case of a rank that receives and helps on one pair at once.)
constexpr std::size_t kCoopInStepBytes = 1u << 20;
std::size_t coop_chunk(std::size_t bytes) {
  return std::clamp<std::size_t>((bytes / 32 + 4095) / 4096 * 4096, kCoopMinChunk, kCoopMaxChunk);
}
std::uint64_t claim_size(std::uint64_t front, std::uint64_t back) { return std::max<std::uint64_t>(1, (back - front) / 2); }
// The claim word (PairCoop::claim): generation << 48 | front << 24 | back.
constexpr std::uint64_t kField = (std::uint64_t{1} << 24) - 1;
constexpr std::uint64_t pack(std::uint64_t gen, std::uint64_t front, std::uint64_t back) {
  return gen << 48 | front << 24 | back;
}
constexpr std::uint64_t gen_of(std::uint64_t w) { return w >> 48; }
constexpr std::uint64_t front_of(std::uint64_t w) { return (w >> 24) & kField; }
constexpr std::uint64_t back_of(std::uint64_t w) { return w & kField; }

std::atomic<bool> g_writes_fail{false};  // set_single_copy_writes_fail (tests)

}  // namespace

using p2p::atomic;
using p2p::cma_copy;
using p2p::count;
using p2p::g_counts;
using p2p::kAck;
using p2p::kCts;
using p2p::kNack;

// Whether `op` (a rendezvous recv whose size matched) is copied cooperatively: a large message,
// from a sender that may reach this rank's memory, none other in progress from that peer, few
// enough chunks for the claim word's fields, and below kCoopInStepBytes a sender with nothing of
// ours to read: one that is reading our own rendezvous message (an all-to-all in step) has no
// time to help, and the clear-to-send and the chunks only cost (a 2-rank all-to-all of 1 MiB,
// blocks of 512 KiB: 45 -> 52 us).
bool P2PEngine::coop_suits(const Op& op) {
  Peer& peer = peers_[static_cast<std::size_t>(op.peer)];
  const std::size_t chunks = (op.bytes + coop_chunk(op.bytes) - 1) / coop_chunk(op.bytes);
  return op.bytes >= kCoopMinBytes && it_reads_me(peer) && !peer.coop.op && chunks <= kField &&
         (op.bytes >= kCoopInStepBytes || peer.awaiting_ack.empty());
}

// Opens the pair's claim word for a new generation, tells the sender (clear-to-send) and
// copies from the front. The ack goes once every chunk is copied (poll_coop).
void P2PEngine::start_coop(const Header& h, const std::shared_ptr<Op>& op) {
  const int p = op->peer;
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  CoopIn& c = peer.coop;
  c = CoopIn{};
  c.op = op;
  c.id = h.id;
  c.addr = h.addr;
  c.gen = ++peer.coop_gen & 0xffff;
  c.chunk = coop_chunk(op->bytes);
  c.chunks = (op->bytes + c.chunk - 1) / c.chunk;
  count(g_counts.cooperative);
  PairCoop& pc = pair(p, rank_).coop;
  // The sender touches the word only after it saw the clear-to-send, or with an older
  // generation, which it never claims; every chunk of the previous one is done (poll_coop).
  atomic(pc.sender_done).store(0, std::memory_order_relaxed);
  atomic(pc.claim).store(pack(c.gen, 0, c.chunks), std::memory_order_release);
  Out cts{};
  cts.h.kind = kCts;
  cts.h.tag = static_cast<std::int32_t>(c.gen);
  cts.h.id = h.id;
  cts.h.bytes = op->bytes;
  cts.h.addr = reinterpret_cast<std::uintptr_t>(op->data);
  peer.out.push_back(std::move(cts));
  progress_out(p);  // before copying: the sender starts on its end while we do ours
  copy_front(p);
}

// Claims and copies chunks from the front until the two ends meet.
void P2PEngine::copy_front(int p) {
  CoopIn& c = peers_[static_cast<std::size_t>(p)].coop;
  std::uint64_t& claim = pair(p, rank_).coop.claim;
  const pid_t pid = rank_block(p).pid;
  std::uint64_t w = atomic(claim).load(std::memory_order_acquire);
  while (front_of(w) < back_of(w)) {
    const std::uint64_t k = claim_size(front_of(w), back_of(w)), next = w + (k << 24);
    if (!atomic(claim).compare_exchange_weak(w, next, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    const std::size_t off = front_of(w) * c.chunk, n = std::min(k * c.chunk, c.op->bytes - off);
    w = next;
    c.mine += k;
    count(g_counts.chunks_received, k);
    if (c.error) continue;  // claimed so that the count adds up; the recv fails anyway
    if (const int e = cma_copy(pid, c.op->data + off, c.addr + off, n, false)) c.error = cma_error(*c.op, e);
  }
}

// Acks the cooperative recv from `p` once every chunk is copied (the sender may still be
// finishing its last one; it rings our doorbell when done).
void P2PEngine::poll_coop(int p) {
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  CoopIn& c = peer.coop;
  if (!c.op) return;
  PairCoop& pc = pair(p, rank_).coop;
  const std::uint64_t w = atomic(pc.claim).load(std::memory_order_acquire);
  if (front_of(w) < back_of(w)) copy_front(p);  // a chunk the sender handed back
  if (c.mine + atomic(pc.sender_done).load(std::memory_order_acquire) < c.chunks) return;
  Out ack{};
  ack.h.kind = c.error ? kNack : kAck;
  ack.h.id = c.id;
  ack.completes = std::move(c.op);
  ack.completes_error = c.error;
  c = CoopIn{};
  peer.out.push_back(std::move(ack));
}

// The sender's side: claims and writes chunks from the back while any are left, then rings the
// receiver, which may be asleep waiting for the last one.
void P2PEngine::help_coop(int p, const Header& cts, Op& send) {
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  if (!peer.i_write_it || cts.bytes != send.bytes) return;
  PairCoop& pc = pair(rank_, p).coop;
  const std::size_t chunk = coop_chunk(cts.bytes);
  const auto gen = static_cast<std::uint64_t>(static_cast<std::uint32_t>(cts.tag));
  const pid_t pid = rank_block(p).pid;
  bool did = false;
  std::uint64_t w = atomic(pc.claim).load(std::memory_order_acquire);
  while (gen_of(w) == gen && front_of(w) < back_of(w)) {
    const std::uint64_t k = claim_size(front_of(w), back_of(w));
    if (!atomic(pc.claim).compare_exchange_weak(w, w - k, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    const std::size_t off = (back_of(w) - k) * chunk, n = std::min(k * chunk, cts.bytes - off);
    did = true;
    if (g_writes_fail.load(std::memory_order_relaxed) || cma_copy(pid, send.data + off, cts.addr + off, n, true) != 0) {
      // Writes refused where reads were allowed (a seccomp filter): hand the chunks back (only
      // this side moves `back`) and leave the rest of this pair's messages to the receiver.
      peer.i_write_it = false;
      atomic(pc.claim).fetch_add(k, std::memory_order_acq_rel);
      count(g_counts.chunks_handed_back, k);
      break;
    }
    atomic(pc.sender_done).fetch_add(k, std::memory_order_release);
    count(g_counts.chunks_sent, k);
    w = atomic(pc.claim).load(std::memory_order_acquire);
  }
  if (did) ring_doorbell(p);
}

void set_single_copy_writes_fail(bool fail) { g_writes_fail.store(fail, std::memory_order_relaxed); }

}  // namespace fastrun::shm
