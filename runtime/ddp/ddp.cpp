#include "fastrun/runtime/ddp/buffer_ops.h"
#include "fastrun/runtime/ddp/ddp.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/ddp/layout_check.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"

namespace fastrun {

struct DistributedDataParallel::BucketState {
  ddp::FlatBuffer buffer;    // empty when the bucket is reduced in place
  void* in_place = nullptr;  // start of the caller's contiguous gradients, when they are
  std::size_t pending = 0;  // gradients not yet marked ready this step
  bool average_in_backend = false;
  WorkHandle work;
  DdpBucketStats stats;
};

namespace {

bool is_float(DType t) {
  return t == DType::float32 || t == DType::float64 || t == DType::float16 || t == DType::bfloat16;
}

void validate(const std::vector<DdpParameter>& params, const DdpOptions& options, int rank) {
  if (options.first_bucket_bytes == 0 || options.bucket_bytes == 0)
    throw ConfigError(fmt::format("DDP on rank {}: bucket sizes must be > 0 (got first_bucket_bytes={}, "
                                  "bucket_bytes={})",
                                  rank, options.first_bucket_bytes, options.bucket_bytes));
  if (options.reduce != ReduceOp::sum && options.reduce != ReduceOp::avg)
    throw ConfigError(fmt::format("DDP on rank {}: reduce op '{}' is not accepted; use sum (pre-divided) or avg",
                                  rank, reduce_op_name(options.reduce)));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    if (p.value.count != p.grad.count || p.value.dtype != p.grad.dtype || p.value.device != p.grad.device)
      throw ConfigError(fmt::format("DDP on rank {}: parameter {} ('{}'): value is {} but gradient is {}; they "
                                    "must match",
                                    rank, i, p.name,
                                    ddp::describe_layout({p.value.count, p.value.dtype, p.value.device}),
                                    ddp::describe_layout({p.grad.count, p.grad.dtype, p.grad.device})));
    if (!is_float(p.value.dtype))
      throw ConfigError(fmt::format("DDP on rank {}: parameter {} ('{}') has dtype {}; accepted: float32, "
                                    "float64, float16, bfloat16",
                                    rank, i, p.name, dtype_name(p.value.dtype)));
    if (p.value.count > 0 && (!p.value.data || !p.grad.data))
      throw ConfigError(fmt::format("DDP on rank {}: parameter {} ('{}') has a null buffer", rank, i, p.name));
  }
}

std::byte* at(const ddp::FlatBuffer& b, std::size_t elem, DType t) {
  return static_cast<std::byte*>(b.data()) + elem * dtype_size(t);
}

// When the views of a bucket's parameters lie back to back in memory in the bucket's element
// order (ascending registration order, bucket_plan.h), their start; else nullptr. Such a bucket
// has exactly the flat buffer's layout already — the same on every rank, whether a rank reduces
// in place or copies — so it can be all-reduced where it is, with no copy in or out.
void* contiguous_start(const ddp::BucketPlan& plan, const std::vector<DdpParameter>& params, bool grads) {
  std::byte* start = nullptr;
  std::byte* next = nullptr;
  for (auto k : plan.params) {
    const BufferView& v = grads ? params[k].grad : params[k].value;
    auto* p = static_cast<std::byte*>(v.data);
    if (!start) start = next = p;
    if (p != next) return nullptr;
    next = p + v.bytes();
  }
  return start;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(Backend& group, std::vector<DdpParameter> params,
                                                 DdpOptions options)
    : group_(group), params_(std::move(params)), options_(options) {
  setup();
}

void DistributedDataParallel::setup() {
  // 1. Local validation: matching value/gradient buffers, float dtypes, sane options.
  validate(params_, options_, group_.rank());

  // 2. Every rank registered the same layout (collective; throws the same error everywhere).
  std::vector<ddp::ParamLayout> layouts;
  std::vector<std::string> names;
  for (auto& p : params_) {
    layouts.push_back({p.value.count, p.value.dtype, p.value.device});
    names.push_back(p.name);
  }
  ddp::verify_same_layout(group_, layouts, names, timeout());

  // 3. Buckets: the same plan on every rank, since it depends only on the (checked) layout.
  plan_ = ddp::plan_buckets(layouts, options_.first_bucket_bytes, options_.bucket_bytes);
  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  buckets_.resize(plan_.size());
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    buckets_[b].in_place = options_.reduce_in_place ? contiguous_start(plan_[b], params_, true) : nullptr;
    if (!buckets_[b].in_place) buckets_[b].buffer = ddp::FlatBuffer(plan_[b].bytes(), plan_[b].device);
    // Device buckets are averaged by the backend: fastrun has no scaling kernel.
    buckets_[b].average_in_backend = options_.reduce == ReduceOp::avg || plan_[b].device == DeviceKind::cuda;
    for (std::size_t s = 0; s < plan_[b].params.size(); ++s) {
      bucket_of_[plan_[b].params[s]] = b;
      slot_of_[plan_[b].params[s]] = s;
    }
  }
  ready_.assign(params_.size(), false);
  reset_step();

  // 4. Start from rank 0's values.
  if (options_.broadcast_parameters) broadcast_parameters();
  log::debug("DDP: {} parameters in {} buckets (first cap {} B, cap {} B), world {}", params_.size(), plan_.size(),
             options_.first_bucket_bytes, options_.bucket_bytes, group_.size());
}

DistributedDataParallel::~DistributedDataParallel() { wait_launched(); }

void DistributedDataParallel::broadcast_parameters() {
  if (group_.size() == 1) return;
  // Coalesced: one broadcast per bucket, in place when the values are contiguous, else through
  // the bucket's flat buffer (or a temporary one, for a bucket reduced in place).
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    const auto& plan = plan_[b];
    if (void* start = contiguous_start(plan, params_, false)) {
      group_.broadcast(BufferView{start, plan.count, plan.dtype, plan.device}, BroadcastOptions{0})->wait(timeout());
      continue;
    }
    ddp::FlatBuffer temporary;
    if (!buckets_[b].buffer.data()) temporary = ddp::FlatBuffer(plan.bytes(), plan.device);
    auto& buf = buckets_[b].buffer.data() ? buckets_[b].buffer : temporary;
    for (std::size_t s = 0; s < plan.params.size(); ++s) {
      const auto& v = params_[plan.params[s]].value;
      ddp::copy_scaled(at(buf, plan.offsets[s], plan.dtype), v.data, v.count, v.dtype, v.device, 1.0);
    }
    group_.broadcast(BufferView{buf.data(), plan.count, plan.dtype, plan.device}, BroadcastOptions{0})
        ->wait(timeout());
    if (group_.rank() == 0) continue;
    for (std::size_t s = 0; s < plan.params.size(); ++s) {
      const auto& v = params_[plan.params[s]].value;
      ddp::copy_scaled(v.data, at(buf, plan.offsets[s], plan.dtype), v.count, v.dtype, v.device, 1.0);
    }
  }
}

