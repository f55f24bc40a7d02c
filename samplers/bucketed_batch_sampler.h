#pragma once
// BucketedBatchSampler(lengths, batch_size, batches_per_bucket, shuffle, drop_last, seed):
// batches of similar lengths, with every rank taking the same number of batches per epoch.
//
// The epoch's order (R ranks, batch size B, K = batches_per_bucket; W = R*B samples form one
// step of all ranks, a bucket is K*W samples):
//   1. sort the indices by length, descending, ties by index;
//   2. with shuffle: Fisher–Yates inside each bucket of K*W consecutive samples, then cut the
//      list into windows of W and Fisher–Yates the order of the full windows (a short last
//      window stays last); RNG = SplitMix64(mix64(stream_seed(seed, epoch) + segment)).
// Rank r's t-th batch is positions r + R*(t*B + j), j < B, all inside window t, so at every
// step the ranks' batches come from one bucket (length spread <= that of K*W sorted samples).
// Without shuffle the order is the sorted list.
//
// The order depends on R and B, so a resume with another R or B (or K) keeps the consumed
// prefix and lays out the rest again (steps 1-2 over the remaining indices) from the resume
// point: the state records these "segments" (start, R, B, K) of the epoch. Saving twice in a
// resumed epoch, or resuming a resumed epoch on yet another R, therefore stays exact.
#include <cstdint>
#include <vector>

#include "fastrun/samplers/order_batch_sampler.h"
#include "fastrun/samplers/reproducible_sampler.h"

namespace fastrun::samplers {

namespace detail {
struct BucketSegment {
  std::uint64_t start, replicas, batch_size, batches_per_bucket;
  bool same_layout(const BucketSegment& o) const {
    return replicas == o.replicas && batch_size == o.batch_size && batches_per_bucket == o.batches_per_bucket;
  }
};

// The sample-level sampler underneath: the order above, shared by the common rules.
class BucketedOrderSampler : public ReproducibleSampler {
 public:
  BucketedOrderSampler(std::vector<std::uint64_t> lengths, bool shuffle, std::uint64_t seed);
  std::string_view kind() const override { return "BucketedBatchSampler"; }
  // Starts a new layout at the current consumed count (or replaces all at 0).
  void use_layout(std::uint64_t replicas, std::uint64_t batch_size, std::uint64_t batches_per_bucket);
  const std::vector<BucketSegment>& segments() const { return segments_; }
  const std::vector<std::uint64_t>& lengths() const { return lengths_; }

 protected:
  Order build_order(std::uint64_t epoch) const override;
  void write_fields(StateWriter& w) const override;
  void read_fields(const StateReader& r) override;

 private:
  std::vector<std::uint64_t> lengths_;
  std::uint64_t hash_;
  bool shuffle_;
  std::uint64_t seed_;
  std::vector<BucketSegment> segments_;
};
}  // namespace detail

class BucketedBatchSampler : public OrderBatchSampler<detail::BucketedOrderSampler> {
 public:
  BucketedBatchSampler(std::vector<std::uint64_t> lengths, std::uint64_t batch_size,
                       std::uint64_t batches_per_bucket = 10, bool shuffle = true, bool drop_last = false,
                       std::uint64_t seed = 0);
  std::string_view kind() const override { return "BucketedBatchSampler"; }

  void set_distributed(int num_replicas, int rank, bool pad) override;
  void set_epoch(std::uint64_t epoch) override;

  std::string state_after_batches(std::uint64_t batches) const override;
  // Kind, n and the lengths (by hash) must match; seed, shuffle, epoch, position and the
  // epoch's earlier layouts come from the state; batch size, K and drop_last stay this
  // sampler's own (a change starts a new layout at the restored position).
  void load_state(const std::string& text) override;

 private:
  void sync_layout();
  std::uint64_t batches_per_bucket_;
};

}  // namespace fastrun::samplers
