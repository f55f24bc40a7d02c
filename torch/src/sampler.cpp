#include "fastrun/torch/sampler.h"

#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <torch/serialize/archive.h>

#include "fastrun/runtime/error.h"
#include "fastrun/samplers/error.h"

namespace fastrun::torch {

namespace {
constexpr const char* kArchiveKey = "fastrun_sampler_state";
}  // namespace

// One of the two wrapped kinds, and what the current pass has handed out.
struct DistributedSampler::Shared {
  std::unique_ptr<samplers::ReproducibleSampler> index;
  std::unique_ptr<samplers::BatchSampler> batch;
  bool keep_position = false;  // load_state happened: the next reset() continues from there
  // Index sampler: yielded() of the current share when this pass began, and after each batch.
  std::uint64_t pass_start = 0;
  std::vector<std::uint64_t> ends;
  // Batch sampler: batches of the current share yielded when this pass began, and since.
  std::uint64_t batch_pass_start = 0;
  std::size_t batches = 0;

  std::size_t handed_out() const { return index ? ends.size() : batches; }
  // A pass begins where the sampler now stands (after reset, load_state or a new epoch).
  void begin_pass() {
    if (index) {
      pass_start = index->yielded();
      ends.clear();
    } else {
      batch_pass_start = batch->num_batches() - batch->num_batches_left();
      batches = 0;
    }
  }
};

DistributedSampler::DistributedSampler(std::unique_ptr<samplers::ReproducibleSampler> sampler)
    : s_(std::make_shared<Shared>()) {
  if (!sampler) throw ConfigError("fastrun::torch::DistributedSampler: the wrapped sampler is null");
  s_->index = std::move(sampler);
  s_->begin_pass();
}

DistributedSampler::DistributedSampler(std::unique_ptr<samplers::BatchSampler> sampler)
    : s_(std::make_shared<Shared>()) {
  if (!sampler) throw ConfigError("fastrun::torch::DistributedSampler: the wrapped batch sampler is null");
  s_->batch = std::move(sampler);
  s_->begin_pass();
}

samplers::ReproducibleSampler* DistributedSampler::index_sampler() const { return s_->index.get(); }
samplers::BatchSampler* DistributedSampler::batch_sampler() const { return s_->batch.get(); }

std::uint64_t DistributedSampler::epoch() const { return s_->index ? s_->index->epoch() : s_->batch->epoch(); }

void DistributedSampler::set_epoch(std::uint64_t epoch) {
  if (epoch == this->epoch()) return;  // the epoch in use keeps its position (and its pass)
  if (s_->index) s_->index->set_epoch(epoch);
  else s_->batch->set_epoch(epoch);
  s_->keep_position = false;
  s_->begin_pass();
}

std::string DistributedSampler::state() const { return s_->index ? s_->index->state() : s_->batch->state(); }

std::size_t DistributedSampler::batches_handed_out() const { return s_->handed_out(); }

std::string DistributedSampler::state_after_batches(std::size_t k) const {
  if (k > s_->handed_out())
    throw samplers::SamplerError(fmt::format("DistributedSampler::state_after_batches({}): only {} batch(es) of this "
                                             "pass were handed out; pass how many the model has consumed",
                                             k, s_->handed_out()));
  if (s_->index) return s_->index->state_after(k == 0 ? s_->pass_start : s_->ends[k - 1]);
  return s_->batch->state_after_batches(s_->batch_pass_start + k);
}

void DistributedSampler::load_state(const std::string& text) {
  if (s_->index) s_->index->load_state(text);
  else s_->batch->load_state(text);
  s_->keep_position = true;
  s_->begin_pass();
}

void DistributedSampler::reset(c10::optional<std::size_t> new_size) {
  if (new_size && s_->index && *new_size != s_->index->size())
    throw ConfigError(fmt::format("fastrun::torch::DistributedSampler::reset: new size {} but the wrapped {} has {} "
                                  "samples; build a new sampler for another dataset size",
                                  *new_size, s_->index->kind(), s_->index->size()));
  if (s_->keep_position) {
    s_->keep_position = false;  // this pass continues the restored position
  } else if (s_->index) {
    s_->index->restart_epoch();
  } else {
    // BatchSampler has no restart: leaving the epoch and coming back starts it from its
    // beginning (the set_epoch rule), laid out for the current ranks.
    const std::uint64_t e = s_->batch->epoch();
    s_->batch->set_epoch(e + 1);
    s_->batch->set_epoch(e);
  }
  s_->begin_pass();
}

c10::optional<std::vector<std::size_t>> DistributedSampler::next(std::size_t batch_size) {
  if (batch_size == 0)
    throw ConfigError("fastrun::torch::DistributedSampler: the data loader asked for batch_size 0; use >= 1");
  std::vector<std::size_t> out;
  if (s_->index) {
    out.resize(batch_size);
    std::size_t k = 0;
    if constexpr (std::is_same_v<std::size_t, std::uint64_t>) {
      k = s_->index->next_into(out.data(), batch_size);
    } else {
      std::vector<std::uint64_t> tmp(batch_size);
      k = s_->index->next_into(tmp.data(), batch_size);
      for (std::size_t i = 0; i < k; ++i) out[i] = static_cast<std::size_t>(tmp[i]);
    }
    if (k == 0) return c10::nullopt;
    out.resize(k);
    s_->ends.push_back(s_->index->yielded());
    return out;
  }
  if (batch_size != s_->batch->batch_size())
    throw ConfigError(fmt::format("fastrun::torch::DistributedSampler: the data loader's batch_size is {} but the "
                                  "wrapped {} makes batches of {}; set DataLoaderOptions().batch_size({})",
                                  batch_size, s_->batch->kind(), s_->batch->batch_size(), s_->batch->batch_size()));
  std::vector<std::uint64_t> b;
  if (!s_->batch->next_batch(b)) return c10::nullopt;
  out.assign(b.begin(), b.end());
  ++s_->batches;
  return out;
}

void DistributedSampler::save(::torch::serialize::OutputArchive& archive) const {
  archive.write(kArchiveKey, c10::IValue(state()));
}

void DistributedSampler::load(::torch::serialize::InputArchive& archive) {
  c10::IValue v;
  if (!archive.try_read(kArchiveKey, v) || !v.isString())
    throw samplers::SamplerError(fmt::format("DistributedSampler::load: the archive has no string '{}' (it was not "
                                             "written by DistributedSampler::save)",
                                             kArchiveKey));
  load_state(v.toStringRef());
}

}  // namespace fastrun::torch