double DistributedDataParallel::since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
}

void DistributedDataParallel::mark_ready(std::size_t i) {
  if (i >= params_.size())
    throw ConfigError(fmt::format("DDP on rank {}: mark_ready({}): no such parameter (there are {})", group_.rank(),
                                  i, params_.size()));
  if (!sync_) return;  // no_sync: the caller accumulates locally
  if (!step_started_) {
    step_started_ = true;
    step_start_ = std::chrono::steady_clock::now();
  }
  if (ready_[i])
    throw Error(fmt::format("DDP on rank {}: parameter {} ('{}') was marked ready twice in one step", group_.rank(),
                            i, params_[i].name));
  ready_[i] = true;
  const std::size_t b = bucket_of_[i];
  auto& bucket = buckets_[b];
  const auto& plan = plan_[b];
  const auto& g = params_[i].grad;
  // With reduce=sum the gradients are pre-divided by the world size, but as part of the bucket's
  // all-reduce (AllReduceOptions::prescale, the same multiplication as a scaled copy, so the same
  // bits): on the backend's comm thread, not here on the caller's, which computes meanwhile.
  if (!bucket.in_place)
    ddp::copy_scaled(at(bucket.buffer, plan.offsets[slot_of_[i]], plan.dtype), g.data, g.count, g.dtype, g.device, 1.0);
  if (--bucket.pending == 0) {
    bucket.stats.ready_s = since_start();
    launch_ready_buckets();
  }
}

