#include "fastrun/samplers/order.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

Order Order::identity(std::uint64_t n) {
  Order o;
  o.storage_ = Storage::identity;
  o.n_ = n;
  return o;
}

Order Order::table(std::vector<std::uint32_t> entries) {
  Order o;
  o.storage_ = Storage::table32;
  o.n_ = entries.size();
  o.t32_.assign(entries.begin(), entries.end());
  return o;
}

Order Order::table(std::vector<std::uint64_t> entries) {
  const bool fits = std::all_of(entries.begin(), entries.end(), [](std::uint64_t v) { return v <= UINT32_MAX; });
  if (fits) return table(std::vector<std::uint32_t>(entries.begin(), entries.end()));
  Order o;
  o.storage_ = Storage::table64;
  o.n_ = entries.size();
  o.t64_.assign(entries.begin(), entries.end());
  return o;
}

Order Order::lazy(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch) {
  Order o;
  o.storage_ = Storage::lazy;
  o.n_ = n;
  o.feistel_ = FeistelPermutation(n, seed, epoch);
  return o;
}

Order Order::shuffled(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch) {
  SplitMix64 rng(stream_seed(seed, epoch));
  Order o;
  o.n_ = n;
  if (n <= (std::uint64_t{1} << 32)) {
    o.storage_ = Storage::table32;
    o.t32_.resize(n);
    // Indices are < 2^32 here; the wrap of iota's counter at n = 2^32 is never stored.
    for (std::uint64_t i = 0; i < n; ++i) o.t32_[i] = static_cast<std::uint32_t>(i);
    fisher_yates(o.t32_.data(), o.t32_.size(), rng);
  } else {
    o.storage_ = Storage::table64;
    o.t64_.resize(n);
    std::iota(o.t64_.begin(), o.t64_.end(), std::uint64_t{0});
    fisher_yates(o.t64_.data(), o.t64_.size(), rng);
  }
  return o;
}

namespace {
template <class F>
void gather_with(F&& at, std::uint64_t n, std::uint64_t first, std::uint64_t stride, std::uint64_t* out,
                 std::size_t count) {
  std::uint64_t p = first % n;
  stride %= n;
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = at(p);
    p += stride;  // p, stride < n <= 2^63, so no overflow
    if (p >= n) p -= n;
  }
}
}  // namespace

void Order::gather(std::uint64_t first, std::uint64_t stride, std::uint64_t* out, std::size_t count) const {
  if (count == 0) return;
  if (n_ == 0) throw SamplerError("gather from an empty order (n = 0)");
  switch (storage_) {
    case Storage::identity: gather_with([](std::uint64_t p) { return p; }, n_, first, stride, out, count); break;
    case Storage::table32: {
      const std::uint32_t* t = t32_.data();
      gather_with([t](std::uint64_t p) { return std::uint64_t{t[p]}; }, n_, first, stride, out, count);
      break;
    }
    case Storage::table64: {
      const std::uint64_t* t = t64_.data();
      gather_with([t](std::uint64_t p) { return t[p]; }, n_, first, stride, out, count);
      break;
    }
    case Storage::lazy: feistel_.gather(first, stride, out, count); break;
  }
}

std::vector<std::uint64_t> Order::to_vector() const {
  std::vector<std::uint64_t> v(n_);
  if (n_ > 0) gather(0, 1, v.data(), v.size());
  return v;
}

}  // namespace fastrun::samplers
