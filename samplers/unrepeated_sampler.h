#pragma once
// Unrepeated samplers, for evaluation: each sample goes to exactly one rank, no padding. Rank r
// of R takes positions r, r+R, ... of the order, n/R samples (+1 when r < n mod R); R > n is
// an error. Orders: UnrepeatedRandomSampler = RandomSampler's (identity without shuffle),
// UnrepeatedSequentialSampler = identity, UnrepeatedSortedSampler = SortedSampler's.
// The conversions keep the kind (a sorted sampler stays sorted) and carry seed, shuffle, epoch
// and lengths. No state: an evaluation pass is not resumed.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "fastrun/samplers/order.h"
#include "fastrun/samplers/random_sampler.h"
#include "fastrun/samplers/sequential_sampler.h"

namespace fastrun::samplers {

class UnrepeatedSampler {
 public:
  virtual ~UnrepeatedSampler() = default;
  virtual std::string_view kind() const = 0;
  std::uint64_t size() const { return n_; }
  // Throws SamplerError for R < 1, rank outside [0, R), or R > n.
  void set_distributed(int num_replicas, int rank);
  int num_replicas() const { return replicas_; }
  int rank() const { return rank_; }
  void set_epoch(std::uint64_t epoch) { epoch_ = epoch; }
  std::uint64_t epoch() const { return epoch_; }
  virtual std::uint64_t num_samples() const;       // n/R + (rank < n mod R)
  virtual std::vector<std::uint64_t> indices() const;  // this rank's samples, in order

 protected:
  explicit UnrepeatedSampler(std::uint64_t n) : n_(n) {}
  virtual Order build_order(std::uint64_t epoch) const = 0;

 private:
  std::uint64_t n_;
  int replicas_ = 1;
  int rank_ = 0;
  std::uint64_t epoch_ = 0;
};

class UnrepeatedRandomSampler : public UnrepeatedSampler {
 public:
  explicit UnrepeatedRandomSampler(std::uint64_t n, bool shuffle = false, std::uint64_t seed = 0)
      : UnrepeatedSampler(n), shuffle_(shuffle), seed_(seed) {}
  std::string_view kind() const override { return "UnrepeatedRandomSampler"; }
  bool shuffle() const { return shuffle_; }
  std::uint64_t seed() const { return seed_; }

 protected:
  Order build_order(std::uint64_t epoch) const override;

 private:
  bool shuffle_;
  std::uint64_t seed_;
};

// chunk_dist = true: rank r takes the contiguous chunk [r * (n/R), (r+1) * (n/R)), and the last
// rank also the remainder; num_samples() is then what is yielded (fastNLP reported the strided
// count).
class UnrepeatedSequentialSampler : public UnrepeatedSampler {
 public:
  explicit UnrepeatedSequentialSampler(std::uint64_t n, bool chunk_dist = false)
      : UnrepeatedSampler(n), chunk_dist_(chunk_dist) {}
  std::string_view kind() const override { return "UnrepeatedSequentialSampler"; }
  bool chunk_dist() const { return chunk_dist_; }
  std::uint64_t num_samples() const override;
  std::vector<std::uint64_t> indices() const override;

 private:
  bool chunk_dist_;

 protected:
  Order build_order(std::uint64_t) const override { return Order::identity(size()); }
};

class UnrepeatedSortedSampler : public UnrepeatedSampler {
 public:
  explicit UnrepeatedSortedSampler(std::vector<std::uint64_t> lengths)
      : UnrepeatedSampler(lengths.size()), lengths_(std::move(lengths)) {}
  std::string_view kind() const override { return "UnrepeatedSortedSampler"; }
  const std::vector<std::uint64_t>& lengths() const { return lengths_; }

 protected:
  Order build_order(std::uint64_t) const override;

 private:
  std::vector<std::uint64_t> lengths_;
};

// Reproducible -> unrepeated of the same kind (epoch, seed, shuffle, lengths carried over;
// ranks are set afterwards with set_distributed).
UnrepeatedRandomSampler to_unrepeated(const RandomSampler& s);
UnrepeatedSequentialSampler to_unrepeated(const SequentialSampler& s);
UnrepeatedSortedSampler to_unrepeated(const SortedSampler& s);
// Dynamic form: throws SamplerError for a kind with no unrepeated twin (LazyRandomSampler).
std::unique_ptr<UnrepeatedSampler> to_unrepeated(const ReproducibleSampler& s);
// Unrepeated -> reproducible of the same kind.
RandomSampler to_reproducible(const UnrepeatedRandomSampler& s);
SequentialSampler to_reproducible(const UnrepeatedSequentialSampler& s);
SortedSampler to_reproducible(const UnrepeatedSortedSampler& s);

}  // namespace fastrun::samplers
