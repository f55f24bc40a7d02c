#include "fastrun/samplers/random_sampler.h"

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

RandomSampler::RandomSampler(std::uint64_t n, bool shuffle, std::uint64_t seed)
    : ReproducibleSampler(n), shuffle_(shuffle), seed_(seed) {
  if (n > (std::uint64_t{1} << 63))
    throw SamplerError("RandomSampler: n = " + std::to_string(n) + " (accepted: n <= 2^63)");
}

Order RandomSampler::build_order(std::uint64_t epoch) const {
  return shuffle_ ? Order::shuffled(size(), seed_, epoch) : Order::identity(size());
}

void RandomSampler::write_fields(StateWriter& w) const { w.add_u64("seed", seed_).add_bool("shuffle", shuffle_); }

void RandomSampler::read_fields(const StateReader& r) {
  const std::uint64_t seed = r.u64("seed");
  const bool shuffle = r.boolean("shuffle");
  seed_ = seed;  // the checkpoint's seed and shuffle win over the constructor's
  shuffle_ = shuffle;
}

LazyRandomSampler::LazyRandomSampler(std::uint64_t n, std::uint64_t seed) : ReproducibleSampler(n), seed_(seed) {
  if (n > (std::uint64_t{1} << 63))
    throw SamplerError("LazyRandomSampler: n = " + std::to_string(n) + " (accepted: n <= 2^63)");
}

Order LazyRandomSampler::build_order(std::uint64_t epoch) const { return Order::lazy(size(), seed_, epoch); }

void LazyRandomSampler::write_fields(StateWriter& w) const { w.add_u64("seed", seed_); }

void LazyRandomSampler::read_fields(const StateReader& r) { seed_ = r.u64("seed"); }

}  // namespace fastrun::samplers
