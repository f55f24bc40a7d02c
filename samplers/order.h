#pragma once
// One epoch's order: a sequence of n dataset indices (a permutation of [0, n) for every
// sampler except ReproduceBatchSampler, whose source may repeat indices). Four storages:
// identity (no memory), a table of 4-byte entries (n <= 2^32), a table of 8-byte entries, and
// the lazy Feistel bijection (constant memory, n <= 2^63).
// Thread safety: const methods may be called concurrently; the object is immutable once built.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fastrun/samplers/feistel.h"
#include "fastrun/samplers/table_alloc.h"

namespace fastrun::samplers {

class Order {
 public:
  enum class Storage { identity, table32, table64, lazy };

  Order() = default;
  static Order identity(std::uint64_t n);
  static Order table(std::vector<std::uint32_t> entries);
  static Order table(std::vector<std::uint64_t> entries);  // stored as 4 bytes if they all fit
  static Order lazy(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch);
  // The shuffled permutation of [0, n) for (seed, epoch): Fisher–Yates over the identity.
  static Order shuffled(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch);

  std::uint64_t size() const { return n_; }
  Storage storage() const { return storage_; }
  std::size_t bytes() const { return t32_.capacity() * 4 + t64_.capacity() * 8; }

  // Entry at position p < size().
  std::uint64_t at(std::uint64_t p) const {
    switch (storage_) {
      case Storage::identity: return p;
      case Storage::table32: return t32_[p];
      case Storage::table64: return t64_[p];
      case Storage::lazy: return feistel_(p);
    }
    return p;
  }

  // out[i] = at((first + i * stride) mod n) for i < count; n must be > 0.
  void gather(std::uint64_t first, std::uint64_t stride, std::uint64_t* out, std::size_t count) const;

  // All entries as a vector (materialises a lazy order; for tests and small n).
  std::vector<std::uint64_t> to_vector() const;

 private:
  Storage storage_ = Storage::identity;
  std::uint64_t n_ = 0;
  std::vector<std::uint32_t, TableAlloc<std::uint32_t>> t32_;
  std::vector<std::uint64_t, TableAlloc<std::uint64_t>> t64_;
  FeistelPermutation feistel_;
};

}  // namespace fastrun::samplers
