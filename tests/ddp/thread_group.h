#pragma once
// A Backend whose ranks are threads of one process (test level 1: logic with ranks as
// threads). Collectives are synchronous rendezvous on a shared hub; each rank also logs what it
// issued (op and element count), so tests can compare the sequence every rank issued.
// Every wait has a deadline: a rank that never arrives fails the others with TimeoutError.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/ddp/buffer_ops.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"
#include "fastrun/runtime/process_group/shape_check.h"

namespace fastrun::test {

// Catch2 v2 assertions are not thread-safe: rank threads assert through T_REQUIRE & co., which
// serialise them on this mutex (a failed one throws out of the lock; run_thread_ranks rethrows
// it on the test's thread).
inline std::mutex& catch_mutex() {
  static std::mutex m;
  return m;
}
#define FASTRUN_T_LOCKED(...)                                              \
  do {                                                                      \
    std::lock_guard<std::mutex> catch_lock_(fastrun::test::catch_mutex()); \
    __VA_ARGS__;                                                            \
  } while (0)
#define T_REQUIRE(...) FASTRUN_T_LOCKED(REQUIRE(__VA_ARGS__))
#define T_REQUIRE_FALSE(...) FASTRUN_T_LOCKED(REQUIRE_FALSE(__VA_ARGS__))
#define T_FAIL(...) FASTRUN_T_LOCKED(FAIL(__VA_ARGS__))
#define T_CHECK_THROWS_AS(...) FASTRUN_T_LOCKED(CHECK_THROWS_AS(__VA_ARGS__))
#define T_CHECK_THROWS_WITH(...) FASTRUN_T_LOCKED(CHECK_THROWS_WITH(__VA_ARGS__))

class ThreadHub {
 public:
  explicit ThreadHub(int size) : in_(size), out_(size), size_(size) {}
  int size() const { return size_; }

  void arrive(int rank) {
    std::unique_lock lock(mutex_);
    const auto gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return generation_ != gen; }))
      throw TimeoutError(fmt::format("thread group: rank {} waited 20 s for the other ranks", rank));
  }
  std::vector<BufferView> in_, out_;

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  long generation_ = 0;
};

class DoneWork : public Work {
 public:
  void wait(Duration) override {}
  bool completed() override { return true; }
};

inline double load(const BufferView& b, std::size_t i) {
  switch (b.dtype) {
    case DType::float32: return static_cast<const float*>(b.data)[i];
    case DType::float64: return static_cast<const double*>(b.data)[i];
    case DType::float16: return ddp::half_to_float(static_cast<const std::uint16_t*>(b.data)[i]);
    case DType::bfloat16: return ddp::bf16_to_float(static_cast<const std::uint16_t*>(b.data)[i]);
    case DType::int32: return static_cast<const std::int32_t*>(b.data)[i];
    case DType::int64: return static_cast<double>(static_cast<const std::int64_t*>(b.data)[i]);
  }
  return 0;
}

inline void store(const BufferView& b, std::size_t i, double v) {
  switch (b.dtype) {
    case DType::float32: static_cast<float*>(b.data)[i] = static_cast<float>(v); return;
    case DType::float64: static_cast<double*>(b.data)[i] = v; return;
    case DType::float16: static_cast<std::uint16_t*>(b.data)[i] = ddp::float_to_half(static_cast<float>(v)); return;
    case DType::bfloat16: static_cast<std::uint16_t*>(b.data)[i] = ddp::float_to_bf16(static_cast<float>(v)); return;
    case DType::int32: static_cast<std::int32_t*>(b.data)[i] = static_cast<std::int32_t>(v); return;
    case DType::int64: static_cast<std::int64_t*>(b.data)[i] = static_cast<std::int64_t>(v); return;
  }
}

