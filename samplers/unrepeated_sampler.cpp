#include "fastrun/samplers/unrepeated_sampler.h"

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

void UnrepeatedSampler::set_distributed(int num_replicas, int rank) {
  check_distributed(num_replicas, rank, std::string(kind()) + "::set_distributed");
  if (static_cast<std::uint64_t>(num_replicas) > n_)
    throw SamplerError(std::string(kind()) + "::set_distributed: num_replicas = " + std::to_string(num_replicas) +
                       " is more than the " + std::to_string(n_) +
                       " samples (accepted: num_replicas <= n, so that every rank gets a sample)");
  replicas_ = num_replicas;
  rank_ = rank;
}

std::uint64_t UnrepeatedSampler::num_samples() const {
  const auto R = static_cast<std::uint64_t>(replicas_);
  const auto r = static_cast<std::uint64_t>(rank_);
  return n_ / R + (r < n_ % R ? 1 : 0);
}

std::vector<std::uint64_t> UnrepeatedSampler::indices() const {
  std::vector<std::uint64_t> v(num_samples());
  if (!v.empty()) build_order(epoch_).gather(static_cast<std::uint64_t>(rank_), static_cast<std::uint64_t>(replicas_),
                                             v.data(), v.size());
  return v;
}

std::uint64_t UnrepeatedSequentialSampler::num_samples() const {
  if (!chunk_dist_) return UnrepeatedSampler::num_samples();
  const auto R = static_cast<std::uint64_t>(num_replicas());
  const auto r = static_cast<std::uint64_t>(rank());
  return size() / R + (r + 1 == R ? size() % R : 0);
}

std::vector<std::uint64_t> UnrepeatedSequentialSampler::indices() const {
  if (!chunk_dist_) return UnrepeatedSampler::indices();
  const std::uint64_t first = size() / static_cast<std::uint64_t>(num_replicas()) * static_cast<std::uint64_t>(rank());
  std::vector<std::uint64_t> v(num_samples());
  for (std::uint64_t i = 0; i < v.size(); ++i) v[i] = first + i;
  return v;
}

Order UnrepeatedRandomSampler::build_order(std::uint64_t epoch) const {
  return shuffle_ ? Order::shuffled(size(), seed_, epoch) : Order::identity(size());
}

Order UnrepeatedSortedSampler::build_order(std::uint64_t) const { return Order::table(sorted_by_length(lengths_)); }

UnrepeatedRandomSampler to_unrepeated(const RandomSampler& s) {
  UnrepeatedRandomSampler u(s.size(), s.shuffle(), s.seed());
  u.set_epoch(s.epoch());
  return u;
}

UnrepeatedSequentialSampler to_unrepeated(const SequentialSampler& s) {
  UnrepeatedSequentialSampler u(s.size(), false);
  u.set_epoch(s.epoch());
  return u;
}

UnrepeatedSortedSampler to_unrepeated(const SortedSampler& s) {
  UnrepeatedSortedSampler u(s.lengths());
  u.set_epoch(s.epoch());
  return u;
}

std::unique_ptr<UnrepeatedSampler> to_unrepeated(const ReproducibleSampler& s) {
  if (auto* p = dynamic_cast<const RandomSampler*>(&s)) return std::make_unique<UnrepeatedRandomSampler>(to_unrepeated(*p));
  if (auto* p = dynamic_cast<const SequentialSampler*>(&s))
    return std::make_unique<UnrepeatedSequentialSampler>(to_unrepeated(*p));
  if (auto* p = dynamic_cast<const SortedSampler*>(&s)) return std::make_unique<UnrepeatedSortedSampler>(to_unrepeated(*p));
  throw SamplerError("to_unrepeated: a " + std::string(s.kind()) +
                     " has no unrepeated twin (accepted: RandomSampler, SequentialSampler, SortedSampler)");
}

RandomSampler to_reproducible(const UnrepeatedRandomSampler& s) {
  RandomSampler r(s.size(), s.shuffle(), s.seed());
  r.set_epoch(s.epoch());
  return r;
}

SequentialSampler to_reproducible(const UnrepeatedSequentialSampler& s) {
  SequentialSampler r(s.size());
  r.set_epoch(s.epoch());
  return r;
}

SortedSampler to_reproducible(const UnrepeatedSortedSampler& s) {
  SortedSampler r(s.lengths());
  r.set_epoch(s.epoch());
  return r;
}

}  // namespace fastrun::samplers
