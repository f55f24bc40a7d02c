#pragma once
// The P2PEngine's wire header and private state, shared by the files that implement it, one
// protocol each (p2p_engine.h describes them):
//   p2p_engine.cpp       construction, posting (which protocol a send takes), matching a recv
//                        to a message that came first, naming ops in errors
//   p2p_ring.cpp         the pair rings: every header, and the eager payloads, go through them
//   p2p_rendezvous.cpp   single copy out of the sender's memory (CMA), then an ack
//   p2p_cooperative.cpp  large rendezvous messages copied by both sides, chunk by chunk
//   p2p_wait.cpp         waiting on a batch (spin, sleep, health, deadline), failing everything
// Internal: included by those files only.
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"

namespace fastrun::shm {
namespace p2p {

enum Kind : std::uint32_t { kEager = 1, kRendezvous = 2, kAck = 3, kNack = 4, kCts = 5 };

template <typename T> std::atomic_ref<T> atomic(T& x) { return std::atomic_ref<T>(x); }

// What copy_counts() reports: one atomic per field (a process may have several engines).
struct Counters {
  std::atomic<std::uint64_t> single_copy{0}, cooperative{0}, chunks_received{0}, chunks_sent{0},
      chunks_handed_back{0};
};
extern Counters g_counts;  // p2p_rendezvous.cpp
inline void count(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

// Copies `bytes` between this process's `local` and `remote` in process `pid` (CMA; a write when
// `write`); 0 or an errno. p2p_rendezvous.cpp.
int cma_copy(pid_t pid, std::byte* local, std::uint64_t remote, std::size_t bytes, bool write);

}  // namespace p2p

// What goes through a ring before every payload (and alone for rendezvous, ack, nack).
struct P2PEngine::Header {
  std::uint64_t stamp;  // written last: the header is there once this is stamp_of(its position)
  std::int32_t tag;
  std::uint32_t kind;
  std::uint64_t bytes;
  std::uint64_t addr;  // rendezvous: the payload's address in the sender
  std::uint64_t id;    // rendezvous, ack, nack, clear-to-send: the sender's message id
  std::uint32_t whole;  // eager: 1 when the payload was written before the stamp (else streamed)
  std::uint32_t unused;
};
// Messages start on a line (48-byte header: an 8-byte message is one line to fetch), so a stamp
// is always 8-aligned and never spans the ring's wrap.
inline constexpr std::uint64_t kMessageAlign = 64;
inline std::uint64_t next_message_start(std::uint64_t pos) { return (pos + kMessageAlign - 1) & ~(kMessageAlign - 1); }
// A clear-to-send (kCts) carries the receiver's buffer in `addr`, the message's size in `bytes`
// and the claim word's generation in `tag`.

struct P2PEngine::Op {
  P2POp::Kind kind;
  int peer;
  int tag;
  std::byte* data;
  std::size_t bytes;
  Batch* batch;  // the batch that holds this op (below): alive as long as the op is
  bool done = false;
  std::uint64_t header_end = 0;  // rendezvous send: the ring position after its header (0: not written)
};

// The ops of a post that must wait live in their batch, not one allocation each: the queues hold
// them by shared_ptrs that share the batch's ownership (aliasing), so an op a queue still holds
// keeps its batch, as a Work dropped before its ops finished leaves them.
struct P2PEngine::Batch {
  explicit Batch(std::size_t capacity) { ops.reserve(capacity); }
  const char* what = "";  // "send", "gather": where errors happen (a static string)
  std::uint64_t seq = 0;  // op #seq as its group runtime numbered it (0: a collective's part)
  std::size_t remaining = 0;
  std::exception_ptr error;
  // Reserved for every op of the post at once, so an op never moves (the queues point at it);
  // inline for the usual one or two ops.
  boost::container::small_vector<Op, 2> ops;
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
  // Nodes of `unexpected` whose messages were received, kept with their payload buffers: where
  // messages are moved out of the ring before their recvs come (a wait for another message, a
  // collective's idle hook) the next one reuses a node instead of allocating a node and a buffer.
  std::list<Unexpected> spare;
  static constexpr std::size_t kSpareNodes = 8;
  static constexpr std::size_t kSpareBytes = 64 * 1024;  // larger buffers are freed, not kept
  // The eager payload being read from the ring.
  bool reading = false;
  Header cur{};
  std::shared_ptr<Op> target;
  Unexpected* spill = nullptr;
  bool discard = false;
  std::size_t got = 0;
  std::uint64_t tail_seen = 0;     // the peer's tail of our ring to it, as last read (progress_out)
  std::uint64_t sent_in_post = 0;  // the last post (P2PEngine::posts_) with a send to this peer
  // The peer has written its ring to us (its head moved): from then on the ring's pages exist
  // and its stamps may be read (reading an unreserved page would allocate it).
  bool ring_live = false;
  bool ring_reserved = false;   // our ring to it is allocated in /dev/shm (P2PEngine::start)
  bool i_read_it = false;  // CMA: this rank can read the peer's memory
  bool it_reads_me = false;  // and the peer this rank's, once known (P2PEngine::it_reads_me)
  std::uint32_t* its_probe = nullptr;  // where the peer publishes that; null once read
  bool i_write_it = false;  // CMA writes (cooperative copies): as i_read_it, until one fails
  CoopIn coop;              // receiving
  std::uint64_t coop_gen = 0;

