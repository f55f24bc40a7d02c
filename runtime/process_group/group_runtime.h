#pragma once
// The group runtime: the machinery every Backend shares, so that a backend is only
// its algorithms (the way Gloo separates transports from algorithms). docs/runtime.md, "Group
// runtime".
//
// What the layer provides (one per group):
//   - GroupHealth (group_health.h): the label "rank R in group 'G' (backend)", the first failure
//     and the one "unusable after a failure" rule (a BackendError with the same wording on every
//     backend, thrown when the op is issued), the job's failure record (first writer wins) read
//     through one FailureWatch, and the peers' liveness;
//   - op numbers: the op arrives as a value (op.h) with the number its Group gave it (one
//     authority, where the user calls), used in every message ("all_reduce #7") and by the
//     backend (gloo's tags, shm's op check); a bare op (a backend used without a Group) is
//     numbered here, on from the last;
//   - one way to run an op (run()): inline on the caller's thread for small ops, on the group's
//     CommThread for large ones (config.async_from_bytes), never reordering ops: an op issued
//     while earlier ones are still queued goes to the thread too; it returns a Work
//     (CompletedWork inline, AsyncWork on the thread) that carries the op's error;
//   - the caller's memory contract (async_work.h): an op on the thread of at most
//     config.stage_up_to_bytes (a backend whose ops cannot be cancelled: gloo's small ops) works
//     on op-owned copies of the caller's buffers, copied in and written back under the Work's
//     lock and never after a wait() gave up, so that wait returns at once; any other op works on
//     the caller's buffers, and a wait that gives up cancels it (Hooks::cancel) and waits up to
//     config.release_grace for the thread to leave them.
// What a backend provides: its algorithms as op bodies, and Hooks: how an error of its transport
// becomes fastrun's (translate), what to do when an op failed (op_failed) or a waiter gave up
// (cancel).
//
// Threading: one thread issues ops (backend.h); Works may be waited on from any thread.
// Destruction runs the ops still queued (they fail fast after a failure) and joins the thread,
// or leaves it (config.detach_on_failure) when the group failed and the thread may be blocked on
// a dead peer: op bodies of such a backend must then hold what they use by value or shared_ptr.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/comm_thread.h"
#include "fastrun/runtime/process_group/group_health.h"
#include "fastrun/runtime/process_group/in_flight.h"
#include "fastrun/runtime/process_group/op.h"

namespace fastrun {

struct RuntimeConfig {
  std::string backend;  // "shm", "gloo", "nccl": for the label
  // Ops of this many bytes or more run on the comm thread; 0: every op; kNever: none (no thread).
  static constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();
  std::size_t async_from_bytes = 0;
  // Ops on the thread of at most this many bytes work on op-owned copies (see above); 0: none.
  // Copies cost two passes over the buffers on the comm thread, so large ops of gloo rather
  // wait for the thread to let go (its op ends at its own gloo timeout at the latest).
  std::size_t stage_up_to_bytes = 0;
  bool watch_peers = false;        // read the peers' PeerInfo (GroupHealth::dead_peers)
  // AsyncWork::wait also polls the job's failure key (false when the transport's own waits do it
  // and name the peer better: shm's channel).
  bool wait_watches_failure_key = true;
  Duration wait_margin{};    // an AsyncWork's default timeout is op_timeout + wait_margin
  Duration release_grace{};  // see AsyncWork
  bool detach_on_failure = false;
  // A wait() on an op still queued and next to run runs it on the waiting thread (comm_thread.h):
  // for a backend whose op bodies may run on any thread and never need the caller's buffers
  // staged (shm).
  bool waiter_runs_queued_op = false;
};

// What an op body sees.
struct OpContext {
  std::uint64_t seq = 0;     // op #seq
  // "all_reduce": the Op's name, whose text lives as long as the process (op_name.h), so a
  // queued op carries it as it is.
  OpName name;
  Duration timeout{};        // the group's op timeout
  // The op's buffers, in the order given to run(): the caller's, or op-owned copies of them.
  std::vector<BufferView> buffers;
  const BufferView& buffer(std::size_t i) const { return buffers.at(i); }
  // "all_reduce #7", the op's label (op.h): formatted where a message needs it, not per op.
  std::string what() const { return op_label(name, seq); }
};

// A caller buffer an op uses, and how (what staging copies in and writes back).
struct OpBuffer {
  enum Access { read, write, read_write };
  BufferView view;
  Access access = read_write;
};

class GroupRuntime {
 public:
  using Body = std::function<void(const OpContext&)>;
  // An op body called where it is, never copied (run_small's inline path): a pointer to the
  // callable and a function that calls it.
  class BodyRef {
   public:
    template <class F>
      requires(!std::is_same_v<std::remove_cvref_t<F>, BodyRef>)
    BodyRef(F& f)  // NOLINT: implicit, like std::function's
        : callable_(const_cast<void*>(static_cast<const void*>(&f))),
          call_([](void* c, const OpContext& ctx) { (*static_cast<F*>(c))(ctx); }) {}
    void operator()(const OpContext& ctx) const { call_(callable_, ctx); }

