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

#include "fastrun/samplers/batch_sampler.h"
#include "fastrun/samplers/random_sampler.h"

namespace fastrun::samplers {

class RandomBatchSampler : public BatchSampler {
 public:
  RandomBatchSampler(std::uint64_t n, std::uint64_t batch_size, bool shuffle = true, bool drop_last = false,
                     std::uint64_t seed = 0);
  std::string_view kind() const override { return "RandomBatchSampler"; }

  void set_distributed(int num_replicas, int rank, bool pad) override;
  void set_epoch(std::uint64_t epoch) override;
  std::uint64_t epoch() const override { return samples_.epoch(); }
  std::uint64_t batch_size() const override { return batch_size_; }
  bool drop_last() const { return drop_last_; }
  bool next_batch(std::vector<std::uint64_t>& out) override;

  std::uint64_t num_batches() const override;
  std::uint64_t num_batches_left() const override;
  std::uint64_t batches_per_epoch() const override;
  std::uint64_t consumed() const override { return samples_.consumed(); }

  std::string state() const override;
  std::string state_after_batches(std::uint64_t batches) const override;
  // Kind, n and (when saved) the same dataset size must match; seed, shuffle, epoch and the
  // position come from the state; batch size and drop_last stay this sampler's own.
  void load_state(const std::string& text) override;

  const RandomSampler& samples() const { return samples_; }

 private:
  std::uint64_t batches_of(std::uint64_t samples) const;
  RandomSampler samples_;
  std::uint64_t batch_size_;
  bool drop_last_;
  std::uint64_t batches_taken_ = 0;
};

}  // namespace fastrun::samplers
