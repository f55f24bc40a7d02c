#include "fastrun/samplers/random_batch_sampler.h"

#include <algorithm>

namespace fastrun::samplers {

RandomBatchSampler::RandomBatchSampler(std::uint64_t n, std::uint64_t batch_size, bool shuffle, bool drop_last,
                                       std::uint64_t seed)
    : OrderBatchSampler(RandomSampler(n, shuffle, seed), batch_size, drop_last, "RandomBatchSampler") {}

void RandomBatchSampler::set_distributed(int num_replicas, int rank, bool pad) {
  samples_.set_distributed(num_replicas, rank, pad);
  batches_taken_ = 0;
}

void RandomBatchSampler::set_epoch(std::uint64_t epoch) {
  if (epoch == samples_.epoch()) return;
  samples_.set_epoch(epoch);
  batches_taken_ = 0;
}

std::string RandomBatchSampler::state_after_batches(std::uint64_t batches) const {
  return samples_.state_as(kind(), yielded_after(batches), [&](StateWriter& w) {
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
