#include "fastrun/runtime/backend/gloo/gloo_group.h"
#include "fastrun/runtime/backend/gloo_host.h"
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
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "fastrun/runtime/backend/gloo/store_adapter.h"
#include "fastrun/runtime/backend/gloo_module.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/peer_info.h"
#include "fastrun/runtime/log.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/comm_thread.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::gloo_backend {
namespace {

void check_cpu(const BufferView& b, const char* op) {
  if (b.device != DeviceKind::cpu)
    throw ConfigError(fmt::format("{}: the gloo backend takes host memory only, got a CUDA buffer "
                                  "(use the nccl backend for GPU buffers: FASTRUN_BACKEND=nccl or auto)",
                                  op));
  if (b.count > 0 && b.data == nullptr) throw ConfigError(fmt::format("{}: buffer of {} elements at nullptr", op, b.count));
}

// State the comm thread shares with the group: it outlives the group when the thread is
// abandoned on a dead peer.
struct Shared {
  std::shared_ptr<::gloo::Context> context;
  std::shared_ptr<FailureWatch> watch;
  std::vector<PeerInfo> peers;  // group members' host/pid, to name a dead one
  std::string label;            // "rank 1 in group 'world' (gloo)"
  int global_rank = 0;
  std::vector<int> global_ranks;
  Duration op_timeout{};
  std::mutex mutex;
  std::string failure;  // first failure; non-empty = unusable
};

class GlooGroup final : public ProcessGroup {
 public:
  explicit GlooGroup(const GroupSpec& spec);
  ~GlooGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "gloo"; }

  WorkHandle all_reduce(BufferView buffer, const AllReduceOptions& options) override;
  WorkHandle broadcast(BufferView buffer, const BroadcastOptions& options) override;
  WorkHandle all_gather(BufferView input, BufferView output, const AllGatherOptions& options) override;
  WorkHandle reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options) override;
  WorkHandle barrier(const BarrierOptions& options) override;

 private:
  // Queues `body(tag, timeout)` on the comm thread and returns its handle.
  WorkHandle submit(const char* op, std::function<void(std::uint32_t tag, Duration timeout)> body);

  int rank_;
  int size_;
  std::shared_ptr<Shared> shared_;
  std::uint32_t next_tag_ = 1;
  std::unique_ptr<CommThread> thread_;
};

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