class ThreadGroup : public Backend {
 public:
  ThreadGroup(std::shared_ptr<ThreadHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  std::string backend_name() const override { return "threads"; }

  // Reduces with the CPU backends' kernel in rank order, so the bits are what shm and gloo give.
  WorkHandle all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) override {
    issued.push_back(fmt::format("all_reduce {} {}", buffer.count, dtype_name(buffer.dtype)));
    apply_prescale(buffer, options.prescale);  // DDP's pre-division, as the CPU backends do it
    hub_->in_[rank_] = buffer;
    hub_->arrive(rank_);
    std::vector<const void*> srcs;
    for (int r = 0; r < size(); ++r) srcs.push_back(hub_->in_[r].data);
    std::vector<std::uint8_t> result(buffer.bytes());
    kernels::reduce(buffer.dtype, options.op, result.data(), nullptr, srcs.data(), size(), buffer.count);
    hub_->arrive(rank_);  // everyone has read the inputs: outputs may be written
    if (!result.empty()) std::memcpy(buffer.data, result.data(), result.size());
    return std::make_shared<DoneWork>();
  }
  WorkHandle broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) override {
    issued.push_back(fmt::format("broadcast {} {}", buffer.count, dtype_name(buffer.dtype)));
    return run(buffer, buffer, [&](std::vector<double>& out) {
      out.resize(buffer.count);
      for (std::size_t i = 0; i < buffer.count; ++i) out[i] = load(hub_->in_[options.root], i);
    });
  }
  WorkHandle all_gather(const Op& call, BufferView input, BufferView output, const AllGatherOptions&) override {
    issued.push_back(fmt::format("all_gather {} {}", input.count, dtype_name(input.dtype)));
    return run(input, output, [&](std::vector<double>& out) {
      for (int r = 0; r < size(); ++r)
        for (std::size_t i = 0; i < hub_->in_[r].count; ++i) out.push_back(load(hub_->in_[r], i));
    });
  }
  WorkHandle reduce_scatter(const Op& call, BufferView, BufferView, const ReduceScatterOptions&) override {
    throw BackendError("thread group: reduce_scatter not implemented");
  }
  WorkHandle barrier(const Op& call, const BarrierOptions&) override {
    hub_->arrive(rank_);
    return std::make_shared<DoneWork>();
  }
  // DDP uses none of these.
  WorkHandle send(const Op& call, BufferView, int, const SendOptions&) override { return unused("send"); }
  WorkHandle recv(const Op& call, BufferView, int, const RecvOptions&) override { return unused("recv"); }
  WorkHandle batch_send_recv(const Op& call, const std::vector<P2POp>&) override { return unused("batch_send_recv"); }
  WorkHandle reduce(const Op& call, BufferView, const ReduceOptions&) override { return unused("reduce"); }
  WorkHandle gather(const Op& call, BufferView, BufferView, const GatherOptions&) override { return unused("gather"); }
  WorkHandle scatter(const Op& call, BufferView, BufferView, const ScatterOptions&) override { return unused("scatter"); }
  WorkHandle all_to_all(const Op& call, BufferView, BufferView, const AllToAllOptions&) override { return unused("all_to_all"); }
  WorkHandle all_to_allv(const Op& call, BufferView, const std::vector<std::size_t>&, BufferView, const std::vector<std::size_t>&,
                         const AllToAllOptions&) override {
    return unused("all_to_allv");
  }
  static WorkHandle unused(const char* op) { throw BackendError(fmt::format("thread group: {} not implemented", op)); }

  std::vector<std::string> issued;

 private:
  WorkHandle run(BufferView in, BufferView out, const std::function<void(std::vector<double>&)>& compute) {
    hub_->in_[rank_] = in;
    hub_->arrive(rank_);
    std::vector<double> result;
    compute(result);
    hub_->arrive(rank_);  // everyone has read the inputs: outputs may be written
    for (std::size_t i = 0; i < result.size(); ++i) store(out, i, result[i]);
    return std::make_shared<DoneWork>();
  }
  std::shared_ptr<ThreadHub> hub_;
  int rank_;
};

// Runs body(group) on `size` threads; rethrows the first exception after joining all.
inline void run_thread_ranks(int size, const std::function<void(ThreadGroup&)>& body) {
  auto hub = std::make_shared<ThreadHub>(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      ThreadGroup group(hub, r);
      try {
        body(group);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace fastrun::test
