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
#include <gloo/allgatherv.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "fastrun/runtime/backend/gloo/rooted_ops.h"
#include "fastrun/runtime/backend/gloo/store_adapter.h"
#include "fastrun/runtime/backend/gloo/transport_failure.h"
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
  // Ops in flight, failed at once when a Gloo transport thread fails (transport_failure.h).
  std::vector<std::weak_ptr<AsyncWork>> collectives;
  std::vector<std::weak_ptr<Work>> p2p;
  int listener = 0;
};

void on_transport_failure(Shared& s, const std::string& what);

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

  WorkHandle send(BufferView buffer, int peer, const SendOptions& options) override;
  WorkHandle recv(BufferView buffer, int peer, const RecvOptions& options) override;
  WorkHandle batch_send_recv(const std::vector<P2POp>& ops) override;
  WorkHandle reduce(BufferView buffer, const ReduceOptions& options) override;
  WorkHandle gather(BufferView input, BufferView output, const GatherOptions& options) override;
  WorkHandle scatter(BufferView input, BufferView output, const ScatterOptions& options) override;
  WorkHandle all_to_all(BufferView input, BufferView output, const AllToAllOptions& options) override;
  WorkHandle all_to_allv(BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options) override;

 private:
  // Posts point-to-point ops (checked) as unbound buffers; one Work waits for them all.
  WorkHandle post_p2p(const char* op, const std::vector<P2POp>& ops);

  // Queues `body(tag, timeout)` on the comm thread and returns its handle.
  WorkHandle submit(const char* op, std::function<void(std::uint32_t tag, Duration timeout)> body);

  int rank_;
  int size_;
  std::string name_;  // the group's name, for the shared argument checks' messages
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

GlooGroup::GlooGroup(const GroupSpec& spec)
    : rank_(spec.rank), size_(spec.size), name_(spec.name), shared_(std::make_shared<Shared>()) {
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
    const std::set<pid_t> threads_before = current_threads();
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
    adopt_transport_threads(threads_before);
    s.context = context;
    std::weak_ptr<Shared> weak = shared_;
    s.listener = listen_for_transport_failure([weak](const std::string& what) {
      if (auto locked = weak.lock()) on_transport_failure(*locked, what);
    });
    thread_ = std::make_unique<CommThread>(fmt::format("gloo-{}", spec.name));
  }
  log::debug("{}: ready, {} ranks, {:.1f} ms", s.label, spec.size,
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

GlooGroup::~GlooGroup() {
  if (shared_->listener) stop_listening(shared_->listener);
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
    const auto recorded_failure = [&]() -> std::exception_ptr {
      if (auto failure = s.watch->poll(/*force=*/true))
        return std::make_exception_ptr(PeerFailure(
            fmt::format("{}: {} failed because a peer failed: {} (gloo: {})", s.label, what, *failure, text)));
      return nullptr;
    };
    if ((error = recorded_failure())) {
    } else if (std::vector<int> dead = dead_local_peers(s.peers, timed_out ? Duration() : Duration(std::chrono::seconds(1)));
               !dead.empty()) {
      // Read the record again: a survivor that saw the death first recorded it before it exited,
      // possibly while we waited for the dead to show, and it names the root cause where `dead`
      // would also list that survivor.
      if (!(error = recorded_failure())) {
        s.watch->publish(fmt::format("rank {}: process gone (connection closed during {})", dead.front(), what));
        error = std::make_exception_ptr(PeerFailure(fmt::format("{}: {} failed: rank {} died (its connection closed; "
                                                                "gloo: {})",
                                                                s.label, what, fmt::join(dead, ", "), text)));
      }
    } else if (timed_out) {
      error = std::make_exception_ptr(TimeoutError(fmt::format(
          "{}: {} timed out after {:.3g} s (FASTRUN_OP_TIMEOUT; a peer may be stuck or issuing a different "
          "collective): {}",
          s.label, what,
          std::chrono::duration<double>(s.op_timeout).count(), text)));
    } else {
      s.watch->publish(fmt::format("rank {}: {} failed: {}", s.global_rank, what, text));
      error = std::make_exception_ptr(
          PeerFailure(fmt::format("{}: {} failed: a peer connection broke (gloo: {})", s.label, what, text)));
    }
  } else {
    error = std::make_exception_ptr(BackendError(fmt::format("{}: {} failed: {}", s.label, what, e.what())));
  }
  // Later calls quote the first failure: keep the translated text, which names the rank.
  std::string text = e.what();
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& translated) {
    text = translated.what();
  }
  std::lock_guard lock(s.mutex);
  if (s.failure.empty()) s.failure = text;
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
  {
    std::lock_guard lock(shared->mutex);
    std::erase_if(shared->collectives, [](const auto& w) { return w.expired(); });
    shared->collectives.push_back(work);
  }
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
  ::gloo::AlltoallvOptions o(ctx);
  // Gloo only reads the input; its API takes a non-const pointer.
  o.setInput<std::uint8_t>(static_cast<std::uint8_t*>(const_cast<void*>(input)), send_bytes);
  o.setOutput<std::uint8_t>(received, recv_bytes);
  o.setTag(tag);
  o.setTimeout(timeout);
  ::gloo::alltoallv(o);
  std::vector<const void*> srcs(n);
  for (std::size_t p = 0; p < n; ++p) srcs[p] = received + p * mine * esize;
  kernels::reduce(dtype, op, output, nullptr, srcs.data(), ctx->size, mine);
}