   private:
    void* callable_;
    void (*call_)(void*, const OpContext&);
  };
  struct Hooks {
    // An exception thrown by an op body, as fastrun's error (default: fastrun errors as they
    // are, anything else a BackendError naming the op). Runs on the thread that ran the op.
    std::function<std::exception_ptr(GroupHealth&, const std::string& what, std::exception_ptr)> translate;
    std::function<void()> op_failed;  // after an op failed (shm: tell the peers at once)
    std::function<void()> cancel;     // a wait() gave up on an op in flight (shm: cancel its waits)
    // A wait on an op on the comm thread has lasted a while (AsyncWork's on_stall): an error
    // to fail the group and every op in flight with, or null (gloo: stalled_op_check.h).
    std::function<std::exception_ptr()> stalled;
  };

  // `health`: one made earlier for the transport's set-up (shm's channel watches its failure
  // key), or null to make one here.
  GroupRuntime(const GroupSpec& spec, RuntimeConfig config, Hooks hooks = {},
               std::shared_ptr<GroupHealth> health = nullptr);
  ~GroupRuntime();
  GroupRuntime(const GroupRuntime&) = delete;
  GroupRuntime& operator=(const GroupRuntime&) = delete;

  GroupHealth& health() const { return *health_; }
  const std::shared_ptr<GroupHealth>& shared_health() const { return health_; }
  const std::string& label() const { return health_->label(); }

  // The number of the collective issued last (issuing thread).
  std::uint64_t last_seq() const { return seq_; }

  // The group's one registry of ops in flight (in_flight.h): run() registers the ops it queues
  // on the comm thread; a backend registers what it posts (post()) and may poll them (nccl's
  // watchdog). Shared: a backend's state that outlives the runtime may hold it.
  const std::shared_ptr<InFlightOps>& in_flight() const;

  // Fails every op in flight (above) with `error`, for a transport that learns of a failure
  // outside any op (gloo's transport threads): for ops on the comm thread their waits return it
  // at once for staged ops, and as a wait that gave up for ops on the caller's buffers
  // (Hooks::cancel, then up to config.release_grace for the op to let go:
  // AsyncWork::fail_from_outside); a posted op fails its own way (InFlightOp). Safe to call from
  // any thread, also after the runtime is gone (then it does nothing).
  std::function<void(std::exception_ptr error)> in_flight_failer() const;

