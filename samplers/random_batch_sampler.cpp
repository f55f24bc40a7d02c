#include "fastrun/samplers/random_batch_sampler.h"

#include <algorithm>

namespace fastrun::samplers {

RandomBatchSampler::RandomBatchSampler(std::uint64_t n, std::uint64_t batch_size, bool shuffle, bool drop_last,
                                       std::uint64_t seed)
    : samples_(n, shuffle, seed), batch_size_(batch_size), drop_last_(drop_last) {
  check_batch_size(batch_size, "RandomBatchSampler");
}

void RandomBatchSampler::set_distributed(int num_replicas, int rank, bool pad) {
  samples_.set_distributed(num_replicas, rank, pad);
  batches_taken_ = 0;
}

void RandomBatchSampler::set_epoch(std::uint64_t epoch) {
  if (epoch == samples_.epoch()) return;
  samples_.set_epoch(epoch);
  batches_taken_ = 0;
}

std::uint64_t RandomBatchSampler::batches_of(std::uint64_t samples) const {
  return drop_last_ ? samples / batch_size_ : (samples + batch_size_ - 1) / batch_size_;
}

std::uint64_t RandomBatchSampler::num_batches() const { return batches_of(samples_.num_samples()); }
std::uint64_t RandomBatchSampler::num_batches_left() const { return num_batches() - batches_taken_; }
std::uint64_t RandomBatchSampler::batches_per_epoch() const { return batches_of(samples_.samples_per_epoch()); }

bool RandomBatchSampler::next_batch(std::vector<std::uint64_t>& out) {
  out.clear();
  if (num_batches_left() == 0) return false;
  out.resize(static_cast<std::size_t>(std::min(batch_size_, samples_.num_left())));
  samples_.next_into(out.data(), out.size());
  ++batches_taken_;
  return true;
}

std::string RandomBatchSampler::state() const { return state_after_batches(batches_taken_); }

std::string RandomBatchSampler::state_after_batches(std::uint64_t batches) const {
  const std::uint64_t yielded = std::min(batches, num_batches()) * batch_size_;
  return samples_.state_as(kind(), yielded, [&](StateWriter& w) {
    w.add_u64("batch_size", batch_size_).add_bool("drop_last", drop_last_);
  });
}

void RandomBatchSampler::load_state(const std::string& text) {
  samples_.load_state_as(text, kind(), [](const StateReader& r) {
    (void)r.u64("batch_size");  // informational: a different batch size on resume is accepted
    (void)r.boolean("drop_last");
  });
  batches_taken_ = 0;
}

}  // namespace fastrun::samplers