GlooGroup::GlooGroup(const GroupSpec& spec) : rank_(spec.rank), size_(spec.size), shared_(std::make_shared<Shared>()) {
  const auto start = std::chrono::steady_clock::now();
  auto& s = *shared_;
  s.global_ranks = spec.global_ranks;
  if (s.global_ranks.empty())
    for (int r = 0; r < spec.size; ++r) s.global_ranks.push_back(r);
  s.global_rank = s.global_ranks.at(static_cast<std::size_t>(spec.rank));
  s.label = fmt::format("rank {} in group '{}' (gloo)", s.global_rank, spec.name);
  s.op_timeout = spec.op_timeout;
  s.watch = std::make_shared<FailureWatch>(spec.failure_store);
  if (spec.failure_store) s.peers = read_peer_infos(*spec.failure_store, s.global_ranks);

  if (spec.size > 1) {
    ignore_sigpipe_once();
    // Numbered steps: 1. device on the configured host; 2. context with the set-up timeout;
    // 3. full mesh through the prefixed store; 4. a barrier: every mesh connected (below);
    // 5. per-op timeouts are set on each op.
    ::gloo::transport::tcp::attr attr;
    // ConfigError before gloo sees a bad one.
    attr.hostname = resolve_gloo_host(spec.gloo_host.empty() ? env::get_string(env::kGlooHost) : spec.gloo_host);
    std::shared_ptr<::gloo::transport::Device> device;
    try {
      device = ::gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw BackendError(fmt::format("{}: cannot create a tcp device on '{}' (FASTRUN_GLOO_HOST): {}", s.label,
                                     attr.hostname, e.what()));
    }
    auto context = std::make_shared<::gloo::rendezvous::Context>(spec.rank, spec.size);
    context->setTimeout(spec.timeout);
    StoreAdapter adapter(spec.store, spec.timeout);
    try {
      context->connectFullMesh(adapter, device);
    } catch (const TimeoutError& e) {
      throw TimeoutError(fmt::format("{}: connecting the full mesh timed out: {}", s.label, e.what()));
    } catch (const fastrun::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw BackendError(fmt::format("{}: connecting the full mesh failed: {}", s.label, e.what()));
    }
    // A rank may leave right after set-up (join() can end a program); closing its sockets while
    // a slower peer is still connecting to it fails that peer's set-up. So nobody returns until
    // every rank's mesh is connected; after that a closed socket matters only to an op.
    store_barrier(*spec.store, "gloo/connected", spec.size, spec.timeout);
    s.context = context;
    thread_ = std::make_unique<CommThread>(fmt::format("gloo-{}", spec.name));
  }
  log::debug("{}: ready, {} ranks, {:.1f} ms", s.label, spec.size,
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

GlooGroup::~GlooGroup() {
  bool failed;
  {
    std::lock_guard lock(shared_->mutex);
    failed = !shared_->failure.empty();
  }
  // A comm thread stuck with a dead peer cannot be joined quickly: let it go (it holds `shared_`).
  if (thread_ && failed) thread_->abandon();
}

// Turns what a Gloo op threw into fastrun's exception, records the failure, returns it.
std::exception_ptr translate(Shared& s, const std::string& what, const std::exception& e, bool io_error) {
  std::exception_ptr error;
  if (io_error) {
    const std::string text = e.what();
    const bool timed_out = text.find("imed out") != std::string::npos || text.find("imeout") != std::string::npos;
    // Root cause first: a failure already recorded (by the launcher, or by the survivor that saw
    // the death first and then exited, closing *its* sockets too) names the right rank.
    if (auto failure = s.watch->poll(/*force=*/true)) {
      error = std::make_exception_ptr(
          PeerFailure(fmt::format("{}: {} failed because a peer failed: {} (gloo: {})", s.label, what, *failure, text)));
    } else if (std::vector<int> dead = dead_local_peers(s.peers, timed_out ? Duration() : Duration(std::chrono::seconds(1)));
               !dead.empty()) {
      s.watch->publish(fmt::format("rank {}: process gone (connection closed during {})", dead.front(), what));
      error = std::make_exception_ptr(PeerFailure(fmt::format("{}: {} failed: rank {} died (its connection closed; "
                                                              "gloo: {})",
                                                              s.label, what, fmt::join(dead, ", "), text)));
    } else if (timed_out) {
      error = std::make_exception_ptr(TimeoutError(fmt::format(
          "{}: {} timed out after {:.3g} s (FASTRUN_OP_TIMEOUT): {}", s.label, what,
          std::chrono::duration<double>(s.op_timeout).count(), text)));
    } else {
      s.watch->publish(fmt::format("rank {}: {} failed: {}", s.global_rank, what, text));
      error = std::make_exception_ptr(
          PeerFailure(fmt::format("{}: {} failed: a peer connection broke (gloo: {})", s.label, what, text)));
    }
  } else {
    error = std::make_exception_ptr(BackendError(fmt::format("{}: {} failed: {}", s.label, what, e.what())));
  }
  std::lock_guard lock(s.mutex);
  if (s.failure.empty()) s.failure = e.what();
  return error;
}

WorkHandle GlooGroup::submit(const char* op, std::function<void(std::uint32_t, Duration)> body) {
  const std::uint32_t tag = next_tag_++;
  auto shared = shared_;
  {
    std::lock_guard lock(shared->mutex);
    if (!shared->failure.empty())
      throw PeerFailure(fmt::format("{}: {} refused: the group failed earlier ({}); create a new context",
                                    shared->label, op, shared->failure));
  }
  const std::string what = fmt::format("{} #{}", op, tag);
  auto work = std::make_shared<AsyncWork>(fmt::format("{}: {}", shared->label, what), shared->op_timeout, shared->watch,
                                          [shared](const std::string& reason) {
                                            std::lock_guard lock(shared->mutex);
                                            if (shared->failure.empty()) shared->failure = reason;
                                          });
  thread_->post([shared, work, what, tag, body = std::move(body)] {
    try {
      body(tag, shared->op_timeout);
      work->complete();
    } catch (const ::gloo::IoException& e) {
      work->fail(translate(*shared, what, e, true));
    } catch (const std::exception& e) {
      work->fail(translate(*shared, what, e, false));
    }
  });
  return work;
}

// Gloo wants a typed pointer only for the element size; 16-bit floats travel as uint16_t.
template <class F>
void with_storage_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: f(static_cast<float*>(nullptr)); return;
    case DType::float64: f(static_cast<double*>(nullptr)); return;
    case DType::int32: f(static_cast<std::int32_t*>(nullptr)); return;
    case DType::int64: f(static_cast<std::int64_t*>(nullptr)); return;
    case DType::float16:
    case DType::bfloat16: f(static_cast<std::uint16_t*>(nullptr)); return;
  }
}