  // An op the transport runs its own way (shm's and gloo's point-to-point ops: the mailboxes,
  // gloo's unbound buffers; every nccl op, on the group's CUDA stream: they progress when their
  // Work is waited on or polled, or on the device, not on the comm thread):
  // refused once the group failed, with run()'s check and BackendError; numbered (point-to-point
  // apart) like any op; then `post(seq)` posts it as op #seq and returns its Work, which names
  // it "send #3" in its timeout message. No thread, no copy, and nothing formatted until a
  // message needs it: the small-message path costs what it did. A posted op that can be failed
  // from outside is registered by its backend in in_flight() (gloo's GlooP2PWork, nccl's
  // WorkRecord); shm's point-to-point engine keeps its own protocol state (p2p_engine.h).
  template <class Post>
  WorkHandle post(const Op& op, Post&& post) {
    health_->check_usable(op.name);
    return std::forward<Post>(post)(take_number(op));
  }

  // Runs op `op` of `bytes` bytes: refuses it once the group failed (BackendError), else runs
  // `body` inline or on the comm thread (see above). Errors of the body are in the Work.
  // `prelude` (may be empty) runs first, on an OpContext without buffers, before the op copies
  // in or works on the caller's buffers (gloo's fingerprint exchange before a large op): an op
  // that fails there, or whose wait gives up before it got past it (or while it waited behind
  // other ops), never touches them, so its wait returns at once (AsyncWork::enter_caller_memory).
  WorkHandle run(const Op& op, std::size_t bytes, std::vector<OpBuffer> buffers, Body body, Body prelude = {});
  WorkHandle run(const Op& op, std::size_t bytes, Body body) { return run(op, bytes, {}, std::move(body)); }
  // A bare op named `op` (numbered here).
  WorkHandle run(OpName op, std::size_t bytes, std::vector<OpBuffer> buffers, Body body) {
    return run(Op::bare(op), bytes, std::move(buffers), std::move(body));
  }
  WorkHandle run(OpName op, std::size_t bytes, Body body) { return run(Op::bare(op), bytes, {}, std::move(body)); }
  // run(op, bytes, body) for a body that may be any callable: where the op runs inline, it is
  // called in place instead of being wrapped in a std::function first (captures beyond two
  // pointers cost a heap allocation and a free per op, on every small op's path). Queued on the
  // comm thread, it is moved into one as by run().
  template <class F>
  WorkHandle run_small(const Op& op, std::size_t bytes, F&& body) {
    if (!runs_inline(bytes)) return run(op, bytes, {}, Body(std::forward<F>(body)));
    return run_inline(op, {}, nullptr, BodyRef(body));
  }
  // The same for a body that refers to the caller's locals: run in place when the op runs
  // inline (nothing moved into a capture); queued, `make_owning()` returns a body that owns what
  // it needs (moved out of those locals), as run() keeps it.
  template <class F, class MakeOwning>
  WorkHandle run_small(const Op& op, std::size_t bytes, F&& in_place, MakeOwning&& make_owning) {
    if (!runs_inline(bytes)) return run(op, bytes, {}, Body(make_owning()));
    return run_inline(op, {}, nullptr, BodyRef(in_place));
  }

 private:
  struct Shared;  // what a queued op needs: outlives the runtime when the thread is left behind
  std::uint64_t take_number(const Op& op);  // its number, or the next of its kind: now the last
  static void run_body(Shared& s, const OpContext& ctx, BodyRef body);
  // Whether an op of `bytes` bytes issued now runs on the caller's thread (see above).
  bool runs_inline(std::size_t bytes) const;
  // Runs the op on this thread: its context, `prelude` (if any), then `body` on `buffers`.
  WorkHandle run_inline(const Op& op, const std::vector<OpBuffer>& buffers, const Body* prelude, BodyRef body);
  OpContext context_of(const Op& op);  // its number (now the last), name and timeout
  static void fail_in_flight(Shared& s, const std::exception_ptr& error);

  std::shared_ptr<GroupHealth> health_;
  std::shared_ptr<Shared> shared_;
  std::uint64_t seq_ = 0;      // the last collective's number; issuing thread only
  std::uint64_t p2p_seq_ = 0;  // the last point-to-point op's
  std::string thread_name_;
  std::unique_ptr<CommThread> thread_;  // started on the first op that needs it
};

}  // namespace fastrun
