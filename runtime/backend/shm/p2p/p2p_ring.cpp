#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/common/wait_policy.h"
#include "fastrun/runtime/backend/shm/p2p/p2p_engine_state.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/copy_bytes.h"

// The pair rings (mailbox_layout.h): every header goes through them, and the eager payloads
// after theirs. The sender writes a message, stamps its header and publishes its head; the
// receiver finds a message by its header's stamp, reads it, and publishes its tail; each rings
// the other's doorbell when it moved. The receiver reads the sender's head only for a payload
// streamed in parts (larger than the room there was) and until the first message came.
// progress() moves every pair, as posting, waiting and the group's idle hook call it.

namespace fastrun::shm {

using p2p::atomic;
using p2p::kAck;
using p2p::kCts;
using p2p::kEager;
using p2p::kNack;
using p2p::kRendezvous;

void P2PEngine::copy_to_ring(int dst, std::uint64_t pos, const void* src, std::size_t bytes) {
  const std::size_t size = layout_.ring_bytes, off = pos & (size - 1), first = std::min(bytes, size - off);
  std::byte* r = ring(rank_, dst);
  copy_bytes(r + off, src, first);
  if (bytes > first) copy_bytes(r, static_cast<const std::byte*>(src) + first, bytes - first);
}

void P2PEngine::copy_from_ring(int src, std::uint64_t pos, void* dst, std::size_t bytes) {
  const std::size_t size = layout_.ring_bytes, off = pos & (size - 1), first = std::min(bytes, size - off);
  const std::byte* r = ring(src, rank_);
  if (dst) {
    copy_bytes(dst, r + off, first);
    if (bytes > first) copy_bytes(static_cast<std::byte*>(dst) + first, r, bytes - first);
  }
}

namespace {

// The header at `pos` of a ring (a message start). A header never crosses the ring's end: a
// message starts kMessageAlign-aligned, a header is smaller than kMessageAlign, and a ring is a
// power of two of at least kMinRingBytes. So it is copied in one piece of a size known here (a
// few moves) rather than through copy_to_ring, and its stamp is its first word.
std::byte* header_slot(std::byte* ring, std::size_t ring_bytes, std::uint64_t pos) {
  return ring + (pos & (ring_bytes - 1));
}
std::uint64_t& stamp_word(std::byte* ring, std::size_t ring_bytes, std::uint64_t pos) {
  return *reinterpret_cast<std::uint64_t*>(header_slot(ring, ring_bytes, pos));
}

}  // namespace

void P2PEngine::put_header(int dst, std::uint64_t pos, const Header& h) {
  static_assert(sizeof(Header) == 48 && offsetof(Header, stamp) == 0);
  static_assert(sizeof(Header) <= kMessageAlign && kMinRingBytes % kMessageAlign == 0);
  constexpr std::size_t skip = sizeof(h.stamp);
  std::memcpy(header_slot(ring(rank_, dst), layout_.ring_bytes, pos) + skip,
              reinterpret_cast<const std::byte*>(&h) + skip, sizeof(Header) - skip);
  // Release: a receiver that reads the stamp reads the fields and any payload written before it.
  atomic(stamp_word(ring(rank_, dst), layout_.ring_bytes, pos)).store(pos ^ stamp_key_, std::memory_order_release);
}

void P2PEngine::read_header(int src, std::uint64_t pos, Header& h) const {
  std::memcpy(&h, header_slot(ring(src, rank_), layout_.ring_bytes, pos), sizeof(Header));
}

bool P2PEngine::header_at(int src, std::uint64_t pos) const {
  return atomic(stamp_word(ring(src, rank_), layout_.ring_bytes, pos)).load(std::memory_order_acquire) ==
         (pos ^ stamp_key_);
}

// Wakes `rank` if one of its threads sleeps on its doorbell. The fence pairs with the sleeper's
// (wait()): either it sees what we published before sleeping, or we see it registered.
// Also notes this rank's CPU, for a peer that decides whether to spin or yield (wait_policy.h).
void P2PEngine::ring_doorbell(int rank) {
  note_cpu(rank_block(rank_).cpu);
  MailboxRank& rb = rank_block(rank);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (atomic(rb.sleepers).load(std::memory_order_relaxed) == 0) return;
  atomic(rb.doorbell).fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(rb.doorbell);
}

void P2PEngine::poll() noexcept {
  try {
    std::lock_guard lock(mutex_);
    progress();
  } catch (...) {
  }
}

void P2PEngine::progress(bool spill) {
  // What this rank has to send goes out first: a peer waiting for a rendezvous header must not
  // wait for the single copies progress_in may do now (9 us for 128 KiB here), or the two
  // ranks of an all-to-all take turns at copying instead of copying at once.
  for (int p = 0; p < size_; ++p)
    if (p != rank_) progress_out(p);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    progress_in(p, spill);
    poll_coop(p);
    progress_out(p);
  }
}

