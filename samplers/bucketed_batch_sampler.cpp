#include "fastrun/samplers/bucketed_batch_sampler.h"

#include <algorithm>

#include "fastrun/samplers/error.h"
#include "fastrun/samplers/rng.h"
#include "fastrun/samplers/sequential_sampler.h"

namespace fastrun::samplers {
namespace detail {

BucketedOrderSampler::BucketedOrderSampler(std::vector<std::uint64_t> lengths, bool shuffle, std::uint64_t seed)
    : ReproducibleSampler(lengths.size()),
      lengths_(std::move(lengths)),
      hash_(lengths_hash(lengths_)),
      shuffle_(shuffle),
      seed_(seed),
      segments_{{0, 1, 1, 1}} {}

void BucketedOrderSampler::use_layout(std::uint64_t replicas, std::uint64_t batch_size,
                                      std::uint64_t batches_per_bucket) {
  const BucketSegment want{consumed(), replicas, batch_size, batches_per_bucket};
  // Layouts that begin after the current position were never used: drop them.
  while (segments_.size() > 1 && segments_.back().start > want.start) segments_.pop_back();
  if (want.start == 0) {
    segments_ = {want};
  } else if (segments_.back().start == want.start) {
    segments_.back() = want;  // nothing consumed under the previous layout since it began
  } else if (!segments_.back().same_layout(want)) {
    segments_.push_back(want);
  } else {
    return;
  }
  // Keep the consumed prefix in place; only positions >= want.start change.
  invalidate();
}

namespace {

// Steps 1-2 of the header over `list` (already sorted by length), in place.
void lay_out(std::vector<std::uint64_t>& list, const BucketSegment& s, SplitMix64& rng) {
  const std::uint64_t window = s.replicas * s.batch_size;
  const std::uint64_t bucket = window * s.batches_per_bucket;
  const std::uint64_t len = list.size();
  for (std::uint64_t b = 0; b < len; b += bucket)
    fisher_yates(list.data() + b, static_cast<std::size_t>(std::min(bucket, len - b)), rng);
  const std::uint64_t full = len / window;
  std::vector<std::uint64_t> perm(full);
  for (std::uint64_t i = 0; i < full; ++i) perm[i] = i;
  fisher_yates(perm.data(), perm.size(), rng);
  std::vector<std::uint64_t> out;
  out.reserve(len);
  for (std::uint64_t w : perm) out.insert(out.end(), list.begin() + w * window, list.begin() + (w + 1) * window);
  out.insert(out.end(), list.begin() + full * window, list.end());
  list = std::move(out);
}

}  // namespace

Order BucketedOrderSampler::build_order(std::uint64_t epoch) const {
  std::vector<std::uint64_t> order = sorted_by_length(lengths_);
  if (!shuffle_) return Order::table(std::move(order));
  const auto by_length = [this](std::uint64_t a, std::uint64_t b) {
    return lengths_[a] != lengths_[b] ? lengths_[a] > lengths_[b] : a < b;
  };
  for (std::size_t s = 0; s < segments_.size(); ++s) {
    const BucketSegment& seg = segments_[s];
    if (seg.start >= order.size()) break;
    std::vector<std::uint64_t> rest(order.begin() + static_cast<std::ptrdiff_t>(seg.start), order.end());
    if (s > 0) std::sort(rest.begin(), rest.end(), by_length);
    SplitMix64 rng(mix64(stream_seed(seed_, epoch) + s));
    lay_out(rest, seg, rng);
    std::copy(rest.begin(), rest.end(), order.begin() + static_cast<std::ptrdiff_t>(seg.start));
  }
  return Order::table(std::move(order));
}

void BucketedOrderSampler::write_fields(StateWriter& w) const {
  std::vector<std::uint64_t> flat;
  for (const auto& s : segments_) flat.insert(flat.end(), {s.start, s.replicas, s.batch_size, s.batches_per_bucket});
  w.add_u64("seed", seed_).add_bool("shuffle", shuffle_).add_u64("lengths_hash", hash_).add_array("segments", flat);
}

void BucketedOrderSampler::read_fields(const StateReader& r) {
  r.require_equal("lengths_hash", hash_, "the lengths must be the same as when the state was saved");
  const std::uint64_t seed = r.u64("seed");
  const bool shuffle = r.boolean("shuffle");
  const std::vector<std::uint64_t> flat = r.array("segments");
  std::vector<BucketSegment> segs;
  const auto bad = [&](const std::string& why) {
    return SamplerError("BucketedBatchSampler state: field 'segments' " + why +
                        " (accepted: [start, num_replicas, batch_size, batches_per_bucket] repeated, starts "
                        "increasing from 0, the other values >= 1)");
  };
  if (flat.empty() || flat.size() % 4 != 0) throw bad("has " + std::to_string(flat.size()) + " numbers");
  for (std::size_t i = 0; i < flat.size(); i += 4) {
    BucketSegment s{flat[i], flat[i + 1], flat[i + 2], flat[i + 3]};
    if (s.replicas == 0 || s.batch_size == 0 || s.batches_per_bucket == 0) throw bad("holds a zero size");
    if (i == 0 ? s.start != 0 : s.start <= segs.back().start) throw bad("has starts out of order");
    segs.push_back(s);
  }
  if (segs.back().start > r.u64("consumed")) throw bad("starts a layout after the consumed count");
  seed_ = seed;
  shuffle_ = shuffle;
  segments_ = std::move(segs);
}

}  // namespace detail

BucketedBatchSampler::BucketedBatchSampler(std::vector<std::uint64_t> lengths, std::uint64_t batch_size,
                                           std::uint64_t batches_per_bucket, bool shuffle, bool drop_last,
                                           std::uint64_t seed)
    : OrderBatchSampler(detail::BucketedOrderSampler(std::move(lengths), shuffle, seed), batch_size, drop_last,
                        "BucketedBatchSampler"),
      batches_per_bucket_(batches_per_bucket) {
  if (batches_per_bucket == 0)
    throw SamplerError("BucketedBatchSampler: batches_per_bucket = 0 (accepted: batches_per_bucket >= 1)");
  sync_layout();
}

void BucketedBatchSampler::sync_layout() {
  samples_.use_layout(static_cast<std::uint64_t>(samples_.num_replicas()), batch_size_, batches_per_bucket_);
}

void BucketedBatchSampler::set_distributed(int num_replicas, int rank, bool pad) {
  samples_.set_distributed(num_replicas, rank, pad);
  batches_taken_ = 0;
  sync_layout();
}

void BucketedBatchSampler::set_epoch(std::uint64_t epoch) {
  if (epoch == samples_.epoch()) return;
  samples_.set_epoch(epoch);
  batches_taken_ = 0;
  sync_layout();
}

std::string BucketedBatchSampler::state_after_batches(std::uint64_t batches) const {
  return samples_.state_as(kind(), yielded_after(batches), [&](StateWriter& w) {
    w.add_u64("batch_size", batch_size_).add_u64("batches_per_bucket", batches_per_bucket_).add_bool("drop_last", drop_last_);
  });
}

void BucketedBatchSampler::load_state(const std::string& text) {
  samples_.load_state_as(text, kind(), [](const StateReader& r) {
    (void)r.u64("batch_size");  // informational: the layouts in 'segments' are what counts
    (void)r.u64("batches_per_bucket");
    (void)r.boolean("drop_last");
  });
  batches_taken_ = 0;
  sync_layout();
}

}  // namespace fastrun::samplers
