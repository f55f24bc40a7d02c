#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine_state.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/copy_bytes.h"
#include "fastrun/runtime/process_group/rank_name.h"
#include "fastrun/runtime/process_group/recycling_allocator.h"

// The engine's life and its posting: which protocol each send takes, and matching a recv to a
// message that arrived first. The protocols themselves are in the files p2p_engine_state.h lists.

namespace fastrun::shm {

using p2p::atomic;
using p2p::kEager;
using p2p::kRendezvous;

class P2PEngine::BatchWork final : public Work {
 public:
  BatchWork(std::shared_ptr<P2PEngine> engine, std::shared_ptr<Batch> batch)
      : engine_(std::move(engine)), batch_(std::move(batch)) {}
  void wait(Duration timeout) override { engine_->wait(batch_, timeout); }
  bool completed() override { return engine_->test(batch_); }
  // A batch gets a Work only when it was not done when posted (start() returns no batch then),
  // and only a progress pass can settle it since: not known to be complete.
  bool known_complete() override { return false; }

 private:
  std::shared_ptr<P2PEngine> engine_;
  std::shared_ptr<Batch> batch_;
};

P2PEngine::P2PEngine(Segment segment, MailboxLayout layout, int rank, std::vector<int> global_ranks,
                     std::string group, Duration default_timeout, int cpus, std::chrono::microseconds yield_for,
                     std::shared_ptr<GroupHealth> health, Hooks hooks)
    : segment_(std::move(segment)),
      base_(segment_.data()),
      layout_(layout),
      rank_(rank),
      size_(static_cast<int>(layout.nranks)),
      group_(std::move(group)),
      default_timeout_(default_timeout),
      global_ranks_(std::move(global_ranks)),
      hooks_(std::move(hooks)),
      cpus_(cpus),
      health_(std::move(health)),
      rendezvous_bytes_(size_ <= cpus ? std::max(kRendezvousBytes, layout.ring_bytes / 4 + 1) : kRendezvousBytes),
      peers_(static_cast<std::size_t>(size_)),
      stamp_key_(reinterpret_cast<const MailboxHeader*>(base_)->stamp_key),
      waiter_(size_, cpus, yield_for, SpinThenYield::AfterIdleYield::poll) {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    auto* pair_in = reinterpret_cast<PairControl*>(base_ + layout_.pair_offset(static_cast<std::size_t>(p),
                                                                               static_cast<std::size_t>(rank_)));
    auto* pair_out = reinterpret_cast<PairControl*>(base_ + layout_.pair_offset(static_cast<std::size_t>(rank_),
                                                                                static_cast<std::size_t>(p)));
    // Our own probe of the peer, published by MailboxSetup::finish before this; the peer's of us
    // comes when it comes (it_reads_me).
    peer.i_read_it = atomic(pair_in->receiver.cma_ok).load(std::memory_order_acquire) == kCmaYes;
    peer.its_probe = &pair_out->receiver.cma_ok;
    peer.i_write_it = peer.i_read_it;  // the same ptrace check
  }
}

P2PEngine::~P2PEngine() = default;

bool P2PEngine::it_reads_me(Peer& peer) {
  if (!peer.its_probe) return peer.it_reads_me;
  const std::uint32_t v = atomic(*peer.its_probe).load(std::memory_order_acquire);
  if (v == 0) return false;  // not published yet: the ring, this time
  peer.it_reads_me = v == kCmaYes;
  peer.its_probe = nullptr;  // known from now on
  return peer.it_reads_me;
}

std::string P2PEngine::who(int rank) const { return rank_name(rank, global_ranks_); }

void P2PEngine::detach() {
  std::lock_guard lock(hooks_mutex_);
  hooks_ = {};
}

void P2PEngine::check_peer(int peer) {
  std::lock_guard lock(hooks_mutex_);
  if (hooks_.check_peer) hooks_.check_peer(peer);
}

void P2PEngine::report_failure() {
  std::lock_guard lock(hooks_mutex_);
  if (hooks_.on_failure) hooks_.on_failure();
}

std::string P2PEngine::describe(const Op& op) const {
  const std::string who = this->who(op.peer);
  if (op.tag < 0) return fmt::format("{} {} ({} bytes)", op.kind == P2POp::Kind::send ? "send to" : "recv from", who,
                                     op.bytes);
  return fmt::format("{} {} tag {} ({} bytes)", op.kind == P2POp::Kind::send ? "send to" : "recv from", who, op.tag,
                     op.bytes);
}

std::string P2PEngine::where(const char* what) const {
  return fmt::format("shm {} on group '{}' rank {}", what, group_, rank_);
}

bool P2PEngine::size_matches(const Header& h, const std::shared_ptr<Op>& op) {
  if (h.bytes == op->bytes) return true;
  finish(op, std::make_exception_ptr(BackendError(fmt::format(
                 "{}: {}: the message has {} bytes, the buffer {} (count x dtype must match the send's)",
                 where(op->batch->what), describe(*op), h.bytes, op->bytes))));
  return false;
}

