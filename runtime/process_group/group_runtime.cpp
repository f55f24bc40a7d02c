#include "fastrun/runtime/process_group/group_runtime.h"

#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun {

struct GroupRuntime::Shared {
  std::shared_ptr<GroupHealth> health;
  RuntimeConfig config;
  Hooks hooks;
  // Ops posted and not yet finished. The comm thread's release decrement pairs with the issuing
  // thread's acquire load: at 0 the transport is back in the issuing thread's hands.
  std::atomic<int> pending{0};
  // The group's one registry of ops in flight (in_flight.h): the Works of ops on the comm thread
  // and whatever a backend posted (post()); in_flight_failer fails them all.
  std::shared_ptr<InFlightOps> in_flight = std::make_shared<InFlightOps>();
};

namespace {

// Op-owned memory for staged buffers: slot i of the comm thread's current op. Ops of a group run
// one at a time on its thread, and an op left behind by a wait that gave up keeps using its slots
// only until it returns, before the next op starts; a slot keeps the largest size used, so a
// training loop does not fault in fresh pages on every op.
std::byte* staging(std::size_t slot, std::size_t bytes) {
  thread_local std::vector<std::vector<std::byte>> slots;
  if (slots.size() <= slot) slots.resize(slot + 1);
  auto& s = slots[slot];
  if (s.size() < bytes) s.resize(bytes);
  return s.data();
}

}  // namespace

GroupRuntime::GroupRuntime(const GroupSpec& spec, RuntimeConfig config, Hooks hooks,
                           std::shared_ptr<GroupHealth> health)
    : health_(health ? std::move(health) : std::make_shared<GroupHealth>(spec, config.backend, config.watch_peers)),
      shared_(std::make_shared<Shared>()),
      thread_name_(fmt::format("{}-{}", config.backend, spec.name)) {
  shared_->health = health_;
  shared_->config = std::move(config);
  shared_->hooks = std::move(hooks);
}

GroupRuntime::~GroupRuntime() {
  // A thread stuck with a dead peer cannot be joined quickly: let it go (it holds `shared_`).
  if (thread_ && shared_->config.detach_on_failure && health_->failed()) thread_->abandon();
}

std::uint64_t GroupRuntime::take_number(const Op& op) {
  std::uint64_t& last = op.point_to_point ? p2p_seq_ : seq_;
  last = op.numbered() ? op.seq : last + 1;
  return last;
}

void GroupRuntime::run_body(Shared& s, const OpContext& ctx, BodyRef body) {
  try {
    body(ctx);
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    if (s.hooks.translate) error = s.hooks.translate(*s.health, ctx.what(), error);
    // What a hook left as it was: fastrun's errors stay, anything else names the op.
    try {
      std::rethrow_exception(error);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(
          BackendError(fmt::format("{}: {} failed: {}", s.health->label(), ctx.what(), e.what())));
    } catch (...) {
    }
    s.health->fail(error);
    if (s.hooks.op_failed) s.hooks.op_failed();  // peers waiting on us fail now, not at their timeout
    std::rethrow_exception(error);
  }
}

// The op as this group runs it: its number (the one it came with; a bare op one more than the
// last of its kind: collectives and point-to-point are counted apart), its name and its timeout
// (the group's op timeout when it came without one). No label: OpContext::what() formats one
// for a message.
OpContext GroupRuntime::context_of(const Op& op) {
  OpContext ctx;
  ctx.seq = take_number(op);
  ctx.name = op.name;
  ctx.timeout = op.timeout == Duration::zero() ? health_->op_timeout() : op.timeout;
  return ctx;
}

// Inline only while the comm thread holds no op: otherwise this one would overtake them.
bool GroupRuntime::runs_inline(std::size_t bytes) const {
  const Shared& s = *shared_;
  return s.config.async_from_bytes == RuntimeConfig::kNever ||
         (bytes < s.config.async_from_bytes && s.pending.load(std::memory_order_acquire) == 0);
}

WorkHandle GroupRuntime::run_inline(const Op& op, const std::vector<OpBuffer>& buffers, const Body* prelude,
                                    BodyRef body) {
  Shared& s = *shared_;
  health_->check_usable(op.name);
  OpContext ctx = context_of(op);
  try {
    if (prelude && *prelude) run_body(s, ctx, *prelude);  // ctx.buffers is still empty
    for (const auto& b : buffers) ctx.buffers.push_back(b.view);
    run_body(s, ctx, body);
    return completed_work();
  } catch (...) {
    return std::make_shared<CompletedWork>(std::current_exception());
  }
}

