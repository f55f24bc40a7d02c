#include "fastrun/runtime/backend/gloo/gloo_backend.h"
#include "fastrun/runtime/backend/gloo/gloo_host.h"
#include "fastrun/runtime/process_group/shape_check.h"

#include <signal.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstring>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "fastrun/runtime/backend/gloo/fingerprint_prelude.h"
#include "fastrun/runtime/backend/gloo/gloo_module.h"
#include "fastrun/runtime/backend/gloo/kept_until_exit.h"
#include "fastrun/runtime/backend/gloo/p2p_work.h"
#include "fastrun/runtime/backend/gloo/rooted_ops.h"
#include "fastrun/runtime/backend/gloo/store_adapter.h"
#include "fastrun/runtime/backend/gloo/transport_failure.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/group_runtime.h"
#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/process_group/op_timeout.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"
#include "fastrun/runtime/process_group/stalled_op_check.h"

namespace fastrun::gloo_backend {
namespace {

void check_cpu(const BufferView& b, const char* op) {
  if (b.device != DeviceKind::cpu)
    throw ConfigError(fmt::format("{}: the gloo backend takes host memory only, got a CUDA buffer "
                                  "(use the nccl backend for GPU buffers: FASTRUN_BACKEND=nccl or auto)",
                                  op));
  if (b.count > 0 && b.data == nullptr) throw ConfigError(fmt::format("{}: buffer of {} elements at nullptr", op, b.count));
}

// What a Gloo transport thread's failure reaches (transport_failure.h): it may come after the
// group is gone, so the listener holds this weakly.
struct TransportState {
  std::shared_ptr<GroupHealth> health;
  std::shared_ptr<::gloo::Context> context;
  // GroupRuntime::in_flight_failer: the comm thread's ops and the point-to-point Works alike.
  std::function<void(std::exception_ptr)> fail_in_flight;
  std::set<pid_t> threads;  // this group's Gloo transport threads
  // A transport thread failed: set before the ops in flight are failed, read by the Works.
  std::shared_ptr<TransportFailed> failed = std::make_shared<TransportFailed>();
};

void on_transport_failure(TransportState& s, const std::string& what);

class GlooBackend final : public Backend {
 public:
  explicit GlooBackend(const GroupSpec& spec);
  ~GlooBackend() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "gloo"; }

  WorkHandle all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) override;
  WorkHandle broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) override;
  WorkHandle all_gather(const Op& call, BufferView input, BufferView output, const AllGatherOptions& options) override;
  WorkHandle reduce_scatter(const Op& call, BufferView input, BufferView output, const ReduceScatterOptions& options) override;
  WorkHandle barrier(const Op& call, const BarrierOptions& options) override;

  WorkHandle send(const Op& call, BufferView buffer, int peer, const SendOptions& options) override;
  WorkHandle recv(const Op& call, BufferView buffer, int peer, const RecvOptions& options) override;
  WorkHandle batch_send_recv(const Op& call, const std::vector<P2POp>& ops) override;
  WorkHandle reduce(const Op& call, BufferView buffer, const ReduceOptions& options) override;
  WorkHandle gather(const Op& call, BufferView input, BufferView output, const GatherOptions& options) override;
  WorkHandle scatter(const Op& call, BufferView input, BufferView output, const ScatterOptions& options) override;
  WorkHandle all_to_all(const Op& call, BufferView input, BufferView output, const AllToAllOptions& options) override;
  WorkHandle all_to_allv(const Op& call, BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options) override;

 private:
  // Runs an op through the group runtime and records it for the stalled-op check.
  // `call` is the op as it came (op.h): the runtime runs it under its number and timeout.
  WorkHandle run(const Op& call, OpDesc op, std::size_t bytes, std::vector<OpBuffer> buffers, GroupRuntime::Body body);
  // An op of 0 elements that moves nothing here (Gloo's own algorithms, which carry no lengths):
  // numbered and recorded all the same, without a thread. A peer whose count is not 0 waits in
  // this op; the stalled-op check compares the ops it was told of, and once named this one.
  WorkHandle nothing_to_move(const Op& call, OpDesc op);
  // Posts point-to-point ops (checked) as unbound buffers; one Work waits for them all.
  WorkHandle post_p2p(const char* op, const Op& call, const std::vector<P2POp>& ops);

  int rank_;
  int size_;
  std::string name_;  // the group's name, for the shared argument checks' messages
  P2PNames p2p_names_;  // for point-to-point messages' errors
  // Held by every queued op (the comm thread may outlive the group on a dead peer).
  std::shared_ptr<::gloo::Context> context_;
  // Ranks that issued different ops wait on different Gloo slots until the op timeout: a
  // stalled wait compares the ranks' last ops (stalled_op_check.h). Null for a group of one.
  std::shared_ptr<StalledOpCheck> op_check_;
  std::unique_ptr<GroupRuntime> runtime_;
  std::shared_ptr<TransportState> transport_;
  int listener_ = 0;
};

