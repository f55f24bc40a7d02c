#include "fastrun/samplers/reproducible_sampler.h"

#include <algorithm>

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

std::uint64_t share_count(std::uint64_t n, std::uint64_t start, std::uint64_t num_replicas, bool pad) {
  if (start >= n) return 0;
  const std::uint64_t rest = n - start;
  return pad ? rest / num_replicas + (rest % num_replicas != 0) : rest / num_replicas;
}

void check_distributed(int num_replicas, int rank, std::string_view who) {
  if (num_replicas < 1)
    throw SamplerError(std::string(who) + ": num_replicas = " + std::to_string(num_replicas) +
                       " (accepted: num_replicas >= 1)");
  if (rank < 0 || rank >= num_replicas)
    throw SamplerError(std::string(who) + ": rank = " + std::to_string(rank) + " with num_replicas = " +
                       std::to_string(num_replicas) + " (accepted: 0 <= rank < num_replicas)");
}

void ReproducibleSampler::set_distributed(int num_replicas, int rank, bool pad) {
  check_distributed(num_replicas, rank, std::string(kind()) + "::set_distributed");
  start_ = consumed();
  taken_ = 0;
  replicas_ = num_replicas;
  rank_ = rank;
  pad_ = pad;
}

void ReproducibleSampler::set_epoch(std::uint64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  start_ = 0;
  taken_ = 0;
  invalidate();
}

void ReproducibleSampler::restart_epoch() {
  start_ = 0;
  taken_ = 0;
}

std::uint64_t ReproducibleSampler::consumed_after(std::uint64_t yielded) const {
  const std::uint64_t k = std::min(yielded, num_samples());
  // start_ + R * k can exceed n only through padding at the very end; n <= 2^63 and
  // R * k <= n + R, so there is no overflow.
  return std::min(n_, start_ + static_cast<std::uint64_t>(replicas_) * k);
}

const Order& ReproducibleSampler::order() const {
  if (!cache_) cache_ = build_order(epoch_);
  return *cache_;
}

std::size_t ReproducibleSampler::next_into(std::uint64_t* out, std::size_t max) {
  const std::uint64_t left = num_left();
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(left, max));
  if (count == 0) return 0;
  const auto R = static_cast<std::uint64_t>(replicas_);
  order().gather(start_ + static_cast<std::uint64_t>(rank_) + taken_ * R, R, out, count);
  taken_ += count;
  return count;
}

std::optional<std::uint64_t> ReproducibleSampler::next() {
  std::uint64_t v = 0;
  if (next_into(&v, 1) == 0) return std::nullopt;
  return v;
}

std::vector<std::uint64_t> ReproducibleSampler::remaining() const {
  std::vector<std::uint64_t> v(num_left());
  const auto R = static_cast<std::uint64_t>(replicas_);
  if (!v.empty()) order().gather(start_ + static_cast<std::uint64_t>(rank_) + taken_ * R, R, v.data(), v.size());
  return v;
}

std::vector<std::uint64_t> ReproducibleSampler::take_all() {
  std::vector<std::uint64_t> v = remaining();
  taken_ += v.size();
  return v;
}

std::string ReproducibleSampler::state_after(std::uint64_t yielded) const { return state_as(kind(), yielded, {}); }

std::string ReproducibleSampler::state_as(std::string_view as_kind, std::uint64_t yielded,
                                          const std::function<void(StateWriter&)>& write_extra) const {
  StateWriter w(as_kind);
  w.add_u64("n", n_).add_u64("epoch", epoch_).add_u64("consumed", consumed_after(yielded));
  write_fields(w);
  if (write_extra) write_extra(w);
  return w.str();
}

void ReproducibleSampler::load_state(const std::string& text) { load_state_as(text, kind(), {}); }

void ReproducibleSampler::load_state_as(const std::string& text, std::string_view as_kind,
                                        const std::function<void(const StateReader&)>& read_extra) {
  StateReader r(text, as_kind);
  r.require_equal("n", n_, "a state restores only into a sampler over the same number of samples");
  const std::uint64_t consumed = r.u64("consumed");
  if (consumed > n_)
    throw SamplerError(std::string(as_kind) + " state: consumed = " + std::to_string(consumed) +
                       " exceeds n = " + std::to_string(n_) + " (accepted: 0 <= consumed <= n)");
  const std::uint64_t epoch = r.u64("epoch");
  // Checks first (they may throw before anything changes), then adoption.
  if (read_extra) read_extra(r);
  read_fields(r);
  epoch_ = epoch;
  start_ = consumed;
  taken_ = 0;
  invalidate();
}

}  // namespace fastrun::samplers
