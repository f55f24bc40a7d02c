#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/common/wait_policy.h"
#include "fastrun/runtime/backend/shm/p2p/p2p_engine_state.h"
#include "fastrun/runtime/error.h"

// The pair rings (mailbox_layout.h): every header goes through them, and the eager payloads
// after theirs. The sender writes and publishes its head, the receiver reads and publishes its
// tail; each rings the other's doorbell when it moved. progress() moves every pair, as posting,
// waiting and the group's idle hook call it.

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
  std::memcpy(r + off, src, first);
  if (bytes > first) std::memcpy(r, static_cast<const std::byte*>(src) + first, bytes - first);
}

void P2PEngine::copy_from_ring(int src, std::uint64_t pos, void* dst, std::size_t bytes) {
  const std::size_t size = layout_.ring_bytes, off = pos & (size - 1), first = std::min(bytes, size - off);
  const std::byte* r = ring(src, rank_);
  if (dst) {
    std::memcpy(dst, r + off, first);
    if (bytes > first) std::memcpy(static_cast<std::byte*>(dst) + first, r, bytes - first);
  }
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

void P2PEngine::progress() {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    progress_in(p);
    poll_coop(p);
    progress_out(p);
  }
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
  bool wrote = false;
  auto publish = [&] {
    atomic(head_word).store(h, std::memory_order_release);
    wrote = true;
  };
  while (!peer.out.empty()) {
    Out& o = peer.out.front();
    // An eager message that fits goes in whole with one publish: the receiver finds header and
    // payload together and finishes it in one pass, instead of seeing the header alone.
    if (!o.header_done && o.h.kind == kEager && size - (h - t) < sizeof(Header) + o.h.bytes)
      t = atomic(tail(rank_, p)).load(std::memory_order_acquire);
    if (!o.header_done && o.h.kind == kEager && size - (h - t) >= sizeof(Header) + o.h.bytes) {
      copy_to_ring(p, h, &o.h, sizeof(Header));
      if (o.h.bytes) copy_to_ring(p, h + sizeof(Header), o.send->data, o.h.bytes);
      h += sizeof(Header) + o.h.bytes;
      publish();
      auto op = std::move(o.send);
      peer.out.pop_front();
      finish(op);
      continue;
    }
    if (!o.header_done) {
      if (size - (h - t) < sizeof(Header)) {
        t = atomic(tail(rank_, p)).load(std::memory_order_acquire);
        if (size - (h - t) < sizeof(Header)) break;
      }
      copy_to_ring(p, h, &o.h, sizeof(Header));
      h += sizeof(Header);
      o.header_done = true;
      publish();  // at once: a later call starts from the published head, never from a stale one
      if (o.h.kind == kAck || o.h.kind == kNack || o.h.kind == kCts) {  // a header alone
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
    std::size_t space = size - (h - t);
    if (space == 0 && o.sent < o.h.bytes) {
      t = atomic(tail(rank_, p)).load(std::memory_order_acquire);
      space = size - (h - t);
      if (space == 0) break;
    }
    const std::size_t n = std::min<std::size_t>(space, o.h.bytes - o.sent);
    copy_to_ring(p, h, o.send->data + o.sent, n);
    h += n;
    o.sent += n;
    publish();
    if (o.sent == o.h.bytes) {
      auto op = std::move(o.send);
      peer.out.pop_front();
      finish(op);
    }
  }
  if (wrote) ring_doorbell(p);
}

// Routes a message header that just arrived to its recv, or keeps it as unexpected.
void P2PEngine::match(int p, const Header& h) {
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  std::shared_ptr<Op> op;
  for (auto it = peer.recvs.begin(); it != peer.recvs.end(); ++it)
    if ((*it)->tag == h.tag) {
      op = *it;
      peer.recvs.erase(it);
      break;
    }
  if (h.kind == kRendezvous) {
    if (op) read_rendezvous(h, op);
    else peer.unexpected.push_back(Unexpected{h, {}, true, nullptr});
    return;
  }
  peer.reading = true;
  peer.cur = h;
  peer.got = 0;
  peer.spill = nullptr;
  peer.discard = false;
  peer.target = nullptr;
  if (op) {
    peer.discard = !size_matches(h, op);
    if (!peer.discard) peer.target = op;
  } else {
    peer.unexpected.push_back(Unexpected{h, std::vector<std::byte>(h.bytes), false, nullptr});
    peer.spill = &peer.unexpected.back();
  }
}

void P2PEngine::progress_in(int p) {
  Peer& peer = peers_[static_cast<std::size_t>(p)];
  std::uint64_t& tail_word = tail(p, rank_);
  std::uint64_t t = atomic(tail_word).load(std::memory_order_relaxed);  // only this rank writes it
  std::uint64_t h = atomic(head(p, rank_)).load(std::memory_order_acquire);
  if (h == t) return;
  const std::uint64_t start = t;
  for (;;) {
    if (!peer.reading) {
      // The sender publishes a header whole, so a partial one is never visible.
      if (h - t < sizeof(Header)) break;
      Header hd;
      copy_from_ring(p, t, &hd, sizeof(Header));
      t += sizeof(Header);
      if (hd.kind == kCts) {  // the receiver copies our message from the front: take the back
        if (auto it = peer.awaiting_ack.find(hd.id); it != peer.awaiting_ack.end()) help_coop(p, hd, *it->second);
        continue;
      }
      if (hd.kind == kAck || hd.kind == kNack) {
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
      match(p, hd);
      if (!peer.reading) continue;
    }
    const std::size_t want = peer.cur.bytes - peer.got;
    const std::size_t n = std::min<std::size_t>(h - t, want);
    void* dst = peer.discard ? nullptr
                : peer.target ? static_cast<void*>(peer.target->data + peer.got)
                              : static_cast<void*>(peer.spill->data.data() + peer.got);
    if (n > 0) copy_from_ring(p, t, dst, n);
    t += n;
    peer.got += n;
    if (peer.got < peer.cur.bytes) break;  // the rest is not written yet
    peer.reading = false;
    if (peer.target) {
      finish(peer.target);
      peer.target = nullptr;
    } else if (peer.spill) {
      peer.spill->complete = true;
      if (auto op = peer.spill->claimed) {
        for (auto it = peer.unexpected.begin(); it != peer.unexpected.end(); ++it)
          if (&*it == peer.spill) {
            if (size_matches(it->h, op)) {
              if (op->bytes) std::memcpy(op->data, it->data.data(), op->bytes);
              finish(op);
            }
            peer.unexpected.erase(it);
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
