#pragma once
// What RandomBatchSampler and BucketedBatchSampler share: this rank's share of a sample order
// (`Order`, a ReproducibleSampler) cut into batches of batch_size, the last one short unless
// drop_last, with the batch counts and the stepping. Each subclass keeps its own order, its
// kind, set-up, set_epoch and state fields.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fastrun/samplers/batch_sampler.h"

namespace fastrun::samplers {

template <class Order>
class OrderBatchSampler : public BatchSampler {
 public:
  std::uint64_t epoch() const override { return samples_.epoch(); }
  std::uint64_t batch_size() const override { return batch_size_; }
  bool drop_last() const { return drop_last_; }

  bool next_batch(std::vector<std::uint64_t>& out) override {
    out.clear();
    if (num_batches_left() == 0) return false;
    out.resize(static_cast<std::size_t>(std::min(batch_size_, samples_.num_left())));
    samples_.next_into(out.data(), out.size());
    ++batches_taken_;
    return true;
  }

  std::uint64_t num_batches() const override { return batches_of(samples_.num_samples()); }
  std::uint64_t num_batches_left() const override { return num_batches() - batches_taken_; }
  std::uint64_t batches_per_epoch() const override { return batches_of(samples_.samples_per_epoch()); }
  std::uint64_t consumed() const override { return samples_.consumed(); }
  std::string state() const override { return state_after_batches(batches_taken_); }

  const Order& samples() const { return samples_; }

 protected:
  OrderBatchSampler(Order samples, std::uint64_t batch_size, bool drop_last, std::string_view who)
      : samples_(std::move(samples)), batch_size_(batch_size), drop_last_(drop_last) {
    check_batch_size(batch_size, who);
  }

  std::uint64_t batches_of(std::uint64_t samples) const {
    return drop_last_ ? samples / batch_size_ : (samples + batch_size_ - 1) / batch_size_;
  }
  // Samples this rank has yielded after `batches` of its current share's batches.
  std::uint64_t yielded_after(std::uint64_t batches) const {
    return std::min(batches, num_batches()) * batch_size_;
  }

  Order samples_;
  std::uint64_t batch_size_;
  bool drop_last_;
  std::uint64_t batches_taken_ = 0;
};

}  // namespace fastrun::samplers
