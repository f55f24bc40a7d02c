#pragma once
// Point-to-point messages between the ranks of one shm group, through the mailboxes
// (mailbox_layout.h). MPI's semantics: a recv matches the earliest unmatched message from that
// peer with the same tag; messages between two ranks with one tag never overtake each other.
//
// Protocols (Open MPI's vader is the model):
// - eager: header and payload are copied through the pair's ring (two copies, no waiting for
//   the receiver while the ring has room). Messages under kRendezvousBytes or (a core per
//   rank) up to a quarter of the ring, and every message when the receiver cannot read the
//   sender's memory.
// - rendezvous: the header carries the sender's buffer address; the receiver copies the payload
//   straight out of the sender's memory with process_vm_readv (one copy, "CMA"), then sends an
//   ack header back; the send completes on the ack. Set-up probes CMA on every pair (ptrace
//   rules, seccomp) and, like vader, allows any process to read this one
//   (prctl(PR_SET_PTRACER_ANY)) where Yama would otherwise forbid it.
// - cooperative rendezvous (messages of 128 KiB or more, kCoopMinBytes, from a peer not reading
//   a message of ours at the same time): the receiver answers
//   the rendezvous with a "clear to send" header carrying its buffer's address and copies chunks
//   from the front while the sender, which otherwise only waits for the ack, copies chunks from
//   the back with process_vm_writev; they claim chunks by CAS on the pair's PairCoop word, so
//   each is copied once, and a sender that is busy elsewhere simply leaves every chunk to the
//   receiver. Two cores copy instead of one, and the sender is running (not asleep on its
//   doorbell) when the ack comes. One such message per ordered pair at a time; others are read
//   by the receiver alone.
// Messages that arrive before their recv is posted are buffered on the heap (eager) or kept as
// a pending rendezvous when a wait or poll moves them, so posting order never deadlocks (a ring
// exchange is fine); posting leaves an eager one in the ring, where a recv posted later copies it
// straight into its buffer, with no op to track (a gather's root behind senders that run ahead).
//
// Progress: there is no progress thread. Posting, wait() and completed() progress every
// operation of the engine (the caller's thread does the copies), so a rank must wait on (or
// poll) its point-to-point Works for them to advance. A waiter spins or yields as the collective
// channel does (wait_policy.h), then sleeps on its doorbell in short slices, checking between slices that the peers it waits for are alive
// (the group's collective channel watches their pidfds and the job's failure key), and the
// deadline. Any failure is recorded in the group's GroupHealth (its one failure record, shared
// with the collectives: the first failure of either kind wins), fails every pending op and tells
// the group (on_failure); once the group failed, every later op fails with the group's
// "unusable after an earlier failure" error, whichever kind of op failed first.
//
// Threading: every call may come from any thread; one mutex guards the engine's state (the
// copies run under it, which serialises them within a process; they are memory-bound anyway).
//
// The implementation is a file per protocol; p2p_engine_state.h lists them.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "fastrun/runtime/backend/shm/common/segment.h"
#include "fastrun/runtime/backend/shm/common/wait_policy.h"
#include "fastrun/runtime/backend/shm/p2p/mailbox_layout.h"
#include "fastrun/runtime/process_group/group_health.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::shm {

// Messages of this many bytes or more, and larger than a quarter of the pair's ring, use the
// single-copy rendezvous where the pair allows it. Below that two memcpys through the (cache-
// warm) ring beat one process_vm_readv, whose pinning and system call cost a few microseconds:
// with 2 ranks (256 KiB rings) 64 KiB messages go eager; 128 KiB blocks were slower eager. Not
// with more ranks than CPUs, where CPU time is what is short and the copy through the ring costs
// more than it saves (docs/benchmarks.md, "Figures behind the constants").
inline constexpr std::size_t kRendezvousBytes = 32 * 1024;
// A collective's own block up to this size is copied under the engine's lock, between its two
// posts (P2PEngine::run): a few microseconds at most, where a second lock costs a small op a
// tenth of its instructions. A larger one is copied unlocked: other threads may move messages.
inline constexpr std::size_t kShortLocalCopyBytes = 64 * 1024;

