// fastrun::torch::DistributedDataParallel (ddp.h): a LibTorch module's parameters handed to
// fastrun's DDP engine as raw buffers, the engine driven by autograd hooks.
//
// Why gradients live in our bucket tensors: the engine all-reduces a bucket in place when its
// gradients tile one contiguous range, so with each .grad() a slice of a flat bucket tensor
// there is no copy in and out per step. Autograd accumulates into an existing .grad() in place
// (AccumulateGrad with grad mode off), so the views stay bound step after step.
//
// Why the grad accumulator's post hook and not Tensor::register_hook: a tensor hook runs before
// the gradient is accumulated, so the last hook of a backward pass could not finish the step
// (autograd would still add into the gradient afterwards) and a bucket's all-reduce would race
// with that addition. The post hook runs after accumulation: the gradient is final. It is the
// mechanism PyTorch's own C++ Reducer uses, with the same signatures in 1.13 and 2.x (2.1 adds
// the public Tensor::register_post_accumulate_grad_hook for the same thing).
#include "fastrun/torch/ddp.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/cuda.h>

#include "fastrun/runtime/ddp/bucket_plan.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/objects/object_collectives.h"

namespace fastrun::torch {
namespace {

using ::torch::autograd::Node;
using ::torch::autograd::variable_list;

DType dtype_of_tensor(const at::Tensor& t, const std::string& name) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::float32;
    case at::kDouble: return DType::float64;
    case at::kHalf: return DType::float16;
    case at::kBFloat16: return DType::bfloat16;
    case at::kInt: return DType::int32;
    case at::kLong: return DType::int64;
    default:
      throw ConfigError(fmt::format("fastrun::torch::DistributedDataParallel: '{}' has dtype {}; supported: float32, "
                                    "float64, float16, bfloat16 (and int32, int64 for buffers)",
                                    name, c10::toString(t.scalar_type())));
  }
}

DeviceKind device_of_tensor(const at::Tensor& t, const std::string& name) {
  if (t.is_cpu()) return DeviceKind::cpu;
  if (t.is_cuda()) return DeviceKind::cuda;
  throw ConfigError(fmt::format("fastrun::torch::DistributedDataParallel: '{}' is on device {}; supported: cpu, cuda",
                                name, t.device().str()));
}

BufferView view_of_tensor(const at::Tensor& t, const std::string& name) {
  if (!t.is_contiguous())
    throw ConfigError(fmt::format(
        "fastrun::torch::DistributedDataParallel: '{}' is not contiguous (strides {}); make it contiguous first", name,
        fmt::join(t.strides(), ", ")));
  return BufferView{t.data_ptr(), static_cast<std::size_t>(t.numel()), dtype_of_tensor(t, name),
                    device_of_tensor(t, name)};
}

// "fc1.weight [64, 32] float32 on cpu": what must agree across ranks.
std::string describe(const std::string& kind, const std::string& name, const at::Tensor& t) {
  return fmt::format("{} '{}' [{}] {} on {}", kind, name, fmt::join(t.sizes(), ", "),
                     dtype_name(dtype_of_tensor(t, name)), t.is_cuda() ? "cuda" : "cpu");
}

// Every rank sees every rank's list, so every rank throws the same error (nobody waits).
void check_same_layout(Group& group, const std::vector<std::string>& mine) {
  const auto all = all_gather_object(mine, &group);
  std::size_t longest = 0;
  for (const auto& l : all) longest = std::max(longest, l.size());
  for (std::size_t k = 0; k < longest; ++k) {
    std::map<std::string, std::vector<int>> versions;
    for (std::size_t r = 0; r < all.size(); ++r)
      versions[k < all[r].size() ? all[r][k] : "nothing"].push_back(static_cast<int>(r));
    if (versions.size() == 1) continue;
    std::vector<std::string> parts;
    for (const auto& [what, ranks] : versions) parts.push_back(fmt::format("{} on ranks [{}]", what, fmt::join(ranks, ", ")));
    throw ConfigError(fmt::format(
        "fastrun::torch::DistributedDataParallel set-up on rank {}: the ranks' modules differ at entry {}: {}; "
        "every rank must build the same module (same parameter and buffer names, shapes, dtypes, in the same order)",
        group.rank(), k, fmt::join(parts, "; ")));
  }
}

}  // namespace

