#pragma once
// Backend: the collectives DDP, the samplers' users and the object collectives need, each with
// an options struct, each returning a Work handle. The names are c10d's: a Backend
// (runtime/backend/<name>/: shm, gloo, nccl) runs the ops of one group, and what a user holds is
// the group over it (fastrun::Group, group.h: c10d's ProcessGroup), which adds the job's
// policies and is itself a Backend, so code written against Backend takes either. c10d's
// Work.hpp is the model; its very wide Backend interface is the thing to avoid. Sub-groups are
// made by the runtime through the same backend factory.
//
// Threading: one thread issues collectives on a group; a Work may be waited on from another.
// Ordering: every rank must issue the same collectives in the same order.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/op.h"
#include "fastrun/runtime/process_group/types.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun {

// A handle on one collective. wait() rethrows the operation's error (PeerFailure when a peer
// died, TimeoutError, BackendError). A zero timeout means the group's default op timeout.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait(Duration timeout = Duration::zero()) = 0;
  virtual bool completed() = 0;
  // Whether the op is complete as far as is known without making progress: true only when it
  // is; false may mean "not yet" or "not looked". completed() may do work to find out (shm's
  // point-to-point ops progress only in wait() and completed(): a pass over every peer's ring);
  // this never does. The Group asks it, right after issuing an op, whether the handle still needs
  // watching. Default: completed(), for handles whose completed() only reads a state.
  virtual bool known_complete() { return completed(); }
};
using WorkHandle = std::shared_ptr<Work>;