void allreduce_by_gather(const std::shared_ptr<::gloo::Context>& ctx, BufferView b, ReduceOp op, std::uint32_t tag,
                         Duration timeout) {
  const auto n = static_cast<std::size_t>(ctx->size);
  std::uint8_t* gathered = scratch(n * b.bytes());
  ::gloo::AllgatherOptions o(ctx);
  o.setInput<std::uint8_t>(static_cast<std::uint8_t*>(b.data), b.bytes());
  o.setOutput<std::uint8_t>(gathered, n * b.bytes());
  o.setTag(tag);
  o.setTimeout(timeout);
  ::gloo::allgather(o);
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
  ::gloo::AllgathervOptions g(ctx);
  g.setOutput<std::uint8_t>(data, block_bytes);
  g.setTag(tag);
  g.setTimeout(timeout);
  ::gloo::allgatherv(g);
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
  return submit("reduce_scatter", [ctx, input, output, op](std::uint32_t tag, Duration timeout) {
    reduce_blocks(ctx, input.data, std::vector<std::size_t>(ctx->size, output.count), output.data, input.dtype, op,
                  tag, timeout);
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

// ---------------------------------------------------------------------------- point-to-point

// Slots of user messages: a prefix no Gloo collective uses (gloo/types.h uses 0x01-0x08), and
// the tag.
constexpr std::uint8_t kP2PSlotPrefix = 0x70;

// Point-to-point ops posted as unbound buffers on the issuing thread (Gloo's transport threads
// match and move them, as for torch's ProcessGroupGloo::send); wait() waits for each in turn,
// in one call per buffer with the time left: a Gloo wait that times out closes the context's
// pairs, so it cannot be sliced. Hence completed() is true only once a wait() returned.
class GlooP2PWork final : public Work {
 public:
  struct Item {
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
    bool send;
  };
  GlooP2PWork(std::shared_ptr<Shared> shared, std::vector<Item> items, std::string what)
      : shared_(std::move(shared)), items_(std::move(items)), what_(std::move(what)) {}

  // From the failing transport thread: wakes a wait() in progress, which then reports `error`.
  void abort(std::exception_ptr error) {
    {
      std::lock_guard lock(abort_mutex_);
      aborted_ = std::move(error);
    }
    for (Item& item : items_) {
      if (item.send) item.buffer->abortWaitSend();
      else item.buffer->abortWaitRecv();
    }
  }

  void wait(Duration timeout) override {
    std::lock_guard lock(mutex_);
    if (!done_) {
      if (timeout <= Duration::zero()) timeout = shared_->op_timeout;
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      try {
        for (Item& item : items_) {
          const auto left = std::max(std::chrono::milliseconds(1),
                                     std::chrono::duration_cast<std::chrono::milliseconds>(
                                         deadline - std::chrono::steady_clock::now()));
          const bool ok = item.send ? item.buffer->waitSend(left) : item.buffer->waitRecv(left);
          if (!ok) break;  // aborted: a transport thread failed
        }
        std::lock_guard abort_lock(abort_mutex_);
        if (aborted_) error_ = aborted_;
      } catch (const ::gloo::IoException& e) {
        error_ = translate(*shared_, what_, e, true);
      } catch (const std::exception& e) {
        error_ = translate(*shared_, what_, e, false);
      }
      done_ = true;
    }
    if (error_) std::rethrow_exception(error_);
  }
  bool completed() override {
    std::lock_guard lock(mutex_);
    return done_;
  }

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<Item> items_;
  std::string what_;
  std::mutex mutex_;
  bool done_ = false;
  std::exception_ptr error_;
  std::mutex abort_mutex_;
  std::exception_ptr aborted_;
};

WorkHandle GlooGroup::post_p2p(const char* op, const std::vector<P2POp>& ops) {
  auto shared = shared_;
  {
    std::lock_guard lock(shared->mutex);
    if (!shared->failure.empty())
      throw PeerFailure(fmt::format("{}: {} refused: the group failed earlier ({}); create a new context",
                                    shared->label, op, shared->failure));
  }
  static char empty;  // Gloo wants an address even for an empty message
  std::vector<GlooP2PWork::Item> items;
  try {
    for (const P2POp& p : ops) {
      void* data = p.buffer.data ? p.buffer.data : &empty;
      auto buffer = shared->context->createUnboundBuffer(data, p.buffer.bytes());
      const auto slot = ::gloo::Slot::build(kP2PSlotPrefix, static_cast<std::uint32_t>(p.tag));
      const bool send = p.kind == P2POp::Kind::send;
      if (send) buffer->send(p.peer, slot);
      else buffer->recv(p.peer, slot);
      items.push_back({std::move(buffer), send});
    }
  } catch (const ::gloo::IoException& e) {
    std::rethrow_exception(translate(*shared, op, e, true));
  }
  auto work = std::make_shared<GlooP2PWork>(shared, std::move(items), op);
  {
    std::lock_guard lock(shared->mutex);
    std::erase_if(shared->p2p, [](const auto& w) { return w.expired(); });
    shared->p2p.push_back(work);
  }
  return work;
}

// Runs on the failed Gloo transport thread (transport_failure.h): every op in flight and every
// later one fails with one message that says what most likely happened, and the job learns it.
void on_transport_failure(Shared& s, const std::string& what) {
  const std::string text = fmt::format(
      "{}: Gloo's transport received more bytes than the posted receive holds ({}): the ranks issued different "
      "collectives (op, dtype, count or root) or a send larger than its recv; the group is unusable",
      s.label, what);
  auto error = std::make_exception_ptr(BackendError(text));
  std::vector<std::weak_ptr<AsyncWork>> collectives;
  std::vector<std::weak_ptr<Work>> p2p;
  {
    std::lock_guard lock(s.mutex);
    if (s.failure.empty()) s.failure = text;
    collectives = s.collectives;
    p2p = s.p2p;
  }
  // The parked thread must never be joined: keep the context (and its device) until exit.
  static std::mutex kept_mutex;
  static auto* kept = new std::vector<std::shared_ptr<::gloo::Context>>;  // reachable, never freed
  {
    std::lock_guard lock(kept_mutex);
    kept->push_back(s.context);
  }
  s.watch->publish(fmt::format("rank {}: gloo: ranks issued different collectives ({})", s.global_rank, what));
  for (auto& w : collectives)
    if (auto work = w.lock()) work->fail(error);
  for (auto& w : p2p)
    if (auto work = std::static_pointer_cast<GlooP2PWork>(w.lock())) work->abort(error);
}

WorkHandle GlooGroup::send(BufferView buffer, int peer, const SendOptions& options) {
  check_cpu(buffer, "send");
  check_peer(op_where("send", name_), peer, options.tag, rank_, size_);
  return post_p2p("send", {P2POp{P2POp::Kind::send, buffer, peer, options.tag}});
}

WorkHandle GlooGroup::recv(BufferView buffer, int peer, const RecvOptions& options) {
  check_cpu(buffer, "recv");
  check_peer(op_where("recv", name_), peer, options.tag, rank_, size_);
  return post_p2p("recv", {P2POp{P2POp::Kind::recv, buffer, peer, options.tag}});
}

WorkHandle GlooGroup::batch_send_recv(const std::vector<P2POp>& ops) {
  for (const P2POp& op : ops) check_cpu(op.buffer, "batch_send_recv");
  check_p2p_batch(op_where("batch_send_recv", name_), ops, rank_, size_);
  if (ops.empty()) return completed_work();
  return post_p2p("batch_send_recv", ops);
}

// ---------------------------------------------------------------------------- rooted, all-to-all

WorkHandle GlooGroup::reduce(BufferView buffer, const ReduceOptions& options) {
  check_cpu(buffer, "reduce");
  check_root(op_where("reduce", name_), options.root, size_);
  if (size_ == 1 || buffer.count == 0) return completed_work();  // one rank: every op gives the value
  auto ctx = shared_->context;
  return submit("reduce", [ctx, buffer, op = options.op, root = options.root](std::uint32_t tag, Duration timeout) {
    run_reduce(ctx, buffer, op, root, tag, timeout);
  });
}

WorkHandle GlooGroup::gather(BufferView input, BufferView output, const GatherOptions& options) {
  const int root = options.root;
  check_cpu(input, "gather");
  if (rank_ == root) check_cpu(output, "gather");
  check_gather_shapes(op_where("gather", name_), input, output, root, rank_, size_);
  if (input.count == 0) return completed_work();
  if (size_ == 1) {
    if (output.data != input.data) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  auto ctx = shared_->context;
  return submit("gather", [ctx, input, output, root](std::uint32_t tag, Duration timeout) {
    run_gather(ctx, input, output, root, tag, timeout);
  });
}

WorkHandle GlooGroup::scatter(BufferView input, BufferView output, const ScatterOptions& options) {
  const int root = options.root;
  check_cpu(output, "scatter");
  if (rank_ == root) check_cpu(input, "scatter");
  check_scatter_shapes(op_where("scatter", name_), input, output, root, rank_, size_);
  if (output.count == 0) return completed_work();
  if (size_ == 1) {
    if (output.data != input.data) std::memmove(output.data, input.data, output.bytes());
    return completed_work();
  }
  auto ctx = shared_->context;
  return submit("scatter", [ctx, input, output, root](std::uint32_t tag, Duration timeout) {
    run_scatter(ctx, input, output, root, tag, timeout);
  });
}

WorkHandle GlooGroup::all_to_all(BufferView input, BufferView output, const AllToAllOptions&) {
  check_cpu(input, "all_to_all");
  check_cpu(output, "all_to_all");
  check_all_to_all_shapes(op_where("all_to_all", name_), input, output, size_);
  if (input.count == 0) return completed_work();
  if (size_ == 1) {
    if (output.data != input.data) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  auto ctx = shared_->context;
  return submit("all_to_all", [ctx, input, output](std::uint32_t tag, Duration timeout) {
    run_all_to_all(ctx, input, output, tag, timeout);
  });
}

WorkHandle GlooGroup::all_to_allv(BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                                  const std::vector<std::size_t>& recv_counts, const AllToAllOptions&) {
  check_cpu(input, "all_to_allv");
  check_cpu(output, "all_to_allv");
  check_all_to_allv_shapes(op_where("all_to_allv", name_), input, send_counts, output, recv_counts, rank_, size_);
  if (size_ == 1) {
    if (output.data != input.data && input.count) std::memmove(output.data, input.data, input.bytes());
    return completed_work();
  }
  auto ctx = shared_->context;
  return submit("all_to_allv", [ctx, input, send_counts, output, recv_counts](std::uint32_t tag, Duration timeout) {
    run_all_to_allv(ctx, input, send_counts, output, recv_counts, tag, timeout);
  });
}

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const GroupSpec& spec) { return std::make_unique<GlooGroup>(spec); }

}  // namespace fastrun::gloo_backend

fastrun::backend::Factory fastrun_gloo_backend() { return &fastrun::gloo_backend::make_gloo_group; }
