#pragma once
// SequentialSampler: the identity order. SortedSampler: indices by length, descending, ties by
// index ascending (a stable order). Both follow reproducible_sampler.h; their orders do not
// depend on the epoch.
#include <cstdint>
#include <vector>

#include "fastrun/samplers/reproducible_sampler.h"

namespace fastrun::samplers {

// Indices of `lengths` by length descending, ties by index ascending.
std::vector<std::uint64_t> sorted_by_length(const std::vector<std::uint64_t>& lengths);
// FNV-1a (64 bit) over the lengths' little-endian bytes: identifies the lengths in a state.
std::uint64_t lengths_hash(const std::vector<std::uint64_t>& lengths);

class SequentialSampler : public ReproducibleSampler {
 public:
  explicit SequentialSampler(std::uint64_t n);
  std::string_view kind() const override { return "SequentialSampler"; }

 protected:
  Order build_order(std::uint64_t) const override { return Order::identity(size()); }
  void write_fields(StateWriter&) const override {}
  void read_fields(const StateReader&) override {}
};

class SortedSampler : public ReproducibleSampler {
 public:
  explicit SortedSampler(std::vector<std::uint64_t> lengths);
  std::string_view kind() const override { return "SortedSampler"; }
  const std::vector<std::uint64_t>& lengths() const { return lengths_; }

 protected:
  Order build_order(std::uint64_t epoch) const override;
  void write_fields(StateWriter& w) const override;
  void read_fields(const StateReader& r) override;

 private:
  std::vector<std::uint64_t> lengths_;
  std::uint64_t hash_;
};

}  // namespace fastrun::samplers