// A collective's own block, copied from `src` to `dst` (unless the same) while its messages move
// (P2PEngine::run).
struct LocalCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  void copy() const {
    if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  }
};

class P2PEngine : public std::enable_shared_from_this<P2PEngine> {
 public:
  struct Hooks {
    // Throws PeerFailure when `peer` died, aborted or the job recorded a failure.
    std::function<void(int peer)> check_peer;
    // Called after a failure was recorded in the group's health (shm: tell the peers at once).
    std::function<void()> on_failure;
    // The group's stalled-op check (Channel::set_stall_check): a slow wait runs it on
    // StallSchedule's times and before it reports a peer's failure; a message fails the batch.
    std::function<std::optional<std::string>()> stall_check;
  };

  // `segment` is mapped and set up (MailboxSetup); ring (s, d) is at layout.ring_offset.
  // `global_ranks` name the members in messages. `health`: the group's failure record.
  P2PEngine(Segment segment, MailboxLayout layout, int rank, std::vector<int> global_ranks, std::string group,
            Duration default_timeout, int cpus, std::chrono::microseconds yield_for,
            std::shared_ptr<GroupHealth> health, Hooks hooks);
  ~P2PEngine();
  P2PEngine(const P2PEngine&) = delete;
  P2PEngine& operator=(const P2PEngine&) = delete;

  // Posts `ops` (already checked; tags may be negative: internal collectives) and returns one
  // Work for all of them. `what` names them in errors ("send", "gather"; a static string),
  // `seq` the op's number (group_runtime.h): its timeout message says "send #3".
  WorkHandle post(std::span<const P2POp> ops, const char* what, std::uint64_t seq);
  // Posts `ops`, copies `meanwhile` (a collective's own block: it overlaps the peers' copies of
  // ours), posts `after`, then waits (for collectives built on point-to-point; runs on the
  // group's op thread). `after`: recvs from peers that `ops` send to (an all-to-all), which are
  // in step with this rank: their messages are often here once `meanwhile` is done, and a recv
  // whose message is here is done with no batch or op to track.
  void run(std::span<const P2POp> ops, std::span<const P2POp> after, const char* what, Duration timeout,
           const LocalCopy& meanwhile = {});
  // Moves every pending message (under the engine's mutex), for a thread blocked elsewhere in the
  // group (Channel::set_idle_hook). Never throws: a failure reaches the Works it concerns.
  void poll() noexcept;
  // The group goes away: hooks are dropped (Works still waited on afterwards only time out or
  // see their peers' messages; they no longer reach the group's channel, only its health).
  void detach();

 private:
  struct Batch;
  struct Op;
  struct Out;
  struct Unexpected;
  struct Peer;
  struct Header;
  struct CoopIn;
  class BatchWork;

  // Posting and matching (p2p_engine.cpp): the batch of the ops that must be waited for, or
  // nullptr when every op was done when posted.
  std::shared_ptr<Batch> start(std::span<const P2POp> ops, const char* what, std::uint64_t seq = 0);
  std::shared_ptr<Batch> start_locked(std::span<const P2POp> ops, const char* what, std::uint64_t seq);
  // Waiting (p2p_wait.cpp): wait() takes mutex_ itself; so do its helpers.
  void wait(const std::shared_ptr<Batch>& batch, Duration timeout);
  bool test(const std::shared_ptr<Batch>& batch);
  bool spin(Batch& batch, int& awaited);
  bool poll_batch(Batch& batch, int& awaited);
  std::chrono::steady_clock::duration ack_time(Batch& batch);
  std::exception_ptr timeout_error(Batch& batch, Duration timeout);
  [[noreturn]] void give_up(const std::exception_ptr& error);