void P2PEngine::deliver_kept(Peer& peer, std::list<Unexpected>::iterator it, const std::shared_ptr<Op>& op) {
  if (size_matches(it->h, op)) {
    if (op->bytes) copy_bytes(op->data, it->data.data(), op->bytes);
    finish(op);
  }
  peer.drop_unexpected(it);
}

// ---------------------------------------------------------------------------- posting

WorkHandle P2PEngine::post(std::span<const P2POp> ops, const char* what, std::uint64_t seq) {
  auto batch = start(ops, what, seq);
  // Every op done when posted (sends written, messages already here copied out): no Work of
  // its own.
  if (!batch) return completed_work();
  return std::allocate_shared<BatchWork>(RecyclingAllocator<BatchWork>{}, shared_from_this(), std::move(batch));
}

bool P2PEngine::send_now(const P2POp& send) {
  Peer& peer = peers_[static_cast<std::size_t>(send.peer)];
  const std::size_t bytes = send.buffer.bytes();
  if (!peer.out.empty() || !peer.ring_reserved || (bytes >= rendezvous_bytes_ && it_reads_me(peer))) return false;
  Header h{};
  h.tag = send.tag;
  h.kind = kEager;
  h.bytes = bytes;
  h.id = next_id_;
  if (!put_whole(send.peer, h, static_cast<const std::byte*>(send.buffer.data))) return false;
  ++next_id_;
  ring_doorbell(send.peer);
  return true;
}

// A recv whose message is here already, copied out at once with no Op to track: the earliest
// unclaimed message from the peer with its tag, kept complete in `unexpected`, or else (when
// `look_in_ring`) whole at the head of the peer's ring, no recv of that peer pending before it
// and nothing being read. Else it must be posted as usual: nothing_yet when its peer's ring is
// empty and nothing of it is kept, posted otherwise (a rendezvous, a size mismatch to report, a
// message of another tag first).
P2PEngine::RecvNow P2PEngine::recv_now(const P2POp& recv, bool look_in_ring) {
  Peer& peer = peers_[static_cast<std::size_t>(recv.peer)];
  const std::size_t bytes = recv.buffer.bytes();
  auto* dst = static_cast<std::byte*>(recv.buffer.data);
  if (auto it = peer.first_unclaimed(recv.tag); it != peer.unexpected.end()) {
    if (it->h.kind != kEager || !it->complete || it->h.bytes != bytes) return RecvNow::posted;
    if (bytes) copy_bytes(dst, it->data.data(), bytes);
    peer.drop_unexpected(it);
    return RecvNow::done;
  }
  if (!look_in_ring || !peer.recvs.empty() || peer.reading) return RecvNow::posted;
  std::uint64_t& tail_word = tail(recv.peer, rank_);
  const std::uint64_t t = atomic(tail_word).load(std::memory_order_relaxed);  // only this rank writes it
  if (!ring_written(recv.peer, t) || !header_at(recv.peer, t)) return RecvNow::nothing_yet;
  Header h;
  read_header(recv.peer, t, h);
  if (h.kind != kEager || !h.whole || h.tag != recv.tag || h.bytes != bytes) return RecvNow::posted;
  if (bytes) copy_from_ring(recv.peer, t + sizeof(Header), dst, bytes);
  atomic(tail_word).store(next_message_start(t + sizeof(Header) + bytes), std::memory_order_release);
  ring_doorbell(recv.peer);  // the sender may wait for room, as after progress_in
  return RecvNow::done;
}

// Both posts under one lock, with a short local copy between them: it takes less than the lock
// would (kShortLocalCopyBytes); a longer one runs unlocked, as other threads may progress.
void P2PEngine::run(std::span<const P2POp> ops, std::span<const P2POp> after, const char* what, Duration timeout,
                    const LocalCopy& meanwhile) {
  std::shared_ptr<Batch> batch, rest;
  {
    std::unique_lock lock(mutex_);
    batch = start_locked(ops, what, 0);
    if (meanwhile.bytes > kShortLocalCopyBytes) {
      lock.unlock();
      meanwhile.copy();
      lock.lock();
    } else {
      meanwhile.copy();
    }
    if (!after.empty()) rest = start_locked(after, what, 0);
  }
  if (batch && rest) {
    const Deadline deadline(timeout);  // one op timeout for both (read only where both wait)
    wait(batch, timeout);
    wait(rest, deadline.left());
  } else if (batch || rest) {
    wait(batch ? batch : rest, timeout);
  }
}

// Queues each send with its protocol (eager through the ring, or rendezvous where the receiver
// can read this rank's memory and the message is large) and matches each recv; then moves what
// it can at once. A send that can go at once is written and a recv whose message is here is
// copied out, with nothing to track: the batch is made for the first op that must wait, and
// none when every op is done (nullptr).
std::shared_ptr<P2PEngine::Batch> P2PEngine::start(std::span<const P2POp> ops, const char* what, std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  return start_locked(ops, what, seq);
}