void run_allreduce(const std::shared_ptr<::gloo::Context>& ctx, BufferView b, ReduceOp op, std::uint32_t tag,
                   Duration timeout) {
  const ReduceOp kernel_op = op == ReduceOp::avg ? ReduceOp::sum : op;
  with_storage_type(b.dtype, [&](auto* type_tag) {
    using T = std::remove_pointer_t<decltype(type_tag)>;
    ::gloo::AllreduceOptions o(ctx);
    o.setOutput<T>(static_cast<T*>(b.data), b.count);
    o.setReduceFunction(kernels::reduce_fn(b.dtype, kernel_op));
    o.setAlgorithm(::gloo::AllreduceOptions::Algorithm::RING);
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::allreduce(o);
  });
  if (op == ReduceOp::avg) kernels::divide_in_place(b.dtype, b.data, b.count, ctx->size);
}

WorkHandle GlooGroup::all_reduce(BufferView buffer, const AllReduceOptions& options) {
  check_cpu(buffer, "all_reduce");
  if (size_ == 1 || buffer.count == 0) return completed_work();  // avg over one rank is the value
  auto ctx = shared_->context;
  const ReduceOp op = options.op;
  return submit("all_reduce", [ctx, buffer, op](std::uint32_t tag, Duration timeout) {
    run_allreduce(ctx, buffer, op, tag, timeout);
  });
}

WorkHandle GlooGroup::broadcast(BufferView buffer, const BroadcastOptions& options) {
  check_cpu(buffer, "broadcast");
  if (options.root < 0 || options.root >= size_)
    throw ConfigError(fmt::format("broadcast: root {} is not a rank of this group of {} ranks", options.root, size_));
  if (size_ == 1 || buffer.count == 0) return completed_work();
  auto ctx = shared_->context;
  const int root = options.root;
  return submit("broadcast", [ctx, buffer, root](std::uint32_t tag, Duration timeout) {
    ::gloo::BroadcastOptions o(ctx);
    o.setOutput<std::uint8_t>(static_cast<std::uint8_t*>(buffer.data), buffer.bytes());
    o.setRoot(root);
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::broadcast(o);
  });
}

WorkHandle GlooGroup::all_gather(BufferView input, BufferView output, const AllGatherOptions&) {
  check_cpu(input, "all_gather");
  check_cpu(output, "all_gather");
  check_all_gather_shapes("all_gather", input, output, size_);
  if (input.count == 0) return completed_work();
  if (size_ == 1) {
    if (output.data != input.data) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  auto ctx = shared_->context;
  return submit("all_gather", [ctx, input, output](std::uint32_t tag, Duration timeout) {
    ::gloo::AllgatherOptions o(ctx);
    // In place when the input already sits at this rank's slot of the output.
    auto* own_slot = static_cast<std::uint8_t*>(output.data) + input.bytes() * static_cast<std::size_t>(ctx->rank);
    if (input.data != own_slot) o.setInput<std::uint8_t>(static_cast<std::uint8_t*>(input.data), input.bytes());
    o.setOutput<std::uint8_t>(static_cast<std::uint8_t*>(output.data), output.bytes());
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::allgather(o);
  });
}

WorkHandle GlooGroup::reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options) {
  check_cpu(input, "reduce_scatter");
  check_cpu(output, "reduce_scatter");
  check_reduce_scatter_shapes("reduce_scatter", input, output, size_);
  if (output.count == 0) return completed_work();
  const std::size_t block = output.bytes();
  if (size_ == 1) {
    if (output.data != input.data) std::memmove(output.data, input.data, block);
    return completed_work();
  }
  auto ctx = shared_->context;
  const ReduceOp op = options.op;
  return submit("reduce_scatter", [ctx, input, output, op, block](std::uint32_t tag, Duration timeout) {
    // Allreduce a scratch copy (the caller's input stays untouched), keep this rank's block.
    std::vector<std::uint8_t> scratch(input.bytes());
    std::memcpy(scratch.data(), input.data, scratch.size());
    BufferView whole{scratch.data(), input.count, input.dtype, DeviceKind::cpu};
    run_allreduce(ctx, whole, op, tag, timeout);
    std::memcpy(output.data, scratch.data() + block * static_cast<std::size_t>(ctx->rank), block);
  });
}

WorkHandle GlooGroup::barrier(const BarrierOptions&) {
  if (size_ == 1) return completed_work();
  auto ctx = shared_->context;
  return submit("barrier", [ctx](std::uint32_t tag, Duration timeout) {
    ::gloo::BarrierOptions o(ctx);
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::barrier(o);
  });
}

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const GroupSpec& spec) { return std::make_unique<GlooGroup>(spec); }

}  // namespace fastrun::gloo_backend

fastrun::backend::Factory fastrun_gloo_backend() { return &fastrun::gloo_backend::make_gloo_group; }