std::exception_ptr translate(GroupHealth& health, const std::string& what, std::exception_ptr error);

// The stalled-op check (stalled_op_check.h) runs when a wait stalls, and first of all when an op
// failed in Gloo: a peer that found the ranks out of step leaves, and its closed connection
// would otherwise read here as "rank N died" while its message names both ops.
GroupRuntime::Hooks gloo_hooks(std::shared_ptr<StalledOpCheck> check) {
  GroupRuntime::Hooks h;
  h.translate = &translate;
  if (!check) return h;
  h.stalled = stalled_op_hook(check);
  h.translate = [check](GroupHealth& health, const std::string& what, std::exception_ptr thrown) {
    try {
      std::rethrow_exception(thrown);
    } catch (const ::gloo::IoException&) {
      if (auto text = check->check()) return std::make_exception_ptr(ConfigError(*text));
    } catch (...) {
    }
    return translate(health, what, thrown);
  };
  return h;
}

// Ops up to here run on op-owned copies (below): up to this size the copy in and out is a small
// part of a gloo all-reduce (docs/benchmarks.md, "Figures behind the constants").
constexpr std::size_t kStagedOpBytes = 2 * 1024 * 1024;

RuntimeConfig gloo_runtime_config(Duration op_timeout) {
  RuntimeConfig c;
  c.backend = "gloo";
  c.async_from_bytes = 0;      // every op on the comm thread (gloo's calls block)
  // A gloo op cannot be cancelled. Up to kStagedOpBytes (small ops, where a copy is cheap
  // next to the op) it works on op-owned copies, so a wait that gives up returns at once; a larger op
  // works on the caller's buffers (no extra passes over them) and a wait that gives up returns
  // when the op ends: at once when a peer died (its sockets close), at gloo's own timeout (the
  // op timeout) otherwise; when this rank's transport thread failed (ranks disagree) the op
  // never ends, and the wait returns after release_grace, by when the op's thread has hit
  // Gloo's timeout and is stuck inside Gloo for good (transport_failure.h says why it cannot be sooner).
  c.stage_up_to_bytes = kStagedOpBytes;
  c.release_grace = op_timeout + std::chrono::seconds(1);
  c.watch_peers = true;        // to name the rank behind a closed connection
  c.detach_on_failure = true;  // a thread blocked on a dead peer is left behind
  return c;
}

// Gloo's tcp pairs write with writev, which raises SIGPIPE when the peer has gone: that would
// kill a survivor instead of letting it report the dead rank. Ignore SIGPIPE once, unless the
// program installed its own handler.
void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
  });
}

