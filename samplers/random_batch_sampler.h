#pragma once
// RandomBatchSampler(n, batch_size, shuffle, drop_last, seed): the RandomSampler order for
// (seed, epoch), shared across ranks by the global stride rule, each rank's share cut into
// batches. Decision (fastNLP keeps each rank's samples fixed, index = r mod R, and shuffles only
// inside a rank): here the whole dataset is shuffled each epoch, so which rank sees which sample
// changes every epoch, exactly as a RandomSampler under the same seed would give.
// Resume: the state counts consumed samples globally; another R or another batch size after a
// restore is accepted, and saving again (also twice in one resumed epoch) records the absolute
// position.
#include <cstdint>

#include "fastrun/samplers/order_batch_sampler.h"
#include "fastrun/samplers/random_sampler.h"

namespace fastrun::samplers {

class RandomBatchSampler : public OrderBatchSampler<RandomSampler> {
 public:
  RandomBatchSampler(std::uint64_t n, std::uint64_t batch_size, bool shuffle = true, bool drop_last = false,
                     std::uint64_t seed = 0);
  std::string_view kind() const override { return "RandomBatchSampler"; }

  void set_distributed(int num_replicas, int rank, bool pad) override;
  void set_epoch(std::uint64_t epoch) override;

  std::string state_after_batches(std::uint64_t batches) const override;
  // Kind, n and (when saved) the same dataset size must match; seed, shuffle, epoch and the
  // position come from the state; batch size and drop_last stay this sampler's own.
  void load_state(const std::string& text) override;
};

}  // namespace fastrun::samplers