  // The earliest message with `tag` that no recv has claimed (unexpected.end(): none): the one a
  // recv of that tag posted now is owed.
  std::list<Unexpected>::iterator first_unclaimed(int tag) {
    return std::find_if(unexpected.begin(), unexpected.end(),
                        [tag](const Unexpected& u) { return u.h.tag == tag && !u.claimed; });
  }
  // A message `h` that came before its recv, at the back of `unexpected`: its payload buffer
  // holds h.bytes bytes (none for a rendezvous, whose payload stays with the sender).
  Unexpected& keep_unexpected(const Header& h, bool complete) {
    const std::size_t payload = h.kind == p2p::kRendezvous ? 0 : h.bytes;
    if (spare.empty()) {
      unexpected.push_back(Unexpected{h, std::vector<std::byte>(payload), complete, nullptr});
    } else {
      unexpected.splice(unexpected.end(), spare, spare.begin());
      Unexpected& u = unexpected.back();
      u.h = h;
      u.data.resize(payload);
      u.complete = complete;
      u.claimed = nullptr;
    }
    return unexpected.back();
  }
  // Its recv came: the node goes back to `spare`.
  void drop_unexpected(std::list<Unexpected>::iterator it) {
    it->claimed = nullptr;
    if (spare.size() >= kSpareNodes || it->data.capacity() > kSpareBytes) {
      unexpected.erase(it);
      return;
    }
    spare.splice(spare.end(), unexpected, it);
  }
};

// The segment's parts, and completing an op: here, inline, since every protocol's hot path uses them.
inline PairControl& P2PEngine::pair(int src, int dst) const {
  return *reinterpret_cast<PairControl*>(
      base_ + layout_.pair_offset(static_cast<std::size_t>(src), static_cast<std::size_t>(dst)));
}
inline std::uint64_t& P2PEngine::head(int src, int dst) const { return pair(src, dst).sender.head; }
inline std::uint64_t& P2PEngine::tail(int src, int dst) const { return pair(src, dst).receiver.tail; }
inline std::byte* P2PEngine::ring(int src, int dst) const {
  return base_ + layout_.ring_offset(static_cast<std::size_t>(src), static_cast<std::size_t>(dst));
}
inline MailboxRank& P2PEngine::rank_block(int rank) const {
  return *reinterpret_cast<MailboxRank*>(base_ + layout_.rank_offset(static_cast<std::size_t>(rank)));
}

inline void P2PEngine::finish(const std::shared_ptr<Op>& op, std::exception_ptr error) {
  if (op->done) return;
  op->done = true;
  --busy_;
  Batch& b = *op->batch;
  if (error && !b.error) b.error = std::move(error);
  --b.remaining;
}

}  // namespace fastrun::shm
