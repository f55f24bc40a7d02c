#pragma once
// The interface of the reproducible batch samplers (RandomBatchSampler, BucketedBatchSampler,
// ReproduceBatchSampler). A rank's share of the epoch's order (reproducible_sampler.h) is cut
// into batches of batch_size in order; the last may be short, or is dropped with drop_last.
// Every rank has the same number of batches in every epoch, since shares are equal-sized.
// Each batch of b samples advances the global consumed count by R * b.
// Threading: not thread-safe; one batch sampler per rank, used by one thread.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fastrun::samplers {

class BatchSampler {
 public:
  virtual ~BatchSampler() = default;
  virtual std::string_view kind() const = 0;

  virtual void set_distributed(int num_replicas, int rank, bool pad) = 0;
  virtual void set_epoch(std::uint64_t epoch) = 0;  // same rule as ReproducibleSampler::set_epoch
  virtual std::uint64_t epoch() const = 0;
  virtual std::uint64_t batch_size() const = 0;

  // The next batch of this rank into `out` (replacing its contents); false at the end of the
  // share (out is then empty).
  virtual bool next_batch(std::vector<std::uint64_t>& out) = 0;

  // Batches of this rank's share in all (from the epoch's start or the restored position), still
  // to come, and in an uninterrupted epoch.
  virtual std::uint64_t num_batches() const = 0;
  virtual std::uint64_t num_batches_left() const = 0;
  virtual std::uint64_t batches_per_epoch() const = 0;
  // Samples consumed in this epoch by all ranks together.
  virtual std::uint64_t consumed() const = 0;

  // Save (state) or save as if this rank had yielded `batches` batches of its current share
  // (state_after_batches), e.g. when the loader prefetches. Restore: see each sampler.
  virtual std::string state() const = 0;
  virtual std::string state_after_batches(std::uint64_t batches) const = 0;
  virtual void load_state(const std::string& text) = 0;
};

// Checks batch_size >= 1; throws SamplerError naming the value.
void check_batch_size(std::uint64_t batch_size, std::string_view who);

}  // namespace fastrun::samplers