struct AllReduceOptions {
  ReduceOp op = ReduceOp::sum;
  // Every rank's input is multiplied by this before the reduction (floating dtypes, host
  // buffers; kernels::scale's rounding), as part of the op: on the comm thread when the op runs
  // there. DDP's sum of pre-divided gradients passes 1 / world size. 1 = none.
  double prescale = 1.0;
};
struct BroadcastOptions { int root = 0; };             // root: rank within the group
struct AllGatherOptions {};
struct ReduceScatterOptions { ReduceOp op = ReduceOp::sum; };
struct BarrierOptions {};
// Point-to-point (docs/collectives.md). `peer` is a rank within the group, never this rank; a
// recv matches the sends of that peer with the same tag (>= 0), in the order they were posted.
struct SendOptions { int tag = 0; };
struct RecvOptions { int tag = 0; };
// One operation of a batch_send_recv (torch's P2POp).
struct P2POp {
  enum class Kind { send, recv };
  Kind kind = Kind::send;
  BufferView buffer;
  int peer = 0;
  int tag = 0;
};
struct ReduceOptions { ReduceOp op = ReduceOp::sum; int root = 0; };
struct GatherOptions { int root = 0; };
struct ScatterOptions { int root = 0; };
struct AllToAllOptions {};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int rank() const = 0;             // rank within this group
  virtual int size() const = 0;
  virtual std::string backend_name() const = 0;

  // Each op has two forms. The virtual one takes the op as a value (op.h) first: what a Group
  // calls, with the op it numbered, and what a backend implements, running that op (its number,
  // label and timeout) through its group runtime. The other, without an Op, issues a bare op
  // (a backend used directly: the backend's runtime numbers it; one Op per form, made once, not
  // a name string per call); a class that implements the virtual form and is called in this
  // form through its own type adds `using Backend::x;`.

  // In place on `buffer` (every rank the same count and dtype).
  WorkHandle all_reduce(BufferView buffer, const AllReduceOptions& options = {}) {
    static const Op bare = Op::bare("all_reduce");
    return all_reduce(bare, buffer, options);
  }
  virtual WorkHandle all_reduce(const Op& op, BufferView buffer, const AllReduceOptions& options) = 0;
  // In place: the root's buffer is copied into every other rank's.
  WorkHandle broadcast(BufferView buffer, const BroadcastOptions& options = {}) {
    static const Op bare = Op::bare("broadcast");
    return broadcast(bare, buffer, options);
  }
  virtual WorkHandle broadcast(const Op& op, BufferView buffer, const BroadcastOptions& options) = 0;
  // output.count == input.count * size(); rank r's input lands at output[r * input.count].
  WorkHandle all_gather(BufferView input, BufferView output, const AllGatherOptions& options = {}) {
    static const Op bare = Op::bare("all_gather");
    return all_gather(bare, input, output, options);
  }
  virtual WorkHandle all_gather(const Op& op, BufferView input, BufferView output,
                                const AllGatherOptions& options) = 0;
  // input.count == output.count * size(); rank r receives the reduction of block r.
  WorkHandle reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options = {}) {
    static const Op bare = Op::bare("reduce_scatter");
    return reduce_scatter(bare, input, output, options);
  }
  virtual WorkHandle reduce_scatter(const Op& op, BufferView input, BufferView output,
                                    const ReduceScatterOptions& options) = 0;
  WorkHandle barrier(const BarrierOptions& options = {}) {
    static const Op bare = Op::bare("barrier");
    return barrier(bare, options);
  }
  virtual WorkHandle barrier(const Op& op, const BarrierOptions& options) = 0;

  // --- Point-to-point (MPI/c10d semantics). Both return at once; the Work completes when the
  // buffer may be reused (send) or holds the message (recv). A recv's buffer must have the
  // message's exact byte size. Posting several before waiting never deadlocks.
  WorkHandle send(BufferView buffer, int peer, const SendOptions& options = {}) {
    static const Op bare = Op::bare("send", true);
    return send(bare, buffer, peer, options);
  }
  virtual WorkHandle send(const Op& op, BufferView buffer, int peer, const SendOptions& options) = 0;
  WorkHandle recv(BufferView buffer, int peer, const RecvOptions& options = {}) {
    static const Op bare = Op::bare("recv", true);
    return recv(bare, buffer, peer, options);
  }
  virtual WorkHandle recv(const Op& op, BufferView buffer, int peer, const RecvOptions& options) = 0;
  // Posts every op of `ops` at once (any mix of peers, directions and tags: a ring exchange is
  // fine) and returns one Work that completes when all have. Every op is checked first.
  WorkHandle batch_send_recv(const std::vector<P2POp>& ops) {
    static const Op bare = Op::bare("batch_send_recv", true);
    return batch_send_recv(bare, ops);
  }
  virtual WorkHandle batch_send_recv(const Op& op, const std::vector<P2POp>& ops) = 0;

  // --- Rooted and all-to-all collectives (every rank issues them, in the same order).
  // In place: the root's buffer receives the reduction (in rank order, bit-identical on the CPU
  // backends); other ranks' buffers are left unchanged.
  WorkHandle reduce(BufferView buffer, const ReduceOptions& options = {}) {
    static const Op bare = Op::bare("reduce");
    return reduce(bare, buffer, options);
  }
  virtual WorkHandle reduce(const Op& op, BufferView buffer, const ReduceOptions& options) = 0;
  // At the root output.count == input.count * size() and rank r's input lands at
  // output[r * input.count]; elsewhere `output` is not touched (it may be empty).
  WorkHandle gather(BufferView input, BufferView output, const GatherOptions& options = {}) {
    static const Op bare = Op::bare("gather");
    return gather(bare, input, output, options);
  }
  virtual WorkHandle gather(const Op& op, BufferView input, BufferView output, const GatherOptions& options) = 0;
  // At the root input.count == output.count * size() and block r goes to rank r's output;
  // elsewhere `input` is not read (it may be empty).
  WorkHandle scatter(BufferView input, BufferView output, const ScatterOptions& options = {}) {
    static const Op bare = Op::bare("scatter");
    return scatter(bare, input, output, options);
  }
  virtual WorkHandle scatter(const Op& op, BufferView input, BufferView output, const ScatterOptions& options) = 0;
  // input.count == output.count, a multiple of size(): block r of the input goes to rank r,
  // block r of the output comes from rank r.
  WorkHandle all_to_all(BufferView input, BufferView output, const AllToAllOptions& options = {}) {
    static const Op bare = Op::bare("all_to_all");
    return all_to_all(bare, input, output, options);
  }
  virtual WorkHandle all_to_all(const Op& op, BufferView input, BufferView output,
                                const AllToAllOptions& options) = 0;
  // Per-rank counts: send_counts[r] elements (input blocks back to back, in rank order) go to
  // rank r; recv_counts[r] elements come from rank r. sum(send_counts) == input.count,
  // sum(recv_counts) == output.count, and rank r's send_counts[me] must equal my
  // recv_counts[r] (a mismatch fails the op on the ranks concerned).
  WorkHandle all_to_allv(BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options = {}) {
    static const Op bare = Op::bare("all_to_allv");
    return all_to_allv(bare, input, send_counts, output, recv_counts, options);
  }
  virtual WorkHandle all_to_allv(const Op& op, BufferView input, const std::vector<std::size_t>& send_counts,
                                 BufferView output, const std::vector<std::size_t>& recv_counts,
                                 const AllToAllOptions& options) = 0;
};

struct PeerInfo;  // runtime/process_group/peer_info.h

// What a backend needs to build a group. The store is already prefixed for this group and
// generation, so backend keys never collide with another group's.
struct GroupSpec {
  std::shared_ptr<Store> store;
  int rank = 0;                 // rank within the group
  int size = 1;
  std::vector<int> global_ranks;  // global rank of each group member, for error messages
  std::string name;             // "world", "group-3", ... (for messages and shm segment names)
  std::string run_id;           // the job's id (names shared segments)
  Duration timeout = std::chrono::seconds(300);     // set-up
  Duration op_timeout = std::chrono::seconds(600);  // default per-collective timeout
  // Global-store key the launcher or a failing rank sets ("rank N: why") when a peer fails;
  // every backend's wait watches it so no survivor hangs on a dead peer.
  std::shared_ptr<Store> failure_store;  // unprefixed; may be null in a world of one
  std::string gloo_host;  // the address gloo binds; "" = FASTRUN_GLOO_HOST (or its default)
  // Every world rank's PeerInfo as join() gathered it (global rank order), so that a group that
  // names dead peers need not read 2 keys per member from the store (N² requests for N groups'
  // worth of ranks). Null: read them from failure_store.
  std::shared_ptr<const std::vector<PeerInfo>> peers;
};

}  // namespace fastrun