struct DistributedDataParallel::State {
  State(Group& g, DdpOptions o) : group(g), options(o) {}
  Group& group;
  DdpOptions options;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> arenas;  // one flat tensor per bucket
  std::vector<at::Tensor> slots;   // each parameter's gradient: a slice of its bucket's arena
  // Kept alive: autograd holds them weakly. A shared_ptr<Node> in LibTorch 1.x, an
  // intrusive_ptr<Node> in 2.x: the type is whatever grad_accumulator returns.
  std::vector<decltype(::torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()))> accumulators;
  std::vector<std::uintptr_t> hook_keys;
  std::unique_ptr<fastrun::DistributedDataParallel> engine;
  std::vector<bool> ready;
  std::size_t ready_count = 0;
  bool closed = false;  // a step was closed since the last finish()
  bool cuda = false;

  void on_gradient(std::size_t i);
  void bind(std::size_t i);
  void close_step();
  void abandon_step() noexcept;
  std::vector<std::string> missing() const;
  std::string unused_message(const std::vector<std::string>& unused) const;
};

namespace {

// Runs after autograd has accumulated parameter i's gradient.
class GradReadyHook final : public ::torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::weak_ptr<DistributedDataParallel::State> state, std::size_t index)
      : state_(std::move(state)), index_(index) {}
  variable_list operator()(const variable_list& outputs, const variable_list& /*inputs*/) override {
    if (auto state = state_.lock()) state->on_gradient(index_);
    return outputs;
  }

 private:
  std::weak_ptr<DistributedDataParallel::State> state_;
  std::size_t index_;
};

}  // namespace

void DistributedDataParallel::State::bind(std::size_t i) {
  ::torch::NoGradGuard no_grad;
  auto& p = params[i];
  const at::Tensor& g = p.grad();
  if (g.defined() && g.data_ptr() == slots[i].data_ptr() && g.sizes() == slots[i].sizes()) return;
  if (g.defined())
    slots[i].copy_(g);
  else
    slots[i].zero_();
  p.mutable_grad() = slots[i];
}

std::vector<std::string> DistributedDataParallel::State::missing() const {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < params.size(); ++k)
    if (!ready[k]) out.push_back(names[k]);
  return out;
}

std::string DistributedDataParallel::State::unused_message(const std::vector<std::string>& unused) const {
  const std::size_t shown = std::min<std::size_t>(unused.size(), 8);
  return fmt::format(
      "fastrun::torch::DistributedDataParallel on rank {}: {} parameter(s) got no gradient in this backward(): {}{} "
      "(unused in the forward pass?). Every rank must give every parameter a gradient in a synced step; with "
      "DdpOptions::unused_parameters = UnusedParameters::average, call ddp.finish() after backward() and they take "
      "part with their local gradient (zero when none)",
      group.rank(), unused.size(), fmt::join(unused.begin(), unused.begin() + static_cast<long>(shown), ", "),
      unused.size() > shown ? ", ..." : "");
}

void DistributedDataParallel::State::abandon_step() noexcept {
  // The engine waits for the launched buckets (the backend may be writing into them) and
  // resets; its own error about the missing gradients is replaced by ours.
  try {
    engine->finish();
  } catch (const std::exception&) {
  }
  std::fill(ready.begin(), ready.end(), false);
  ready_count = 0;
}

void DistributedDataParallel::State::on_gradient(std::size_t i) {
  if (!engine->syncing()) return;  // no_sync(): autograd accumulated into .grad(), nothing else
  if (ready[i]) {
    // A new backward() while the previous step is still open: it had unused parameters and
    // nobody called finish().
    const auto unused = missing();
    abandon_step();
    throw Error(unused_message(unused) + " [reported at the next backward(): finish() was not called]");
  }
  bind(i);
  if (cuda) ::torch::cuda::synchronize();  // the gradient kernels ran on torch's stream, nccl runs on its own
  ready[i] = true;
  ++ready_count;
  engine->mark_ready(i);
  if (ready_count == params.size()) close_step();
}

void DistributedDataParallel::State::close_step() {
  std::fill(ready.begin(), ready.end(), false);
  ready_count = 0;
  closed = true;
  engine->finish();  // every gradient (a slice of a reduced bucket) now holds the average
}