  // Everything below runs under mutex_.
  void post_recv(std::shared_ptr<Op> op);
  void fail_all(const std::exception_ptr& error);
  // The rings (p2p_ring.cpp). `spill` false (posting): an eager message no posted recv wants
  // stays in the ring, for a recv posted later to copy out once (recv_now) instead of a copy to
  // the heap first; waits, tests and poll() move every message.
  void progress(bool spill = true);
  void progress_out(int peer);
  void progress_in(int peer, bool spill);
  bool match(int peer, const Header& h, bool spill);
  // Whether `src` has written its ring to us (its head moved past `tail` once): until then its
  // pages may not exist, and no stamp there is read (reading one would allocate the page).
  bool ring_written(int src, std::uint64_t tail);
  void ring_doorbell(int rank);
  void copy_to_ring(int dst, std::uint64_t pos, const void* src, std::size_t bytes);
  void copy_from_ring(int src, std::uint64_t pos, void* dst, std::size_t bytes);
  // A header into our ring to `dst` at `pos` (a message start): every field, then the stamp.
  void put_header(int dst, std::uint64_t pos, const Header& h);
  // An eager message in one piece at our ring's head to `dst`, payload first, then its stamped
  // header, and the head moved past it; false (nothing written) when the ring lacks the room.
  bool put_whole(int dst, Header& h, const std::byte* payload);
  // A send written at once (eager, nothing queued before it to that peer, room in the ring),
  // with no Op to track: false when it must be queued as usual. Under mutex_.
  bool send_now(const P2POp& send);
  // A recv whose message is here already (kept, or in the ring when `look_in_ring`), copied out
  // at once with no Op to track (done); else whether it must be posted as usual with nothing
  // from its peer here yet (nothing_yet: the ring looked at and empty, nothing kept), or with
  // something a progress pass may act on (posted: a rendezvous, a size mismatch, a message
  // behind others). Under mutex_.
  enum class RecvNow { done, nothing_yet, posted };
  RecvNow recv_now(const P2POp& recv, bool look_in_ring);
  // The header at `pos` (a message start) of `src`'s ring to us; read after header_at() said it
  // is stamped.
  void read_header(int src, std::uint64_t pos, Header& h) const;
  // Whether the header at `pos` of `src`'s ring to us is stamped (written whole).
  bool header_at(int src, std::uint64_t pos) const;
  // Rendezvous (p2p_rendezvous.cpp) and its cooperative copy (p2p_cooperative.cpp).
  void read_rendezvous(const Header& h, const std::shared_ptr<Op>& op);
  std::exception_ptr cma_error(const Op& op, int err) const;
  bool coop_suits(const Op& op);
  // Whether `peer` can reach this rank's memory (CMA), as the peer's probe says; false while the
  // peer has not published it yet (mailbox_layout.h: PairReceiver::cma_ok).
  bool it_reads_me(Peer& peer);
  void start_coop(const Header& h, const std::shared_ptr<Op>& op);
  void copy_front(int peer);
  void poll_coop(int peer);
  void help_coop(int peer, const Header& cts, Op& send);
  // The segment's parts and finishing an op (inline, p2p_engine_state.h); a size mismatch
  // finishes a recv with its error (p2p_engine.cpp).
  PairControl& pair(int src, int dst) const;
  std::uint64_t& head(int src, int dst) const;
  std::uint64_t& tail(int src, int dst) const;
  std::byte* ring(int src, int dst) const;
  MailboxRank& rank_block(int rank) const;
  void finish(const std::shared_ptr<Op>& op, std::exception_ptr error = nullptr);
  bool size_matches(const Header& h, const std::shared_ptr<Op>& op);
  // A complete eager message kept in `peer.unexpected` copied into its recv `op` (or the size
  // mismatch reported), then dropped: a recv posted after its message, or a claimed one whose
  // last bytes just came.
  void deliver_kept(Peer& peer, std::list<Unexpected>::iterator it, const std::shared_ptr<Op>& op);
  // Naming and the group's hooks (p2p_engine.cpp).
  std::string describe(const Op& op) const;
  std::string where(const char* what) const;
  std::string who(int rank) const;
  void check_peer(int peer);
  void report_failure();

