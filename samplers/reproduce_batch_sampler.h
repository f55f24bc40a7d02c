#pragma once
// ReproduceBatchSampler: makes any batch source resumable on one process. It records the
// source's epoch as a flat index list (the source is asked once per epoch: at construction for
// epoch 0 and at each set_epoch to a new epoch) and yields batches of batch_size from it. Its
// state holds the whole list, so a non-reproducible source resumes exactly. A different batch
// size on resume is accepted. set_distributed is an error (use the distributed samplers).
#include <cstdint>
#include <functional>
#include <vector>

#include "fastrun/samplers/batch_sampler.h"

namespace fastrun::samplers {

class ReproduceBatchSampler : public BatchSampler {
 public:
  // The wrapped source: the epoch's batches, flattened into one index list.
  using Source = std::function<std::vector<std::uint64_t>(std::uint64_t epoch)>;

  ReproduceBatchSampler(Source source, std::uint64_t batch_size, bool drop_last = false);
  std::string_view kind() const override { return "ReproduceBatchSampler"; }

  void set_distributed(int num_replicas, int rank, bool pad) override;  // throws SamplerError
  void set_epoch(std::uint64_t epoch) override;
  std::uint64_t epoch() const override { return epoch_; }
  std::uint64_t batch_size() const override { return batch_size_; }
  bool next_batch(std::vector<std::uint64_t>& out) override;

  std::uint64_t num_batches() const override { return batches_of(list_.size() - start_); }
  std::uint64_t num_batches_left() const override { return num_batches() - batches_taken_; }
  std::uint64_t batches_per_epoch() const override { return batches_of(list_.size()); }
  std::uint64_t consumed() const override { return consumed_after(batches_taken_); }

  std::string state() const override { return state_after_batches(batches_taken_); }
  std::string state_after_batches(std::uint64_t batches) const override;
  // Kind and the list's length must match; the list, epoch and position come from the state.
  void load_state(const std::string& text) override;

  const std::vector<std::uint64_t>& index_list() const { return list_; }

 private:
  std::uint64_t batches_of(std::uint64_t samples) const {
    return drop_last_ ? samples / batch_size_ : (samples + batch_size_ - 1) / batch_size_;
  }
  std::uint64_t consumed_after(std::uint64_t batches) const;
  Source source_;
  std::uint64_t batch_size_;
  bool drop_last_;
  std::uint64_t epoch_ = 0;
  std::vector<std::uint64_t> list_;
  std::uint64_t start_ = 0;  // consumed when this pass began (0, or the restored count)
  std::uint64_t batches_taken_ = 0;
};

}  // namespace fastrun::samplers
