#pragma once
// The shm Backend: every rank of the group on one node, data moving through one
// shared segment per group (see docs/backend-shm.md for the design and the numbers). Only the
// algorithms live here; where an op runs, failures and the Work handles are the group runtime's
// (process_group/group_runtime.h).
//
// Where an op runs: one of kAsyncOpBytes or more (and any op issued while such an op is still
// queued or running, so that the issue order is kept) goes to the group's communication thread
// and returns an AsyncWork at once: the caller computes while it runs (DDP's buckets overlap the
// backward pass). A smaller op runs to completion on the calling thread and returns an
// already-completed Work, because the hand-off costs more than it does (figures at
// kAsyncOpBytes). Either way an error (PeerFailure, TimeoutError) is carried by the Work and
// rethrown by wait(); the channel's own waits (peer pidfds, the job's failure key, the op
// deadline) bound how long a queued op can block. After a failure the group is unusable: later
// ops throw BackendError naming the first error. Bad arguments (wrong counts, device memory, a
// root out of range) throw ConfigError at once. A wait() that gives up early (a timeout shorter
// than the op's) makes the group unusable too, and cancels the op in flight; the wait returns
// once the thread has left the caller's buffers (within a wait slice).
//
// Threading: one thread issues collectives on a group (backend.h); Works may be waited
// on from any thread. The caller's buffers must stay alive until wait() returns. Destruction
// runs the ops still queued (they fail fast once peers are gone) and joins the thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include <boost/container/small_vector.hpp>

#include "fastrun/runtime/backend/shm/channel/channel.h"
#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"
#include "fastrun/runtime/process_group/group_runtime.h"
#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::shm {

// Sizes of the data path, shared by set-up (segment size) and the algorithms: one pipeline
// chunk per step (layout.h). Measured with 16-256 MiB all-reduces (docs/benchmarks.md, "Figures
// behind the constants"): 2 ranks do best with 256 KiB regions; with more ranks than cores two
// ranks share each core's L2, and smaller regions win.
inline constexpr std::size_t kRegionBytes = 256 * 1024;
inline constexpr std::size_t kRingBytesPerRank = 2u << 20;  // > a core's L2, see layout.h
inline constexpr std::size_t kOversubscribedRegionBytes = 128 * 1024;
inline constexpr std::size_t kOversubscribedRingBytesPerRank = 512 * 1024;
inline constexpr std::size_t kMaxSegmentBytes = 256u << 20;   // the ring shrinks for many ranks
inline constexpr std::size_t kSmallAllReduceBytes = 64 * 1024;  // one-step all-reduce up to here
// A broadcast from here on moves by point-to-point messages, which each receiver copies straight
// out of the root's buffer (p2p_engine.h: single copy, the root helping), instead of through
// the channel's regions (the root copies in, every receiver copies out, a step per region).
// Measured 2026-12-05 (`fastrun --nproc 2|4 fastrun-bench broadcast --backend shm`, 2 runs
// each way): 2 ranks, 128 KiB level (16.8-25.2 against 15.5-15.9 us), from 256 KiB 2.2-5.5x
// faster (1 MiB 372-377 -> 88-169 us, 16 MiB 6.1-6.2 -> 1.1 ms); 4 ranks on 2 cores, 128 KiB
// 1.6x slower, from 256 KiB 1.8-2.7x faster; below 128 KiB the regions win on both.
inline constexpr std::size_t kSingleCopyBroadcastBytes = 256 * 1024;
// The tag of every message of a collective built on point-to-point. User tags are >= 0, and
// collectives are issued in the same order on every rank, so FIFO matching pairs them up.
inline constexpr int kCollectiveTag = -1;
inline P2POp send_op(const BufferView& b, int peer) { return P2POp{P2POp::Kind::send, b, peer, kCollectiveTag}; }
inline P2POp recv_op(const BufferView& b, int peer) { return P2POp{P2POp::Kind::recv, b, peer, kCollectiveTag}; }
// The large all-reduce's pipeline chunk with a core per rank (each chunk still gets a region of
// its own, so the ring's reuse distance stays past a core's L2): smaller steps let the ranks
// overlap better, and 64 KiB beat whole 256 KiB regions at each size measured (1-64 MiB)
// (docs/benchmarks.md, "Figures behind the constants"). With more ranks than cores a step costs
// context switches, so there the chunk stays a whole region.
inline constexpr std::size_t kAllReduceChunkBytes = 64 * 1024;
// Ops of this many bytes or more run on the communication thread: from here on the hand-off (post,
// run, complete, the waiter wakes) costs around a tenth of the op or less (docs/benchmarks.md,
// "Figures behind the constants").
inline constexpr std::size_t kAsyncOpBytes = 256 * 1024;

