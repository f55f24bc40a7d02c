#include "fastrun/samplers/reproduce_batch_sampler.h"

#include <algorithm>

#include "fastrun/samplers/error.h"
#include "fastrun/samplers/state.h"

namespace fastrun::samplers {

ReproduceBatchSampler::ReproduceBatchSampler(Source source, std::uint64_t batch_size, bool drop_last)
    : source_(std::move(source)), batch_size_(batch_size), drop_last_(drop_last) {
  check_batch_size(batch_size, "ReproduceBatchSampler");
  if (!source_) throw SamplerError("ReproduceBatchSampler: the source is empty (accepted: a callable)");
  list_ = source_(epoch_);
}

void ReproduceBatchSampler::set_distributed(int num_replicas, int rank, bool) {
  throw SamplerError("ReproduceBatchSampler::set_distributed(" + std::to_string(num_replicas) + ", " +
                     std::to_string(rank) +
                     "): this sampler runs on one process only (accepted: RandomBatchSampler or "
                     "BucketedBatchSampler for distributed runs)");
}

void ReproduceBatchSampler::set_epoch(std::uint64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  list_ = source_(epoch);
  start_ = 0;
  batches_taken_ = 0;
}

std::uint64_t ReproduceBatchSampler::consumed_after(std::uint64_t batches) const {
  return std::min<std::uint64_t>(list_.size(), start_ + std::min(batches, num_batches()) * batch_size_);
}

bool ReproduceBatchSampler::next_batch(std::vector<std::uint64_t>& out) {
  out.clear();
  if (num_batches_left() == 0) return false;
  const std::uint64_t from = consumed();
  const std::uint64_t to = std::min<std::uint64_t>(list_.size(), from + batch_size_);
  out.assign(list_.begin() + static_cast<std::ptrdiff_t>(from), list_.begin() + static_cast<std::ptrdiff_t>(to));
  ++batches_taken_;
  return true;
}

std::string ReproduceBatchSampler::state_after_batches(std::uint64_t batches) const {
  StateWriter w(kind());
  w.add_u64("n", list_.size())
      .add_u64("epoch", epoch_)
      .add_u64("consumed", consumed_after(batches))
      .add_u64("batch_size", batch_size_)
      .add_bool("drop_last", drop_last_)
      .add_array("index_list", list_);
  return w.str();
}

void ReproduceBatchSampler::load_state(const std::string& text) {
  StateReader r(text, kind());
  r.require_equal("n", list_.size(), "the wrapped source must yield as many indices as when the state was saved");
  std::vector<std::uint64_t> list = r.array("index_list");
  if (list.size() != list_.size())
    throw SamplerError("ReproduceBatchSampler state: field 'index_list' has " + std::to_string(list.size()) +
                       " entries but field 'n' says " + std::to_string(list_.size()));
  const std::uint64_t consumed = r.u64("consumed");
  if (consumed > list.size())
    throw SamplerError("ReproduceBatchSampler state: consumed = " + std::to_string(consumed) +
                       " exceeds n = " + std::to_string(list.size()) + " (accepted: 0 <= consumed <= n)");
  const std::uint64_t epoch = r.u64("epoch");
  (void)r.u64("batch_size");  // informational: a different batch size on resume is accepted
  (void)r.boolean("drop_last");
  list_ = std::move(list);
  epoch_ = epoch;
  start_ = consumed;
  batches_taken_ = 0;
}

}  // namespace fastrun::samplers