GlooBackend::GlooBackend(const GroupSpec& spec)
    : rank_(spec.rank),
      size_(spec.size),
      name_(spec.name),
      p2p_names_{spec.name, spec.rank, spec.global_ranks},
      op_check_(spec.size > 1 && spec.store ? std::make_shared<StalledOpCheck>(*spec.store, spec.rank, spec.size,
                                                                               spec.global_ranks, spec.name)
                                            : nullptr),
      runtime_(std::make_unique<GroupRuntime>(spec, gloo_runtime_config(spec.op_timeout), gloo_hooks(op_check_))),
      transport_(std::make_shared<TransportState>()) {
  const auto start = std::chrono::steady_clock::now();
  const std::string& label = runtime_->label();

  if (spec.size > 1) {
    ignore_sigpipe_once();
    // Numbered steps: 1. device on the configured host; 2. context with the set-up timeout;
    // 3. full mesh through the prefixed store; 4. a barrier: every mesh connected (below);
    // 5. per-op timeouts are set on each op.
    ::gloo::transport::tcp::attr attr;
    // ConfigError before gloo sees a bad one.
    attr.hostname = resolve_group_gloo_host(spec.gloo_host);
    std::shared_ptr<::gloo::transport::Device> device;
    const std::set<pid_t> threads_before = current_threads();
    try {
      device = ::gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw BackendError(fmt::format("{}: cannot create a tcp device on '{}' (FASTRUN_GLOO_HOST): {}", label,
                                     attr.hostname, e.what()));
    }
    auto context = std::make_shared<::gloo::rendezvous::Context>(spec.rank, spec.size);
    context->setTimeout(spec.timeout);
    StoreAdapter adapter(spec.store, spec.timeout);
    try {
      context->connectFullMesh(adapter, device);
    } catch (const TimeoutError& e) {
      throw TimeoutError(fmt::format("{}: connecting the full mesh timed out: {}", label, e.what()));
    } catch (const fastrun::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw BackendError(fmt::format("{}: connecting the full mesh failed: {}", label, e.what()));
    }
    // A rank may leave right after set-up (join() can end a program); closing its sockets while
    // a slower peer is still connecting to it fails that peer's set-up. So nobody returns until
    // every rank's mesh is connected; after that a closed socket matters only to an op.
    store_barrier(*spec.store, "gloo/connected", spec.rank, spec.size, spec.timeout);
    transport_->threads = adopt_transport_threads(threads_before);
    context_ = context;
    transport_->health = runtime_->shared_health();
    transport_->context = context;
    transport_->fail_in_flight = runtime_->in_flight_failer();
    std::weak_ptr<TransportState> weak = transport_;
    listener_ = listen_for_transport_failure([weak](const std::string& what) {
      if (auto locked = weak.lock()) on_transport_failure(*locked, what);
    });
  }
  log::debug("{}: ready, {} ranks, {:.1f} ms", label, spec.size,
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

GlooBackend::~GlooBackend() {
  if (listener_) stop_listening(listener_);
}

// Turns what a Gloo op threw into fastrun's exception (the group runtime records it as the
// group's failure). Root cause first: a failure already recorded (by the launcher, or by the
// survivor that saw the death first and then exited, closing *its* sockets too) names the right
// rank; else a dead local peer; else a timeout; else a broken connection.
std::exception_ptr translate(GroupHealth& h, const std::string& what, std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const ::gloo::IoException& e) {
    const std::string text = e.what();
    const bool timed_out = text.find("imed out") != std::string::npos || text.find("imeout") != std::string::npos;
    const auto recorded_failure = [&]() -> std::exception_ptr {
      if (auto failure = h.recorded_failure(/*force=*/true))
        return std::make_exception_ptr(PeerFailure(
            fmt::format("{}: {} failed because a peer failed: {} (gloo: {})", h.label(), what, *failure, text)));
      return nullptr;
    };
    if (auto error = recorded_failure()) return error;
    if (std::vector<int> dead = h.dead_peers(timed_out ? Duration() : Duration(std::chrono::seconds(1)));
        !dead.empty()) {
      // Read the record again: a survivor that saw the death first recorded it before it exited,
      // possibly while we waited for the dead to show, and it names the root cause where `dead`
      // would also list that survivor.
      if (auto error = recorded_failure()) return error;
      h.publish_as(fmt::format("rank {}: process gone (connection closed during {})", dead.front(), what));
      return std::make_exception_ptr(PeerFailure(fmt::format(
          "{}: {} failed: rank {} died (its connection closed; gloo: {})", h.label(), what, fmt::join(dead, ", "), text)));
    }
    if (timed_out)
      return std::make_exception_ptr(
          TimeoutError(op_timeout_message({h.label(), what, h.op_timeout(), {}, fmt::format("gloo: {}", text)})));
    h.publish(fmt::format("{} failed: {}", what, text));
    return std::make_exception_ptr(
        PeerFailure(fmt::format("{}: {} failed: a peer connection broke (gloo: {})", h.label(), what, text)));
  } catch (const fastrun::Error&) {
    return std::current_exception();
  } catch (const std::exception& e) {
    return std::make_exception_ptr(BackendError(fmt::format("{}: {} failed: {}", h.label(), what, e.what())));
  }
}

// While the bytes it moves (the buffer from each of the n - 1 peers) stay under this, an
// all-reduce is one all-gather of the whole buffers and a local reduction: fewer exchanges than
// the block path, each of which costs a scheduling round trip on a busy host. Measured on the
// 2-core machine (3 ranks): the block path was twice slower than Gloo's ring at 256 KiB-1 MiB
// and this one level; at 4 MiB (8 MiB moved) this one is twice slower.
constexpr std::size_t kGatherAllReduceTraffic = 2 * 1024 * 1024;

// Receive space for the current op. Each group's ops run on its one comm thread, so a buffer
// per thread is never shared, and a training loop does not fault in fresh pages on every call;
// it keeps the largest size used (about one buffer's bytes, or n of them up to the 2 MiB above).
std::uint8_t* scratch(std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

// Element counts of the n blocks a buffer of `count` splits into (the first count % n one longer).
std::vector<std::size_t> split(std::size_t count, std::size_t n) {
  std::vector<std::size_t> blocks(n, count / n);
  for (std::size_t p = 0; p < count % n; ++p) ++blocks[p];
  return blocks;
}

// Every rank sends block p of `input` (blocks laid out back to back) to rank p, then reduces the
// n copies of its own block it received, with the shared kernel in rank order, into `output`.
// Gloo's ring allreduce would sum each segment starting at a different rank and round 16-bit
// floats after every pair, so its bits would differ from shm's; this gives shm's bits
// (reduce_kernels.h).
void reduce_blocks(const std::shared_ptr<::gloo::Context>& ctx, const void* input, const std::vector<std::size_t>& blocks,
                   void* output, DType dtype, ReduceOp op, std::uint32_t tag, Duration timeout) {
  const std::size_t n = blocks.size(), esize = dtype_size(dtype);
  const std::size_t mine = blocks[static_cast<std::size_t>(ctx->rank)];
  std::uint8_t* received = scratch(n * mine * esize);
  std::vector<std::int64_t> send_bytes(n), recv_bytes(n, static_cast<std::int64_t>(mine * esize));
  for (std::size_t p = 0; p < n; ++p) send_bytes[p] = static_cast<std::int64_t>(blocks[p] * esize);
  auto o = std::make_unique<::gloo::AlltoallvOptions>(ctx);
  // Gloo only reads the input; its API takes a non-const pointer.
  o->setInput<std::uint8_t>(static_cast<std::uint8_t*>(const_cast<void*>(input)), send_bytes);
  o->setOutput<std::uint8_t>(received, recv_bytes);
  o->setTag(tag);
  o->setTimeout(timeout);
  run_collective(std::move(o), &::gloo::alltoallv);
  std::vector<const void*> srcs(n);
  for (std::size_t p = 0; p < n; ++p) srcs[p] = received + p * mine * esize;
  kernels::reduce(dtype, op, output, nullptr, srcs.data(), ctx->size, mine);
}

void allreduce_by_gather(const std::shared_ptr<::gloo::Context>& ctx, BufferView b, ReduceOp op, std::uint32_t tag,
                         Duration timeout) {
  const auto n = static_cast<std::size_t>(ctx->size);
  std::uint8_t* gathered = scratch(n * b.bytes());
  auto o = std::make_unique<::gloo::AllgatherOptions>(ctx);
  o->setInput<std::uint8_t>(static_cast<std::uint8_t*>(b.data), b.bytes());
  o->setOutput<std::uint8_t>(gathered, n * b.bytes());
  o->setTag(tag);
  o->setTimeout(timeout);
  run_collective(std::move(o), &::gloo::allgather);
  std::vector<const void*> srcs(n);
  for (std::size_t p = 0; p < n; ++p) srcs[p] = gathered + p * b.bytes();
  kernels::reduce(b.dtype, op, b.data, nullptr, srcs.data(), ctx->size, b.count);
}

// Larger all-reduces: reduce_blocks into this rank's block of the buffer, then an in-place
// all-gather of the blocks (the traffic of a ring all-reduce).
void run_allreduce(const std::shared_ptr<::gloo::Context>& ctx, BufferView b, ReduceOp op, std::uint32_t tag,
                   Duration timeout) {
  const auto n = static_cast<std::size_t>(ctx->size);
  if (b.bytes() * (n - 1) <= kGatherAllReduceTraffic) return allreduce_by_gather(ctx, b, op, tag, timeout);
  const std::size_t esize = dtype_size(b.dtype);
  const std::vector<std::size_t> blocks = split(b.count, n);
  std::size_t own = 0;
  for (int p = 0; p < ctx->rank; ++p) own += blocks[static_cast<std::size_t>(p)];
  auto* data = static_cast<std::uint8_t*>(b.data);
  reduce_blocks(ctx, data, blocks, data + own * esize, b.dtype, op, tag, timeout);
  std::vector<std::size_t> block_bytes(n);
  for (std::size_t p = 0; p < n; ++p) block_bytes[p] = blocks[p] * esize;
  auto g = std::make_unique<::gloo::AllgathervOptions>(ctx);
  g->setOutput<std::uint8_t>(data, block_bytes);
  g->setTag(tag);
  g->setTimeout(timeout);
  run_collective(std::move(g), &::gloo::allgatherv);
}

// Each op's body runs on the comm thread on op-owned copies of the caller's buffers
// (ctx.buffer(i), in the order given to run(); group_runtime.h), numbered by their Group
// (op.h; equal on every rank): the op number is gloo's tag.
std::uint32_t tag_of(const OpContext& op) { return static_cast<std::uint32_t>(op.seq); }

WorkHandle GlooBackend::all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) {
  check_cpu(buffer, "all_reduce");
  check_prescale("all_reduce", buffer, options.prescale);
  if (size_ == 1) {  // avg over one rank is the value
    apply_prescale(buffer, options.prescale);
    return completed_work();
  }
  if (buffer.count == 0) return nothing_to_move(call, op_desc("all_reduce", buffer).with_reduce(options.op));
  return run(call, op_desc("all_reduce", buffer).with_reduce(options.op), buffer.bytes(), {{buffer, OpBuffer::read_write}},
                       [ctx = context_, op = options.op, prescale = options.prescale](const OpContext& o) {
                         apply_prescale(o.buffer(0), prescale);  // part of the op, on the comm thread
                         run_allreduce(ctx, o.buffer(0), op, tag_of(o), o.timeout);
                       });
}

WorkHandle GlooBackend::broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) {
  check_cpu(buffer, "broadcast");
  if (!root_ok(options.root, size_)) check_root(op_where("broadcast", name_), options.root, size_);
  if (size_ == 1) return completed_work();
  // Even of 0 elements: its messages carry their length, so a peer that expects more learns it.
  const auto access = options.root == rank_ ? OpBuffer::read : OpBuffer::write;
  return run(call, op_desc("broadcast", buffer).with_root(options.root), buffer.bytes(), {{buffer, access}},
                       [ctx = context_, root = options.root, names = p2p_names_.global_ranks](const OpContext& op) {
                         run_broadcast(ctx, op.buffer(0), root, tag_of(op), op.timeout, names);
                       });
}