// The segment layout rank 0 chooses for a group of `nranks` on a machine with `cpus` usable
// CPUs (the others read it from the segment header).
Layout shm_layout(int nranks, int cpus);

class ShmBackend final : public Backend {
 public:
  // `channel` is null for a group of one (everything is local then). `health`: the one the
  // channel watches (null: made here).
  ShmBackend(const GroupSpec& spec, std::unique_ptr<Channel> channel, std::shared_ptr<GroupHealth> health = nullptr);
  ~ShmBackend() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "shm"; }
  // How many CPUs the ranks may run on between them (the union of their affinities; 1 for a
  // group of one): fewer than the ranks means they share cores, and waits yield instead of spin.
  int cpus() const { return chan_ ? chan_->cpus() : 1; }

  WorkHandle all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) override;
  WorkHandle broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) override;
  // In place too: `input` may be this rank's own block of `output` (left where it is).
  WorkHandle all_gather(const Op& call, BufferView input, BufferView output, const AllGatherOptions& options) override;
  WorkHandle reduce_scatter(const Op& call, BufferView input, BufferView output, const ReduceScatterOptions& options) override;
  WorkHandle barrier(const Op& call, const BarrierOptions& options) override;

  // Point-to-point, rooted and all-to-all ops (shm_p2p_ops.cpp). send/recv go through the
  // mailboxes (p2p_engine.h) and progress when their Works are waited on or polled; gather,
  // scatter and the all-to-alls are point-to-point batches run like any other op (in issue
  // order, inline or on the comm thread); reduce runs on the channel.
  WorkHandle send(const Op& call, BufferView buffer, int peer, const SendOptions& options) override;
  WorkHandle recv(const Op& call, BufferView buffer, int peer, const RecvOptions& options) override;
  WorkHandle batch_send_recv(const Op& call, const std::vector<P2POp>& ops) override;
  WorkHandle reduce(const Op& call, BufferView buffer, const ReduceOptions& options) override;
  WorkHandle gather(const Op& call, BufferView input, BufferView output, const GatherOptions& options) override;
  WorkHandle scatter(const Op& call, BufferView input, BufferView output, const ScatterOptions& options) override;
  WorkHandle all_to_all(const Op& call, BufferView input, BufferView output, const AllToAllOptions& options) override;
  WorkHandle all_to_allv(const Op& call, BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options) override;

  // Starts the mailboxes (collective: every rank of a group of 2+ calls it once, at the end of
  // the set-up that mapped them).
  void start_p2p(const GroupSpec& spec, MailboxSetup mailboxes);

 private:
  // Runs `body` (a callable that captures its arguments by value) through the group runtime;
  // `op` describes it for the peers' check (op_fingerprint.h; its number is set when it runs).
  // `call` is the op as it came (op.h): the runtime runs it under its number and timeout. Inline,
  // the body is called where it is (GroupRuntime::run_small): no allocation per op.
  // `body` is moved once, into the op's own (which the runtime calls in place, or moves into
  // the comm thread's queue).
  template <class Body>
  WorkHandle run(const Op& call, const OpDesc& op, std::size_t bytes, Body&& body) {
    auto op_body = [this, f = fingerprint(op), body = std::forward<Body>(body)](const OpContext& ctx) mutable {
      begin_op(ctx, f);
      body();
    };
    return runtime_->run_small(call, bytes, std::move(op_body));
  }
  // A collective's start on the channel (before any of its waits): its label for the channel's
  // messages, its fingerprint (numbered ctx.seq) for the peers and the stalled-op check.
  void begin_op(const OpContext& ctx, Fingerprint& f);
  // The fingerprint, numbered ctx.seq, into the stalled-op check alone: all that an op made of
  // point-to-point messages (p2p_body) leaves, since it never meets its peers on the steps.
  void record_op(const OpContext& ctx, Fingerprint& f);
  // Host memory, with data where it has elements; else a ConfigError naming the op. Inline, the
  // message out of line: every op's fixed cost.
  void check_host(const char* op, const BufferView& b) const {
    if (b.device != DeviceKind::cpu || (b.count > 0 && !b.data)) refuse_buffer(op, b);
  }
  [[noreturn]] void refuse_buffer(const char* op, const BufferView& b) const;

  void all_reduce_small(const BufferView& b, ReduceOp op);
  void all_reduce_large(const BufferView& b, ReduceOp op);
  void broadcast_chunks(const BufferView& b, int root);
  // kSingleCopyBroadcastBytes and more: one channel step where every rank compares every op,
  // then the root's buffer by point-to-point messages.
  void broadcast_single_copy(const BufferView& b, int root);
  void all_gather_chunks(const BufferView& in, const BufferView& out);
  void reduce_scatter_chunks(const BufferView& in, const BufferView& out, ReduceOp op);
  void reduce_chunks(const BufferView& b, ReduceOp op, int root);
  WorkHandle post_p2p(const char* op, const Op& call, std::span<const P2POp> ops);
  // A collective made of point-to-point messages: inline, the usual two to four of them stay on
  // the stack.
  using P2POps = boost::container::small_vector<P2POp, 4>;
  // This rank's own block of such a collective (from its input to its output).
  using LocalCopy = shm::LocalCopy;
  static LocalCopy local_copy(const BufferView& dst, const BufferView& src);
  // Runs a collective made of point-to-point messages (plus this rank's own local copy); `op`
  // describes it as the Group does (op_record.h), for the stalled-op check. `what` names it in
  // the engine's messages: a static string ("gather"), which the engine may keep. `after`: recvs
  // from the peers `ops` send to, posted once the local copy is done (P2PEngine::run).
  WorkHandle run_p2p(const char* what, const Op& call, const OpDesc& op, P2POps&& ops, LocalCopy local,
                     P2POps&& after = {});
  // run_p2p's op body, wherever it runs.
  void p2p_body(const OpContext& ctx, const char* what, Fingerprint f, const P2POps& ops, const LocalCopy& local,
                const P2POps& after);

  int rank_;
  int size_;
  std::string name_;
  std::unique_ptr<Channel> chan_;
  std::shared_ptr<P2PEngine> p2p_;  // null for a group of one
  // Every op's fingerprint, compared through the store when a wait stalls: the channel compares
  // ops only where they meet on its steps, and an op made of messages never does
  // (stalled_op_check.h). Null for a group of one or without a store.
  std::shared_ptr<StalledOpCheck> op_check_;
  // The op the channel is running (its messages point at this), set by whichever thread drives it.
  std::string current_op_;
  std::unique_ptr<GroupRuntime> runtime_;  // declared last: its thread is joined before the channel goes away
};

// The backend factory (registered as "shm"): builds the segment through spec.store.
std::unique_ptr<Backend> make_shm_backend(const GroupSpec& spec);
// The same for a group whose waits span a network round trip (the hier backend's node groups):
// its waits (the channel's and the point-to-point engine's, which carries its rooted ops) poll
// with sched_yield for up to `yield_for` before they sleep, whatever CPU the peer is on
// (SpinThenYield, wait_policy.h).
std::unique_ptr<Backend> make_shm_backend_yielding(const GroupSpec& spec, std::chrono::microseconds yield_for);

}  // namespace fastrun::shm