void DistributedDataParallel::mark_all_ready() {
  if (!sync_) return;
  for (std::size_t k = params_.size(); k-- > 0;)
    if (!ready_[k]) mark_ready(k);
}

void DistributedDataParallel::launch_ready_buckets() {
  // Strictly in bucket-index order: a ready bucket behind an unready one waits its turn.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    auto& bucket = buckets_[next_launch_];
    const auto& plan = plan_[next_launch_];
    AllReduceOptions op;
    op.op = bucket.average_in_backend ? ReduceOp::avg : ReduceOp::sum;
    op.prescale = bucket.average_in_backend ? 1.0 : 1.0 / group_.size();
    void* data = bucket.in_place ? bucket.in_place : bucket.buffer.data();
    bucket.work = group_.all_reduce(BufferView{data, plan.count, plan.dtype, plan.device}, op);
    bucket.stats.launched_s = since_start();
    ++next_launch_;
  }
}

void DistributedDataParallel::finish() {
  if (!sync_) return;  // no_sync: nothing to reduce yet
  if (next_launch_ < buckets_.size()) {
    // Some gradient was never marked ready: name them instead of waiting for ever.
    std::vector<std::string> missing;
    for (std::size_t k = 0; k < params_.size(); ++k)
      if (!ready_[k]) missing.push_back(fmt::format("{} ('{}')", k, params_[k].name));
    wait_launched();
    reset_step();
    const std::size_t shown = std::min<std::size_t>(missing.size(), 8);
    throw Error(fmt::format(
        "DDP on rank {}: finish(): {} parameter(s) never marked ready in this synced step: {}{}. Call "
        "mark_ready() for every parameter each step (mark_all_ready() marks the rest; give an unused "
        "parameter a zero gradient), or run the step inside no_sync()",
        group_.rank(), missing.size(), fmt::join(missing.begin(), missing.begin() + static_cast<long>(shown), ", "),
        missing.size() > shown ? ", ..." : ""));
  }
  try {
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      auto& bucket = buckets_[b];
      const auto& plan = plan_[b];
      bucket.work->wait(timeout());
      bucket.work.reset();
      for (std::size_t s = 0; !bucket.in_place && s < plan.params.size(); ++s) {
        const auto& g = params_[plan.params[s]].grad;
        ddp::copy_scaled(g.data, at(bucket.buffer, plan.offsets[s], plan.dtype), g.count, g.dtype, g.device, 1.0);
      }
      bucket.stats.done_s = since_start();
    }
  } catch (...) {
    wait_launched();
    reset_step();
    throw;
  }
  stats_.clear();
  for (auto& bucket : buckets_) stats_.push_back(bucket.stats);
  reset_step();
}

void DistributedDataParallel::wait_launched() noexcept {
  // The backend may still be writing into a bucket: never free or refill one in flight.
  for (auto& bucket : buckets_) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait(timeout());
    } catch (const std::exception& e) {
      log::warn("DDP: abandoning an in-flight bucket all-reduce: {}", e.what());
    }
    bucket.work.reset();
  }
}

void DistributedDataParallel::reset_step() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].pending = plan_[b].params.size();
    buckets_[b].work.reset();
    buckets_[b].stats = DdpBucketStats{b, plan_[b].params.size(), plan_[b].bytes(), buckets_[b].in_place != nullptr, 0, 0, 0};
  }
  next_launch_ = 0;
  step_started_ = false;
}

bool DistributedDataParallel::begin_no_sync() {
  if (step_started_)
    throw Error(fmt::format("DDP on rank {}: no_sync() entered in the middle of a synced step (after mark_ready, "
                            "before finish)",
                            group_.rank()));
  return std::exchange(sync_, false);
}

}  // namespace fastrun