DistributedDataParallel::DistributedDataParallel(Group& group, std::shared_ptr<::torch::nn::Module> module,
                                                 DdpOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>(group, options)) {
  if (!module_) throw ConfigError("fastrun::torch::DistributedDataParallel: the module is null");
  auto& s = *state_;
  std::vector<std::string> layout;
  std::vector<std::pair<std::string, at::Tensor>> broadcast_only;  // buffers and frozen parameters
  std::vector<const void*> seen;  // a tensor registered under two names (shared weights) counts once
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const void* impl = item.value().unsafeGetTensorImpl();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) continue;
    seen.push_back(impl);
    layout.push_back(describe("parameter", item.key(), item.value()));
    if (item.value().requires_grad()) {
      s.names.push_back(item.key());
      s.params.push_back(item.value());
    } else {
      broadcast_only.emplace_back(item.key(), item.value());
    }
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    layout.push_back(describe("buffer", item.key(), item.value()));
    if (options.broadcast_buffers) broadcast_only.emplace_back(item.key(), item.value());
  }
  if (s.params.empty())
    throw ConfigError("fastrun::torch::DistributedDataParallel: the module has no parameter that requires a gradient");
  // Local checks (dtype, device, contiguity) before anything collective, then the layouts.
  std::vector<ddp::ParamLayout> layouts;
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    const auto v = view_of_tensor(s.params[i], s.names[i]);
    if (v.dtype == DType::int32 || v.dtype == DType::int64)
      throw ConfigError(fmt::format("fastrun::torch::DistributedDataParallel: parameter '{}' has an integer dtype",
                                    s.names[i]));
    layouts.push_back({v.count, v.dtype, v.device});
    if (v.device == DeviceKind::cuda) s.cuda = true;
  }
  for (const auto& [name, t] : broadcast_only) view_of_tensor(t, name);
  check_same_layout(group, layout);

  // The gradients' home: one flat tensor per bucket, laid out by the plan the engine computes
  // from the same layouts (so it reduces every bucket in place).
  const auto plan = ddp::plan_buckets(layouts, options.first_bucket_bytes, options.bucket_bytes);
  s.slots.resize(s.params.size());
  for (const auto& bucket : plan) {
    const auto& first = s.params[bucket.params.front()];
    s.arenas.push_back(at::zeros({static_cast<std::int64_t>(bucket.count)}, first.options().requires_grad(false)));
    for (std::size_t k = 0; k < bucket.params.size(); ++k) {
      const auto& p = s.params[bucket.params[k]];
      // Shares the arena's storage without being an autograd view: optimizers call detach_()
      // on gradients (zero_grad), which a view refuses.
      s.slots[bucket.params[k]] = at::empty({0}, s.arenas.back().options())
                                      .set_(s.arenas.back().storage(), static_cast<std::int64_t>(bucket.offsets[k]),
                                            p.sizes(), {});
    }
  }
  std::vector<DdpParameter> engine_params;
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    s.bind(i);
    engine_params.push_back({s.names[i], view_of_tensor(s.params[i], s.names[i]), view_of_tensor(s.slots[i], s.names[i])});
  }
  fastrun::DdpOptions engine_options;
  engine_options.first_bucket_bytes = options.first_bucket_bytes;
  engine_options.bucket_bytes = options.bucket_bytes;
  // No scaling kernel for device memory in fastrun: nccl averages there.
  engine_options.reduce = s.cuda ? ReduceOp::avg : ReduceOp::sum;
  engine_options.timeout = options.timeout;
  if (s.cuda) ::torch::cuda::synchronize();  // initialisation kernels done before nccl reads the values
  s.engine = std::make_unique<fastrun::DistributedDataParallel>(group, std::move(engine_params), engine_options);
  for (const auto& [name, t] : broadcast_only) {
    ::torch::NoGradGuard no_grad;
    group.broadcast(view_of_tensor(t, name), BroadcastOptions{0})->wait(options.timeout);
  }

  s.ready.assign(s.params.size(), false);
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    s.accumulators.push_back(::torch::autograd::impl::grad_accumulator(s.params[i]));
    s.hook_keys.push_back(s.accumulators.back()->add_post_hook(std::make_unique<GradReadyHook>(state_, i)));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (std::size_t i = 0; i < state_->accumulators.size(); ++i) state_->accumulators[i]->del_post_hook(state_->hook_keys[i]);
  if (step_open()) state_->abandon_step();
}

void DistributedDataParallel::finish() {
  auto& s = *state_;
  if (!s.engine->syncing()) return;
  const bool closed = std::exchange(s.closed, false);
  if (!step_open() && (closed || s.options.unused_parameters == UnusedParameters::error)) return;
  // Open, or (average) no gradient at all on this rank since the last finish(): the others
  // may be waiting for its buckets.
  if (s.options.unused_parameters == UnusedParameters::error) {
    const auto unused = s.missing();
    s.abandon_step();
    throw Error(s.unused_message(unused));
  }
  for (std::size_t k = s.params.size(); k-- > 0;) {
    if (s.ready[k]) continue;
    s.bind(k);
    s.ready[k] = true;
    ++s.ready_count;
    s.engine->mark_ready(k);
  }
  s.close_step();
}

bool DistributedDataParallel::step_open() const { return state_->ready_count > 0; }

fastrun::DistributedDataParallel& DistributedDataParallel::engine() { return *state_->engine; }

std::size_t DistributedDataParallel::num_parameters() const { return state_->params.size(); }

}  // namespace fastrun::torch