WorkHandle GroupRuntime::run(const Op& op, std::size_t bytes, std::vector<OpBuffer> buffers, Body body,
                             Body prelude) {
  if (runs_inline(bytes)) return run_inline(op, buffers, &prelude, BodyRef(body));
  Shared& s = *shared_;
  health_->check_usable(op.name);
  OpContext ctx = context_of(op);

  if (!thread_) thread_ = std::make_unique<CommThread>(thread_name_);
  const bool staged = !buffers.empty() && bytes <= s.config.stage_up_to_bytes;
  std::weak_ptr<Shared> weak = shared_;
  auto work = std::make_shared<AsyncWork>(
      health_->label(), ctx.what(), ctx.timeout + s.config.wait_margin,
      s.config.wait_watches_failure_key ? health_->watch() : nullptr,
      [weak](const std::string& reason) {
        // Runs on a waiter's thread before the op finished: the group may be gone already.
        if (auto shared = weak.lock()) {
          shared->health->fail(reason);
          if (shared->hooks.cancel) shared->hooks.cancel();
        }
      },
      staged ? Duration::zero() : s.config.release_grace,
      s.hooks.stalled ? std::function<void()>([weak] {
        auto shared = weak.lock();
        if (!shared) return;
        std::exception_ptr error = shared->hooks.stalled();
        if (!error) return;
        shared->health->fail(error);
        fail_in_flight(*shared, error);
      })
                      : std::function<void()>());
  // Until the thread reaches it (and gets past its prelude) the op holds none of the caller's
  // buffers: a wait that gives up before then returns at once.
  if (!staged) work->enters_caller_memory_later();
  s.in_flight->add(work);
  s.pending.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t ticket = thread_->post([shared = shared_, work, staged, ctx = std::move(ctx),
                                              buffers = std::move(buffers), body = std::move(body),
                                              prelude = std::move(prelude)]() mutable {
    Shared& s = *shared;
    std::exception_ptr error;
    std::function<void()> write_back;
    if (s.health->failed()) error = std::make_exception_ptr(s.health->unusable(ctx.what()));
    if (!error && prelude) {
      try {
        run_body(s, ctx, prelude);  // ctx.buffers is still empty
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (!error && !staged) {
      if (work->enter_caller_memory())
        for (const auto& b : buffers) ctx.buffers.push_back(b.view);
      else
        error = std::make_exception_ptr(s.health->unusable(ctx.what()));
    } else if (!error) {
      // Copy in what the op reads; a wait that already gave up leaves the caller's memory alone.
      for (std::size_t i = 0; i < buffers.size(); ++i)
        ctx.buffers.push_back(BufferView{staging(i, buffers[i].view.bytes()), buffers[i].view.count,
                                         buffers[i].view.dtype, buffers[i].view.device});
      const bool copied = work->touch_caller_memory([&] {
        for (std::size_t i = 0; i < buffers.size(); ++i)
          if (buffers[i].access != OpBuffer::write && buffers[i].view.bytes() > 0)
            std::memcpy(ctx.buffers[i].data, buffers[i].view.data, buffers[i].view.bytes());
      });
      if (!copied) error = std::make_exception_ptr(s.health->unusable(ctx.what()));
      write_back = [&] {
        for (std::size_t i = 0; i < buffers.size(); ++i)
          if (buffers[i].access != OpBuffer::read && buffers[i].view.bytes() > 0)
            std::memcpy(buffers[i].view.data, ctx.buffers[i].data, buffers[i].view.bytes());
      };
    }
    if (!error) {
      try {
        run_body(s, ctx, body);
      } catch (...) {
        error = std::current_exception();
      }
    }
    s.pending.fetch_sub(1, std::memory_order_release);  // the transport is free before the wait returns
    if (error) work->fail(error);
    else if (write_back) work->complete(write_back);
    else work->complete();
  });
  if (s.config.waiter_runs_queued_op && !staged) work->set_runner(thread_->runner(ticket));
  return work;
}

void GroupRuntime::fail_in_flight(Shared& s, const std::exception_ptr& error) { s.in_flight->fail_all(error); }

const std::shared_ptr<InFlightOps>& GroupRuntime::in_flight() const { return shared_->in_flight; }

std::function<void(std::exception_ptr)> GroupRuntime::in_flight_failer() const {
  return [weak = std::weak_ptr<Shared>(shared_)](std::exception_ptr error) {
    if (auto shared = weak.lock()) fail_in_flight(*shared, error);
  };
}

}  // namespace fastrun