std::shared_ptr<P2PEngine::Batch> P2PEngine::start_locked(std::span<const P2POp> ops, const char* what,
                                                          std::uint64_t seq) {
  std::shared_ptr<Batch> batch;
  auto make_batch = [&] {
    batch = std::allocate_shared<Batch>(RecyclingAllocator<Batch>{}, ops.size());
    batch->what = what;
    batch->seq = seq;
  };
  if (health_->failed()) {  // a failed p2p op or collective: the group's one record says why
    make_batch();
    batch->error = std::make_exception_ptr(health_->unusable(what));
    return batch;
  }
  // The segment reserves only its control blocks at creation: this rank's ring to a peer is
  // allocated before the first send to it, so a full /dev/shm fails the post here with a
  // message instead of a SIGBUS at the first write (Segment::reserve).
  for (const P2POp& p : ops) {
    Peer& peer = peers_[static_cast<std::size_t>(p.peer)];
    if (p.kind != P2POp::Kind::send || peer.ring_reserved) continue;
    segment_.reserve(layout_.ring_offset(static_cast<std::size_t>(rank_), static_cast<std::size_t>(p.peer)),
                     layout_.ring_bytes);
    peer.ring_reserved = true;
  }
  // An op that must wait: into the batch, a recv matched or queued, a send queued.
  auto track = [&](const P2POp& p) {
    if (!batch) make_batch();
    ++batch->remaining;
    ++busy_;
    batch->ops.push_back(Op{p.kind, p.peer, p.tag, static_cast<std::byte*>(p.buffer.data), p.buffer.bytes(), batch.get()});
    // Within the capacity reserved: never moves. Moved on into its queue, not copied (a copy
    // and its release are a locked add each).
    std::shared_ptr<Op> op(batch, &batch->ops.back());
    Peer& peer = peers_[static_cast<std::size_t>(p.peer)];
    if (p.kind == P2POp::Kind::recv) {
      post_recv(std::move(op));
      return;
    }
    Out o{};
    o.h.tag = p.tag;
    o.h.bytes = op->bytes;
    o.h.id = next_id_++;
    if (op->bytes >= rendezvous_bytes_ && it_reads_me(peer)) {
      o.h.kind = kRendezvous;
      o.h.addr = reinterpret_cast<std::uintptr_t>(op->data);
    } else {
      o.h.kind = kEager;
    }
    o.send = std::move(op);
    peer.out.push_back(std::move(o));
  };
  // Sends first, then recvs (each kind in its order: matching is per kind): a peer waiting for
  // our message gets it before we look for its own. A recv looks into the ring at once only
  // from a peer this batch sends nothing to (a gather's root, a lone recv): a peer we also send
  // to (an all-to-all) is in step with us, its message rarely there yet, and reading the line it
  // is about to write costs both sides a transfer; the progress below finds it as early.
  const std::uint64_t post = ++posts_;
  for (const P2POp& p : ops) {
    if (p.kind != P2POp::Kind::send) continue;
    peers_[static_cast<std::size_t>(p.peer)].sent_in_post = post;
    if (!send_now(p)) track(p);
  }
  // Whether all that is in flight are recvs of this post that found nothing from their peers.
  bool only_idle_recvs = busy_ == 0;  // nothing from before, no send of this post queued
  for (const P2POp& p : ops) {
    if (p.kind != P2POp::Kind::recv) continue;
    const RecvNow r = recv_now(p, peers_[static_cast<std::size_t>(p.peer)].sent_in_post != post);
    if (r == RecvNow::done) continue;
    track(p);
    if (r != RecvNow::nothing_yet) only_idle_recvs = false;
  }
  // Every op done at once and nothing else in flight: a pass would only read the peers' lines
  // (the next message's header, which its sender may be writing) for nothing; the same when all
  // that is in flight are recvs of this post that just looked at their rings and found them
  // empty (a lone recv posted before its message: the wait polls next). Otherwise move what can
  // move now.
  if (busy_ > 0 && !only_idle_recvs) progress(false);
  return batch;
}

// Matches the earliest message from the peer with the recv's tag that arrived unclaimed.
void P2PEngine::post_recv(std::shared_ptr<Op> op) {
  Peer& peer = peers_[static_cast<std::size_t>(op->peer)];
  const auto it = peer.first_unclaimed(op->tag);
  if (it == peer.unexpected.end()) {
    peer.recvs.push_back(std::move(op));
  } else if (it->h.kind == kRendezvous) {
    const Header h = it->h;
    peer.drop_unexpected(it);
    read_rendezvous(h, op);
  } else if (it->complete) {
    deliver_kept(peer, it, op);
  } else {
    it->claimed = std::move(op);  // still arriving: copied out when complete
  }
}

}  // namespace fastrun::shm
