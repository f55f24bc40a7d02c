#include "fastrun/runtime/backend/shm/p2p_engine.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>

#include <boost/container/small_vector.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/backend/shm/wait_policy.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/op_timeout.h"
#include "fastrun/runtime/process_group/rank_name.h"


namespace fastrun::shm {
namespace {

using Clock = std::chrono::steady_clock;

enum Kind : std::uint32_t { kEager = 1, kRendezvous = 2, kAck = 3, kNack = 4, kCts = 5 };

template <typename T> std::atomic_ref<T> atomic(T& x) { return std::atomic_ref<T>(x); }

// Cooperative copies (p2p_engine.h): a message of `bytes` is cut into chunks of a 32nd of it in
// whole pages, 32 KiB to 1 MiB, and each side claims half of what is left at a time (at least a
// chunk): a side alone copies in about log2(32) system calls, and two sides end within a small
// chunk of each other.
constexpr std::size_t kCoopMinChunk = 32 * 1024, kCoopMaxChunk = 1u << 20;
// Smaller messages are read by the receiver alone: at 64-256 KiB the clear-to-send round trip
// and the chunking cost more than the second copier saves (a ping-pong took 1.13-1.28 times
// as long in alternating runs at load 15-20).
constexpr std::size_t kCoopMinBytes = 1u << 20;
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

// copy_counts(): one atomic per field (a process may have several engines).
struct {
  std::atomic<std::uint64_t> single_copy{0}, cooperative{0}, chunks_received{0}, chunks_sent{0},
      chunks_handed_back{0};
} g_counts;
void count(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

// Copies `bytes` between this process's `local` and `remote` in process `pid` (CMA); 0 or errno.
int cma_copy(pid_t pid, std::byte* local, std::uint64_t remote, std::size_t bytes, bool write) {
  for (std::size_t done = 0; done < bytes;) {
    iovec l{local + done, bytes - done};
    iovec r{reinterpret_cast<void*>(static_cast<std::uintptr_t>(remote + done)), bytes - done};
    const ssize_t n = write ? ::process_vm_writev(pid, &l, 1, &r, 1, 0) : ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

// What goes through a ring before every payload (and alone for rendezvous, ack, nack).
struct P2PEngine::Header {
  std::int32_t tag;
  std::uint32_t kind;
  std::uint64_t bytes;
  std::uint64_t addr;  // rendezvous: the payload's address in the sender
  std::uint64_t id;    // rendezvous, ack, nack, clear-to-send: the sender's message id
};
// A clear-to-send (kCts) carries the receiver's buffer in `addr`, the message's size in `bytes`
// and the claim word's generation in `tag`.

struct P2PEngine::Batch {
  const char* what;
  std::size_t remaining = 0;
  std::exception_ptr error;
  // For messages and health checks; inline for the usual one or two ops (no allocation per send).
  boost::container::small_vector<std::weak_ptr<Op>, 2> ops;
};

struct P2PEngine::Op {
  P2POp::Kind kind;
  int peer;
  int tag;
  std::byte* data;
  std::size_t bytes;
  std::shared_ptr<Batch> batch;
  bool done = false;
  std::uint64_t header_end = 0;  // rendezvous send: the ring position after its header (0: not written)
};

// An item of a pair's outgoing queue: a message (with its send) or an ack/nack (with the recv
// that completes once the ack is in the ring, so the sender is never left waiting for it).
struct P2PEngine::Out {
  Header h;
  std::shared_ptr<Op> send;
  std::shared_ptr<Op> completes;
  std::exception_ptr completes_error;
  bool header_done = false;
  std::size_t sent = 0;
};

// A message that arrived before its recv: eager payload on the heap, or a rendezvous to read.
struct P2PEngine::Unexpected {
  Header h;
  std::vector<std::byte> data;
  bool complete = false;
  std::shared_ptr<Op> claimed;  // a recv posted while the payload was still arriving
};

// The cooperative copy of a large message this rank receives from a peer (one at a time per peer).
struct P2PEngine::CoopIn {
  std::shared_ptr<Op> op;  // the recv; null: none in progress
  std::uint64_t id = 0;    // the sender's message id (for the ack)
  std::uint64_t addr = 0;  // the payload's address in the sender
  std::uint64_t gen = 0;
  std::size_t chunk = 0, chunks = 0;
  std::size_t mine = 0;      // chunks this rank claimed
  std::exception_ptr error;  // a read failed: the rest is claimed, not copied, and the answer is a nack
};

struct P2PEngine::Peer {
  std::deque<Out> out;
  std::map<std::uint64_t, std::shared_ptr<Op>> awaiting_ack;
  std::deque<std::shared_ptr<Op>> recvs;  // posted, unmatched, in posting order
  std::list<Unexpected> unexpected;       // arrived, unmatched, in arrival order
  // The eager payload being read from the ring.
  bool reading = false;
  Header cur{};
  std::shared_ptr<Op> target;
  Unexpected* spill = nullptr;
  bool discard = false;
  std::size_t got = 0;
  std::uint64_t tail_seen = 0;  // the peer's tail of our ring to it, as last read (progress_out)
  bool i_read_it = false;  // CMA: this rank can read the peer's memory
  bool it_reads_me = false;
  bool i_write_it = false;  // CMA writes (cooperative copies): as i_read_it, until one fails
  CoopIn coop;              // receiving
  std::uint64_t coop_gen = 0;
};

class P2PEngine::BatchWork final : public Work {
 public:
  BatchWork(std::shared_ptr<P2PEngine> engine, std::shared_ptr<Batch> batch)
      : engine_(std::move(engine)), batch_(std::move(batch)) {}
  void wait(Duration timeout) override { engine_->wait(batch_, timeout); }
  bool completed() override { return engine_->test(batch_); }

 private:
  std::shared_ptr<P2PEngine> engine_;
  std::shared_ptr<Batch> batch_;
};

P2PEngine::P2PEngine(Segment segment, MailboxLayout layout, int rank, std::vector<int> global_ranks,
                     std::string group, Duration default_timeout, int cpus, Hooks hooks)
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
      rendezvous_bytes_(size_ <= cpus ? std::max(kRendezvousBytes, layout.ring_bytes / 4 + 1) : kRendezvousBytes),
      peers_(static_cast<std::size_t>(size_)),
      waiter_(size_, cpus) {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    auto* pair_in = reinterpret_cast<PairControl*>(base_ + layout_.pair_offset(static_cast<std::size_t>(p),
                                                                               static_cast<std::size_t>(rank_)));
    auto* pair_out = reinterpret_cast<PairControl*>(base_ + layout_.pair_offset(static_cast<std::size_t>(rank_),
                                                                                static_cast<std::size_t>(p)));
    peer.i_read_it = atomic(pair_in->receiver.cma_ok).load(std::memory_order_acquire) == 1;
    peer.it_reads_me = atomic(pair_out->receiver.cma_ok).load(std::memory_order_acquire) == 1;
    peer.i_write_it = peer.i_read_it;  // the same ptrace check
  }
}

P2PEngine::~P2PEngine() = default;

PairControl& P2PEngine::pair(int src, int dst) const {
  return *reinterpret_cast<PairControl*>(
      base_ + layout_.pair_offset(static_cast<std::size_t>(src), static_cast<std::size_t>(dst)));
}
std::uint64_t& P2PEngine::head(int src, int dst) const { return pair(src, dst).sender.head; }
std::uint64_t& P2PEngine::tail(int src, int dst) const { return pair(src, dst).receiver.tail; }
std::byte* P2PEngine::ring(int src, int dst) const {
  return base_ + layout_.ring_offset(static_cast<std::size_t>(src), static_cast<std::size_t>(dst));
}
MailboxRank& P2PEngine::rank_block(int rank) const {
  return *reinterpret_cast<MailboxRank*>(base_ + layout_.rank_offset(static_cast<std::size_t>(rank)));
}

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

std::string P2PEngine::who(int rank) const { return rank_name(rank, global_ranks_); }

void P2PEngine::detach() {
  std::lock_guard lock(hooks_mutex_);
  hooks_ = {};
}

void P2PEngine::check_peer(int peer) {
  std::lock_guard lock(hooks_mutex_);
  if (hooks_.check_peer) hooks_.check_peer(peer);
}

void P2PEngine::report_failure(const std::string& reason) {
  std::lock_guard lock(hooks_mutex_);
  if (hooks_.on_failure) hooks_.on_failure(reason);
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

void P2PEngine::finish(const std::shared_ptr<Op>& op, std::exception_ptr error) {
  if (op->done) return;
  op->done = true;
  Batch& b = *op->batch;
  if (error && !b.error) b.error = std::move(error);
  --b.remaining;
}

bool P2PEngine::size_matches(const Header& h, const std::shared_ptr<Op>& op) {
  if (h.bytes == op->bytes) return true;
  finish(op, std::make_exception_ptr(BackendError(fmt::format(
                 "{}: {}: the message has {} bytes, the buffer {} (count x dtype must match the send's)",
                 where(op->batch->what), describe(*op), h.bytes, op->bytes))));
  return false;
}

// ---------------------------------------------------------------------------- posting

std::shared_ptr<P2PEngine::Batch> P2PEngine::start(std::span<const P2POp> ops, const char* what) {
  auto batch = std::make_shared<Batch>();
  batch->what = what;
  std::lock_guard lock(mutex_);
  if (failed_) {
    batch->error = failed_;
    return batch;
  }
  batch->remaining = ops.size();
  batch->ops.reserve(ops.size());
  for (const P2POp& p : ops) {
    auto op = std::make_shared<Op>(Op{p.kind, p.peer, p.tag, static_cast<std::byte*>(p.buffer.data), p.buffer.bytes(),
                                      batch});
    batch->ops.push_back(op);
    Peer& peer = peers_[static_cast<std::size_t>(p.peer)];
    if (p.kind == P2POp::Kind::recv) {
      post_recv(op);
      continue;
    }
    Out o{};
    o.h.tag = p.tag;
    o.h.bytes = op->bytes;
    o.h.id = next_id_++;
    if (op->bytes >= rendezvous_bytes_ && peer.it_reads_me) {
      o.h.kind = kRendezvous;
      o.h.addr = reinterpret_cast<std::uintptr_t>(op->data);
    } else {
      o.h.kind = kEager;
    }
    o.send = std::move(op);
    peer.out.push_back(std::move(o));
  }
  progress();
  return batch;
}

// Matches the earliest message from the peer with the recv's tag that arrived unclaimed.
void P2PEngine::post_recv(const std::shared_ptr<Op>& op) {
  Peer& peer = peers_[static_cast<std::size_t>(op->peer)];
  for (auto it = peer.unexpected.begin(); it != peer.unexpected.end(); ++it) {
    if (it->h.tag != op->tag || it->claimed) continue;
    if (it->h.kind == kRendezvous) {
      const Header h = it->h;
      peer.unexpected.erase(it);
      read_rendezvous(h, op);
    } else if (it->complete) {
      if (size_matches(it->h, op)) {
        if (op->bytes) std::memcpy(op->data, it->data.data(), op->bytes);
        finish(op);
      }
      peer.unexpected.erase(it);
    } else {
      it->claimed = op;  // still arriving: copied out when complete
    }
    return;
  }
  peer.recvs.push_back(op);
}

std::exception_ptr P2PEngine::cma_error(const Op& op, int e) const {
  const std::string text = fmt::format("{}: {}: reading the sender's memory failed: {} (errno {})",
                                       where(op.batch->what), describe(op), std::strerror(e), e);
  return e == ESRCH ? std::make_exception_ptr(PeerFailure(text + ": the sender died"))
                    : std::make_exception_ptr(BackendError(text));
}

// Single copy out of the sender's memory, then an ack (or a nack when the copy failed) that
// completes the recv once it is in the ring. Shared with the sender when it can write here.
void P2PEngine::read_rendezvous(const Header& h, const std::shared_ptr<Op>& op) {
  Peer& peer = peers_[static_cast<std::size_t>(op->peer)];
  const bool fits = size_matches(h, op);
  const std::size_t chunks = (op->bytes + coop_chunk(op->bytes) - 1) / coop_chunk(op->bytes);
  if (fits && op->bytes >= kCoopMinBytes && peer.it_reads_me && !peer.coop.op && chunks <= kField) {
    start_coop(h, op);
    return;
  }
  Out ack{};
  ack.h.kind = kAck;
  ack.h.id = h.id;
  ack.completes = op;
  if (fits) {
    count(g_counts.single_copy);
    if (const int e = cma_copy(rank_block(op->peer).pid, op->data, h.addr, op->bytes, false)) {
      ack.h.kind = kNack;
      ack.completes_error = cma_error(*op, e);
    }
  }
  peer.out.push_back(std::move(ack));
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

// ---------------------------------------------------------------------------- progress

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

// ---------------------------------------------------------------------------- waiting

void P2PEngine::fail_all(const std::exception_ptr& error) {
  if (!failed_) failed_ = error;
  for (Peer& peer : peers_) {
    for (Out& o : peer.out) {
      if (o.send) finish(o.send, error);
      if (o.completes) finish(o.completes, error);
    }
    for (auto& [id, op] : peer.awaiting_ack) finish(op, error);
    for (auto& op : peer.recvs) finish(op, error);
    for (auto& u : peer.unexpected)
      if (u.claimed) finish(u.claimed, error);
    if (peer.target) finish(peer.target, error);
    // A helping sender may still be writing its last chunk: the group is unusable from here.
    if (peer.coop.op) finish(peer.coop.op, error);
    peer.coop = CoopIn{};
    if (peer.reading) {  // the rest of the message is skipped, never written anywhere
      peer.discard = true;
      peer.spill = nullptr;
      for (auto& u : peer.unexpected) u.claimed = nullptr;
    }
    peer.out.clear();
    peer.awaiting_ack.clear();
    peer.recvs.clear();
    peer.target = nullptr;
  }
}

bool P2PEngine::test(const std::shared_ptr<Batch>& batch) {
  std::lock_guard lock(mutex_);
  if (batch->remaining > 0) progress();
  return batch->remaining == 0;
}

void P2PEngine::wait(const std::shared_ptr<Batch>& batch, Duration timeout) {
  if (timeout <= Duration::zero()) timeout = default_timeout_;
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  // A batch is settled when none of its ops can touch the caller's buffers any more (an op that
  // failed alone, e.g. a size mismatch, leaves the others running).
  auto settled = [&] { return batch->remaining == 0; };
  // Fails every pending op with `error` and tells the group; throws it.
  auto give_up = [&](std::exception_ptr error) {
    std::string reason;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      reason = e.what();
    }
    {
      std::lock_guard lock(mutex_);
      fail_all(error);
    }
    report_failure(reason);
    std::rethrow_exception(error);
  };
  MailboxRank& me = rank_block(rank_);
  int awaited = -1;  // the peer of the batch's first pending op: spin or yield depending on its CPU
  auto ready = [&] {
    std::lock_guard lock(mutex_);
    if (!settled()) progress();
    if (settled()) return true;
    if (awaited < 0)
      for (auto& w : batch->ops)
        if (auto op = w.lock(); op && !op->done) {
          awaited = op->peer;
          break;
        }
    return false;
  };
  auto shares_cpu_with_awaited = [&] { return awaited >= 0 && shares_cpu(me.cpu, rank_block(awaited).cpu); };
  // How long the acks may take when every pending op is a send whose receiver has taken its
  // header (so it is copying the payload now, or will as soon as its recv is posted): the
  // payload at 1 GB/s, at most a sleep slice; zero otherwise, and with more ranks than CPUs.
  auto being_read = [&] {
    if (size_ > cpus_) return Clock::duration::zero();  // ranks share cores: sleep as the policy says
    std::lock_guard lock(mutex_);
    std::size_t bytes = 0;
    for (auto& w : batch->ops) {
      auto op = w.lock();
      if (!op || op->done) continue;
      if (op->kind != P2POp::Kind::send || op->header_end == 0 ||
          atomic(tail(rank_, op->peer)).load(std::memory_order_acquire) < op->header_end)
        return Clock::duration::zero();
      bytes += op->bytes;
    }
    return std::min<Clock::duration>(std::chrono::nanoseconds(bytes), kSleepSlice);
  };
  for (bool spun = false;;) {
    if (!spun) {  // once per wait, as the channel does
      spun = true;
      if (waiter_.wait(ready, shares_cpu_with_awaited)) break;
      // The peer is copying our data: keep to the spin-then-yield policy for as long as that
      // may take instead of sleeping, so the ack is seen at once, not after a futex wake-up (on
      // this VM tens of microseconds, and a cold cache after whatever ran meanwhile).
      bool done = false;
      for (const auto until = Clock::now() + being_read(); !done && Clock::now() < until;)
        done = waiter_.wait(ready, shares_cpu_with_awaited);
      if (done) break;
    }
    // Sleep on the doorbell until a peer publishes something for us (or a slice passes).
    sleep_slice(me.doorbell, me.sleepers, deadline, [&] { return !ready(); });
    std::vector<int> waiting_on;
    {
      std::lock_guard lock(mutex_);
      progress();
      if (settled()) break;
      for (auto& w : batch->ops)
        if (auto op = w.lock(); op && !op->done) waiting_on.push_back(op->peer);
    }
    // Health of the peers this batch still needs, then the deadline.
    try {
      for (int p : waiting_on)
        check_peer(p);
    } catch (const std::exception&) {
      {
        std::lock_guard lock(mutex_);
        progress();  // it may have delivered before it went
        if (settled()) break;
      }
      give_up(std::current_exception());
    }
    if (Clock::now() >= deadline) {
      std::vector<std::string> pending;
      {
        std::lock_guard lock(mutex_);
        for (auto& w : batch->ops)
          if (auto op = w.lock(); op && !op->done) pending.push_back(describe(*op));
      }
      give_up(std::make_exception_ptr(TimeoutError(
          op_timeout_message({group_label(global_rank_at(rank_, global_ranks_), group_, "shm"), batch->what, timeout,
                              std::move(pending), "the peer has not posted the matching send/recv"}))));
    }
  }
  if (batch->error) std::rethrow_exception(batch->error);
}

void set_single_copy_writes_fail(bool fail) { g_writes_fail.store(fail, std::memory_order_relaxed); }

CopyCounts copy_counts() {
  const auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  return {get(g_counts.single_copy), get(g_counts.cooperative), get(g_counts.chunks_received),
          get(g_counts.chunks_sent), get(g_counts.chunks_handed_back)};
}

WorkHandle P2PEngine::post(std::span<const P2POp> ops, const char* what) {
  return std::make_shared<BatchWork>(shared_from_this(), start(ops, what));
}

void P2PEngine::run(std::span<const P2POp> ops, const char* what, Duration timeout,
                    const std::function<void()>& meanwhile) {
  auto batch = start(ops, what);
  meanwhile();
  wait(batch, timeout);
}

}  // namespace fastrun::shm