// The receiver finds header and payload together and finishes the message in one pass. The
// receiver's tail is read again only when the ring looks full (see progress_out).
bool P2PEngine::put_whole(int p, Header& hd, const std::byte* payload) {
  std::uint64_t& head_word = head(rank_, p);
  const std::uint64_t h = atomic(head_word).load(std::memory_order_relaxed);  // only this rank writes it
  const std::uint64_t whole = next_message_start(sizeof(Header) + hd.bytes);
  const std::size_t size = layout_.ring_bytes;
  std::uint64_t& t = peers_[static_cast<std::size_t>(p)].tail_seen;
  if (size - (h - t) < whole) {
    t = atomic(tail(rank_, p)).load(std::memory_order_acquire);
    if (size - (h - t) < whole) return false;
  }
  if (hd.bytes) copy_to_ring(p, h + sizeof(Header), payload, hd.bytes);
  hd.whole = 1;
  put_header(p, h, hd);
  atomic(head_word).store(h + whole, std::memory_order_release);
  return true;
}

void P2PEngine::progress_out(int p) {
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  if (peer.out.empty()) return;
  std::uint64_t& head_word = head(rank_, p);
  std::uint64_t h = atomic(head_word).load(std::memory_order_relaxed);  // only this rank writes it
  // The receiver's tail as last read: reading it again only when the ring looks full saves a
  // cache-line transfer per message (the receiver writes that line on every message it takes).
  std::uint64_t& t = peer.tail_seen;
  const std::size_t size = layout_.ring_bytes;
  // Whether `bytes` more fit, reading the receiver's tail again if they seem not to.
  auto room_for = [&](std::uint64_t bytes) {
    if (size - (h - t) >= bytes) return true;
    t = atomic(tail(rank_, p)).load(std::memory_order_acquire);
    return size - (h - t) >= bytes;
  };
  bool wrote = false;
  auto publish = [&] {
    atomic(head_word).store(h, std::memory_order_release);
    wrote = true;
  };
  while (!peer.out.empty()) {
    Out& o = peer.out.front();
    // An eager message that fits goes in whole (put_whole publishes the head itself).
    if (!o.header_done && o.h.kind == kEager && put_whole(p, o.h, o.send->data)) {
      h = atomic(head_word).load(std::memory_order_relaxed);
      wrote = true;
      auto op = std::move(o.send);
      peer.out.pop_front();
      finish(op);
      continue;
    }
    if (!o.header_done) {
      if (!room_for(kMessageAlign)) break;
      o.h.whole = 0;
      put_header(p, h, o.h);
      o.header_done = true;
      // An eager payload follows in parts, as room comes; after a header alone the next message
      // starts on the next line.
      h += o.h.kind == kEager ? sizeof(Header) : kMessageAlign;
      publish();  // at once: a later call starts from the published head, never from a stale one
      if (o.h.kind == kAck || o.h.kind == kNack || o.h.kind == kCts) {
        auto op = std::move(o.completes);
        auto error = std::move(o.completes_error);
        peer.out.pop_front();
        if (op) finish(op, error);
        continue;
      }
      if (o.h.kind == kRendezvous) {
        o.send->header_end = h;
        peer.awaiting_ack.emplace(o.h.id, std::move(o.send));
        peer.out.pop_front();
        continue;
      }
    }
    if (o.sent < o.h.bytes) {
      if (!room_for(1)) break;
      const std::size_t n = std::min<std::size_t>(size - (h - t), o.h.bytes - o.sent);
      copy_to_ring(p, h, o.send->data + o.sent, n);
      h += n;
      o.sent += n;
      publish();
      if (o.sent < o.h.bytes) continue;
    }
    // The whole payload is in: skip to the next message's start once there is room for the gap.
    if (!room_for(next_message_start(h) - h)) break;
    h = next_message_start(h);
    publish();
    auto op = std::move(o.send);
    peer.out.pop_front();
    finish(op);
  }
  if (wrote) ring_doorbell(p);
}