  Segment segment_;
  std::byte* base_;
  MailboxLayout layout_;
  int rank_;
  int size_;
  std::string group_;
  Duration default_timeout_;
  std::vector<int> global_ranks_;
  std::mutex hooks_mutex_;  // guards hooks_ (detach() clears them)
  Hooks hooks_;
  int cpus_;                      // the CPUs this rank may run on
  std::shared_ptr<GroupHealth> health_;  // the group's failure record: once failed, every later op fails
  std::size_t rendezvous_bytes_;  // kRendezvousBytes or more (the ring's size decides)
  std::mutex mutex_;
  std::vector<Peer> peers_;
  std::uint64_t next_id_ = 1;
  std::uint64_t posts_ = 0;  // start() calls so far: Peer::sent_in_post marks a batch's peers
  // Ops tracked and not finished, plus messages being read out of a ring: while 0, a post whose
  // ops were all done at once has nothing to move for anyone (start()).
  std::size_t busy_ = 0;
  std::uint64_t stamp_key_;  // the segment's (mailbox_layout.h)
  SpinThenYield waiter_;  // `cpus`: the CPUs this rank may run on
};

// For tests of the fallback path: groups made after set_single_copy_allowed(false) in this
// process behave as if process_vm_readv were forbidden (every message goes through the rings).
void set_single_copy_allowed(bool allowed);
// For tests of the cooperative copy's fallback: after set_single_copy_writes_fail(true) in this
// process, a helping sender's writes fail with EPERM (as where a seccomp filter lets reads
// through and not writes): it hands its chunks back to the receiver and stops helping that peer.
void set_single_copy_writes_fail(bool fail);

// What this process's engines did so far, for tests that must show which path ran: a test of
// the cooperative copy passes as well when every message goes through the rings (where ptrace
// rules or seccomp refuse process_vm_readv), and then tests nothing of it.
struct CopyCounts {
  std::uint64_t single_copy = 0;         // rendezvous messages received with one process_vm_readv
  std::uint64_t cooperative = 0;         // messages received by a cooperative copy
  std::uint64_t chunks_received = 0;     // chunks of them this rank copied as the receiver
  std::uint64_t chunks_sent = 0;         // chunks this rank wrote as a helping sender
  std::uint64_t chunks_handed_back = 0;  // chunks this rank's refused writes handed back
};
CopyCounts copy_counts();

// The set-up of a group's mailboxes (more than one rank), in the steps of the group's own set-up
// (shm_setup.cpp), which makes them under its rendezvous: rank 0 creates the mailbox segment
// beside the channel's before it publishes the channel's name (from which the others derive
// this one's), every rank records itself in both before the group's one "mapped" barrier, and
// both names go after it. Then finish() probes single-copy reads and publishes the answers.
class MailboxSetup {
 public:
  // Rank 0: creates and initialises segment `name`; the others: open it and check its header.
  static MailboxSetup create(const GroupSpec& spec, const std::string& name);
  static MailboxSetup open(const GroupSpec& spec, const std::string& name);
  // This rank's pid and probe word, for its peers (before the barrier); lets them read its memory.
  void record_self(int rank);
  void unlink() noexcept { seg_.unlink(); }
  // After the barrier: probes single-copy reads from every peer and records the answers where the
  // senders read them (no barrier: P2PEngine::it_reads_me); then the engine. `cpus`: the CPUs
  // this rank may run on (the wait policy spins only with a core per rank); `yield_for`: the
  // channel's (SpinThenYield, wait_policy.h).
  std::shared_ptr<P2PEngine> finish(const GroupSpec& spec, int cpus, std::chrono::microseconds yield_for,
                                    std::shared_ptr<GroupHealth> health, P2PEngine::Hooks hooks) &&;

 private:
  MailboxSetup(Segment seg, MailboxLayout layout) : seg_(std::move(seg)), layout_(layout) {}
  Segment seg_;
  MailboxLayout layout_;
};

}  // namespace fastrun::shm