WorkHandle GlooBackend::all_gather(const Op& call, BufferView input, BufferView output, const AllGatherOptions&) {
  check_cpu(input, "all_gather");
  check_cpu(output, "all_gather");
  check_all_gather_shapes("all_gather", input, output, size_);
  if (size_ == 1) {
    if (input.count && output.data != input.data) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  if (input.count == 0) return nothing_to_move(call, op_desc("all_gather", input));
  // In place when the input already sits at this rank's slot of the output: then only the
  // output is staged (and the staged input is its own slot).
  const bool in_place =
      input.data == static_cast<std::uint8_t*>(output.data) + input.bytes() * static_cast<std::size_t>(rank_);
  std::vector<OpBuffer> buffers{{output, in_place ? OpBuffer::read_write : OpBuffer::write}};
  if (!in_place) buffers.push_back({input, OpBuffer::read});
  return run(call, op_desc("all_gather", input), output.bytes(), std::move(buffers),
             [ctx = context_, in_place](const OpContext& op) {
               const BufferView& out = op.buffer(0);
               auto o = std::make_unique<::gloo::AllgatherOptions>(ctx);
               if (!in_place) {
                 const BufferView& in = op.buffer(1);
                 o->setInput<std::uint8_t>(static_cast<std::uint8_t*>(in.data), in.bytes());
               }
               o->setOutput<std::uint8_t>(static_cast<std::uint8_t*>(out.data), out.bytes());
               o->setTag(tag_of(op));
               o->setTimeout(op.timeout);
               run_collective(std::move(o), &::gloo::allgather);
             });
}

WorkHandle GlooBackend::reduce_scatter(const Op& call, BufferView input, BufferView output, const ReduceScatterOptions& options) {
  check_cpu(input, "reduce_scatter");
  check_cpu(output, "reduce_scatter");
  check_reduce_scatter_shapes("reduce_scatter", input, output, size_);
  const std::size_t block = output.bytes();
  if (size_ == 1) {
    if (block && output.data != input.data) std::memmove(output.data, input.data, block);
    return completed_work();
  }
  if (output.count == 0) return nothing_to_move(call, op_desc("reduce_scatter", input).with_reduce(options.op));
  return run(call, op_desc("reduce_scatter", input).with_reduce(options.op), input.bytes(),
             {{input, OpBuffer::read}, {output, OpBuffer::write}},
             [ctx = context_, op = options.op](const OpContext& o) {
               const BufferView &in = o.buffer(0), &out = o.buffer(1);
               reduce_blocks(ctx, in.data, std::vector<std::size_t>(ctx->size, out.count), out.data, in.dtype, op,
                             tag_of(o), o.timeout);
             });
}

WorkHandle GlooBackend::barrier(const Op& call, const BarrierOptions&) {
  if (size_ == 1) return completed_work();
  return run(call, op_desc("barrier"), 0, {}, [ctx = context_](const OpContext& op) {
    auto o = std::make_unique<::gloo::BarrierOptions>(ctx);
    o->setTag(tag_of(op));
    o->setTimeout(op.timeout);
    run_collective(std::move(o), &::gloo::barrier);
  });
}

WorkHandle GlooBackend::run(const Op& call, OpDesc op, std::size_t bytes, std::vector<OpBuffer> buffers,
                          GroupRuntime::Body body) {
  // An op on the caller's buffers first compares the ranks' ops (fingerprint_prelude.h).
  GroupRuntime::Body prelude;
  if (op_check_ && op.has_buffer && bytes > kStagedOpBytes && !op.count_per_rank)
    prelude = fingerprint_prelude(context_, op, name_, p2p_names_.global_ranks);
  WorkHandle work = runtime_->run(call, bytes, std::move(buffers), std::move(body), std::move(prelude));
  op.seq = static_cast<std::int64_t>(runtime_->last_seq());
  if (op_check_) op_check_->record(op);
  return work;
}

WorkHandle GlooBackend::nothing_to_move(const Op& call, OpDesc op) {
  return runtime_->post(call, [&](std::uint64_t seq) {
    op.seq = static_cast<std::int64_t>(seq);
    if (op_check_) op_check_->record(op);
    return completed_work();
  });
}

// ---------------------------------------------------------------------------- point-to-point

// Through the runtime like any op (refused after a failure, numbered, labelled), then posted as
// unbound buffers on the caller's thread.
WorkHandle GlooBackend::post_p2p(const char* what, const Op& call, const std::vector<P2POp>& ops) {
  return runtime_->post(call, [&](std::uint64_t seq) -> WorkHandle {
    const std::shared_ptr<GroupHealth>& health = runtime_->shared_health();
    auto work = std::make_shared<GlooP2PWork>(*context_, health, ops, what, seq, p2p_names_, &translate,
                                              transport_->failed);
    runtime_->in_flight()->add(work);
    // A transport failure between the runtime's check and the registration above missed this
    // Work: its buffers would wait for a parked thread until the op timeout.
    if (health->failed()) work->abort(std::make_exception_ptr(health->unusable(what)));
    return work;
  });
}

// Runs on the failed Gloo transport thread (transport_failure.h): every op in flight and every
// later one fails with one message that says what most likely happened, and the job learns it.
void on_transport_failure(TransportState& s, const std::string& what) {
  const std::string text = fmt::format(
      "{}: Gloo's transport received more bytes than the posted receive holds ({}): the ranks issued different "
      "collectives (op, dtype, count or root) or a send larger than its recv; the group is unusable",
      s.health->label(), what);
  auto error = std::make_exception_ptr(BackendError(text));
  // This group's transport failed (not another group's of the process): it wrote our buffers
  // and will never write them again, so the Works may read what it received.
  if (is_current_thread_in(s.threads)) s.failed->own.store(true, std::memory_order_release);
  s.failed->any.store(true, std::memory_order_release);
  s.health->fail(text);
  // The parked thread must never be joined: keep the context (and its device) until exit.
  keep_until_exit(s.context);
  s.health->publish(fmt::format("gloo: ranks issued different collectives ({})", what));
  if (s.fail_in_flight) s.fail_in_flight(error);  // every op in flight, point-to-point too
}

WorkHandle GlooBackend::send(const Op& call, BufferView buffer, int peer, const SendOptions& options) {
  check_cpu(buffer, "send");
  check_peer(op_where("send", name_), peer, options.tag, rank_, size_);
  return post_p2p("send", call, {P2POp{P2POp::Kind::send, buffer, peer, options.tag}});
}

WorkHandle GlooBackend::recv(const Op& call, BufferView buffer, int peer, const RecvOptions& options) {
  check_cpu(buffer, "recv");
  check_peer(op_where("recv", name_), peer, options.tag, rank_, size_);
  return post_p2p("recv", call, {P2POp{P2POp::Kind::recv, buffer, peer, options.tag}});
}

WorkHandle GlooBackend::batch_send_recv(const Op& call, const std::vector<P2POp>& ops) {
  for (const P2POp& op : ops) check_cpu(op.buffer, "batch_send_recv");
  check_p2p_batch(op_where("batch_send_recv", name_), ops, rank_, size_);
  if (ops.empty()) return completed_work();
  return post_p2p("batch_send_recv", call, ops);
}

// ---------------------------------------------------------------------------- rooted, all-to-all

WorkHandle GlooBackend::reduce(const Op& call, BufferView buffer, const ReduceOptions& options) {
  check_cpu(buffer, "reduce");
  check_root(op_where("reduce", name_), options.root, size_);
  if (size_ == 1) return completed_work();  // one rank: every op gives the value
  // Even of 0 elements: its messages carry their length, so a root that expects more learns it.
  // Only the root's buffer is written (with the reduction); the others' are only read.
  const auto access = rank_ == options.root ? OpBuffer::read_write : OpBuffer::read;
  return run(call, op_desc("reduce", buffer).with_root(options.root).with_reduce(options.op), buffer.bytes(),
             {{buffer, access}}, [ctx = context_, op = options.op, root = options.root,
                                  names = p2p_names_.global_ranks](const OpContext& o) {
               run_reduce(ctx, o.buffer(0), op, root, tag_of(o), o.timeout, names);
             });
}

WorkHandle GlooBackend::gather(const Op& call, BufferView input, BufferView output, const GatherOptions& options) {
  const int root = options.root;
  check_cpu(input, "gather");
  if (rank_ == root) check_cpu(output, "gather");
  check_gather_shapes(op_where("gather", name_), input, output, root, rank_, size_);
  if (size_ == 1) {
    if (input.count && output.data != input.data) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  // Even of 0 elements: its messages carry their length, so a root that expects more learns it.
  std::vector<OpBuffer> buffers{{input, OpBuffer::read}};
  if (rank_ == root) buffers.push_back({output, OpBuffer::write});
  return run(call, op_desc("gather", input).with_root(root), input.bytes() * static_cast<std::size_t>(size_),
             std::move(buffers), [ctx = context_, output, root, names = p2p_names_.global_ranks](const OpContext& o) {
               run_gather(ctx, o.buffer(0), o.buffers.size() > 1 ? o.buffer(1) : output, root, tag_of(o), o.timeout,
                          names);
             });
}

WorkHandle GlooBackend::scatter(const Op& call, BufferView input, BufferView output, const ScatterOptions& options) {
  const int root = options.root;
  check_cpu(output, "scatter");
  if (rank_ == root) check_cpu(input, "scatter");
  check_scatter_shapes(op_where("scatter", name_), input, output, root, rank_, size_);
  if (size_ == 1) {
    if (output.count && output.data != input.data) std::memmove(output.data, input.data, output.bytes());
    return completed_work();
  }
  // Even of 0 elements: its messages carry their length, so a rank that expects more learns it.
  std::vector<OpBuffer> buffers{{output, OpBuffer::write}};
  if (rank_ == root) buffers.push_back({input, OpBuffer::read});
  return run(call, op_desc("scatter", output).with_root(root), output.bytes() * static_cast<std::size_t>(size_),
             std::move(buffers), [ctx = context_, input, root, names = p2p_names_.global_ranks](const OpContext& o) {
               run_scatter(ctx, o.buffers.size() > 1 ? o.buffer(1) : input, o.buffer(0), root, tag_of(o), o.timeout,
                           names);
             });
}

WorkHandle GlooBackend::all_to_all(const Op& call, BufferView input, BufferView output, const AllToAllOptions&) {
  check_cpu(input, "all_to_all");
  check_cpu(output, "all_to_all");
  check_all_to_all_shapes(op_where("all_to_all", name_), input, output, size_);
  if (size_ == 1) {
    if (input.count && output.data != input.data) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  if (input.count == 0) return nothing_to_move(call, op_desc("all_to_all", input));
  return run(call, op_desc("all_to_all", input), input.bytes(), {{input, OpBuffer::read}, {output, OpBuffer::write}},
                       [ctx = context_](const OpContext& o) {
                         run_all_to_all(ctx, o.buffer(0), o.buffer(1), tag_of(o), o.timeout);
                       });
}

WorkHandle GlooBackend::all_to_allv(const Op& call, BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                                  const std::vector<std::size_t>& recv_counts, const AllToAllOptions&) {
  check_cpu(input, "all_to_allv");
  check_cpu(output, "all_to_allv");
  check_all_to_allv_shapes(op_where("all_to_allv", name_), input, send_counts, output, recv_counts, rank_, size_);
  if (size_ == 1) {
    if (output.data != input.data && input.count) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  // Its count differs between ranks by design: FASTRUN_DEBUG=sequence compares the pairs' counts
  // before the op, and by default each message carries its length (rooted_ops.h); it has no
  // prelude (fingerprint_prelude.h says why). Staged or not is this rank's own business here.
  const bool on_callers_buffers = input.bytes() > kStagedOpBytes;
  return run(call, op_desc("all_to_allv", input).with_count_per_rank(), input.bytes(), {{input, OpBuffer::read}, {output, OpBuffer::write}},
                       [ctx = context_, send_counts, recv_counts, on_callers_buffers,
                        names = p2p_names_.global_ranks](const OpContext& o) {
                         run_all_to_allv(ctx, o.buffer(0), send_counts, o.buffer(1), recv_counts, tag_of(o),
                                         o.timeout, on_callers_buffers, names);
                       });
}

}  // namespace

std::unique_ptr<Backend> make_gloo_backend(const GroupSpec& spec) { return std::make_unique<GlooBackend>(spec); }

}  // namespace fastrun::gloo_backend

fastrun::backend::Factory fastrun_gloo_backend() { return &fastrun::gloo_backend::make_gloo_backend; }