// Routes a message header that just arrived to its recv, or keeps it as unexpected; false (the
// message left in the ring, nothing read) for an eager one no recv wants when not `spill`.
bool P2PEngine::match(int p, const Header& h, bool spill) {
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  // Moved, not copied: a shared_ptr's copy and release are a locked add each, on the path from
  // a message's arrival to its recv's return (docs/benchmarks.md: 8 B one way 0.14 -> 0.13 µs).
  std::shared_ptr<Op> op;
  for (auto it = peer.recvs.begin(); it != peer.recvs.end(); ++it)
    if ((*it)->tag == h.tag) {
      op = std::move(*it);
      if (it == peer.recvs.begin()) peer.recvs.pop_front();  // the usual case: not deque's general erase
      else peer.recvs.erase(it);
      break;
    }
  if (h.kind == kRendezvous) {
    if (op) read_rendezvous(h, op);
    else peer.keep_unexpected(h, true);
    return true;
  }
  if (!op && !spill) return false;
  peer.reading = true;
  ++busy_;
  peer.cur = h;
  peer.got = 0;
  peer.spill = nullptr;
  peer.discard = false;
  peer.target = nullptr;
  if (op) {
    peer.discard = !size_matches(h, op);
    if (!peer.discard) peer.target = std::move(op);
  } else {
    peer.spill = &peer.keep_unexpected(h, false);
  }
  return true;
}

bool P2PEngine::ring_written(int src, std::uint64_t tail) {
  Peer& peer = peers_[static_cast<std::size_t>(src)];
  if (!peer.ring_live) {
    if (atomic(head(src, rank_)).load(std::memory_order_acquire) == tail) return false;
    peer.ring_live = true;
  }
  return true;
}

void P2PEngine::progress_in(int p, bool spill) {
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  std::uint64_t& tail_word = tail(p, rank_);
  std::uint64_t t = atomic(tail_word).load(std::memory_order_relaxed);  // only this rank writes it
  if (!ring_written(p, t)) return;
  const std::uint64_t start = t;
  std::uint64_t there = t;  // the ring holds the sender's bytes up to here (at least)
  for (;;) {
    if (!peer.reading) {
      if (!header_at(p, t)) break;
      Header hd;
      read_header(p, t, hd);
      if (hd.kind == kCts) {  // the receiver copies our message from the front: take the back
        t += kMessageAlign;
        if (auto it = peer.awaiting_ack.find(hd.id); it != peer.awaiting_ack.end()) help_coop(p, hd, *it->second);
        continue;
      }
      if (hd.kind == kAck || hd.kind == kNack) {
        t += kMessageAlign;
        auto it = peer.awaiting_ack.find(hd.id);
        if (it != peer.awaiting_ack.end()) {
          auto op = std::move(it->second);
          peer.awaiting_ack.erase(it);
          finish(op, hd.kind == kAck ? nullptr
                                     : std::make_exception_ptr(BackendError(fmt::format(
                                           "{}: {}: the receiver could not read this rank's memory (see its error)",
                                           where(op->batch->what), describe(*op)))));
        }
        continue;
      }
      // Not spilling: an eager message no recv wants is left in the ring, for its recv (or the
      // next wait) to take.
      if (!match(p, hd, spill)) break;
      if (!peer.reading) {  // a rendezvous: its header alone
        t += kMessageAlign;
        continue;
      }
      t += sizeof(Header);
      there = hd.whole ? t + hd.bytes : t;
    }
    const std::size_t want = peer.cur.bytes - peer.got;
    // A payload streamed in parts: how far the sender got is its head.
    if (there - t < want) there = atomic(head(p, rank_)).load(std::memory_order_acquire);
    const std::size_t n = std::min<std::size_t>(there - t, want);
    void* dst = peer.discard ? nullptr
                : peer.target ? static_cast<void*>(peer.target->data + peer.got)
                              : static_cast<void*>(peer.spill->data.data() + peer.got);
    if (n > 0) copy_from_ring(p, t, dst, n);
    t += n;
    peer.got += n;
    if (peer.got < peer.cur.bytes) break;  // the rest is not written yet
    peer.reading = false;
    --busy_;
    t = next_message_start(t);
    if (peer.target) {
      finish(peer.target);
      peer.target = nullptr;
    } else if (peer.spill) {
      peer.spill->complete = true;
      if (auto op = peer.spill->claimed) {
        for (auto it = peer.unexpected.begin(); it != peer.unexpected.end(); ++it)
          if (&*it == peer.spill) {
            deliver_kept(peer, it, op);
            break;
          }
      }
      peer.spill = nullptr;
    }
  }
  if (t != start) {
    atomic(tail_word).store(t, std::memory_order_release);
    // The sender may wait for room. Ringing only then (a flag the sender sets) was tried and
    // was worse with more ranks than cores: slower and more context switches, since the early
    // wake-up finds its messages arriving (docs/benchmarks.md, "Figures behind the constants").
    ring_doorbell(p);
  }
}

}  // namespace fastrun::shm
