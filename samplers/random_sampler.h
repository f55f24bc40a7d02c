#pragma once
// RandomSampler: the permutation of [0, n) for (seed, epoch) by Fisher–Yates (rng.h), stored
// with 4 bytes per index while n <= 2^32 (8 above); shuffle = false gives the identity.
// LazyRandomSampler: the Feistel bijection of feistel.h; constant memory, n up to 2^63; each
// index is computed when it is yielded. The two give different (each documented) orders.
// Both follow the share, resume and state rules of reproducible_sampler.h.
#include <cstdint>

#include "fastrun/samplers/reproducible_sampler.h"

namespace fastrun::samplers {

class RandomSampler : public ReproducibleSampler {
 public:
  explicit RandomSampler(std::uint64_t n, bool shuffle = true, std::uint64_t seed = 0);
  std::string_view kind() const override { return "RandomSampler"; }
  bool shuffle() const { return shuffle_; }
  std::uint64_t seed() const { return seed_; }

 protected:
  Order build_order(std::uint64_t epoch) const override;
  void write_fields(StateWriter& w) const override;
  void read_fields(const StateReader& r) override;

 private:
  bool shuffle_;
  std::uint64_t seed_;
};

class LazyRandomSampler : public ReproducibleSampler {
 public:
  explicit LazyRandomSampler(std::uint64_t n, std::uint64_t seed = 0);
  std::string_view kind() const override { return "LazyRandomSampler"; }
  std::uint64_t seed() const { return seed_; }

 protected:
  Order build_order(std::uint64_t epoch) const override;
  void write_fields(StateWriter& w) const override;
  void read_fields(const StateReader& r) override;

 private:
  std::uint64_t seed_;
};

}  // namespace fastrun::samplers
