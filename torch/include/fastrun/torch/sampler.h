#pragma once
// fastrun::torch::DistributedSampler: fastrun's reproducible distributed samplers
// (docs/samplers.md) as a torch::data sampler, so that torch::data::make_data_loader draws this
// rank's share of each epoch, and a job resumes mid-epoch exactly, on any number of ranks.
//
//   fastrun::samplers::RandomSampler order(dataset.size().value(), /*shuffle=*/true, seed);
//   order.set_distributed(ctx->world_size(), ctx->rank(), /*pad=*/false);
//   fastrun::torch::DistributedSampler sampler(std::move(order));
//   auto loader = torch::data::make_data_loader(dataset, sampler, options);  // shares the position
//   if (resuming) sampler.load_state(progress.sampler_state);
//   for (auto epoch = sampler.epoch(); epoch < epochs; ++epoch) {
//     sampler.set_epoch(epoch);           // the restored epoch keeps its position
//     std::size_t used = 0;
//     for (auto& batch : *loader) { ...; ++used; save(sampler.state_after_batches(used)); }
//   }
//
// Contracts:
// - Handle semantics: copies share one sampler and one position (the loader keeps its own copy,
//   the program keeps another to call set_epoch, state and load_state on).
// - Each pass over the loader (its begin(), which calls reset()) restarts the current epoch from
//   its beginning, as torch's samplers do, except the first pass after load_state, which
//   continues from the restored position. set_epoch(e) chooses the order (same rule as the
//   fastrun samplers: another epoch starts from its beginning, the one in use keeps its place).
// - A loader with workers > 0 asks for batches ahead of the model (2 * workers by default), so
//   state() counts batches the model has not seen yet; state_after_batches(k), k = the batches
//   of this pass the model has consumed, is exact with or without workers (torch delivers
//   batches in request order).
// - Wrapping a BatchSampler (RandomBatchSampler, BucketedBatchSampler), the batches are the
//   sampler's own; the loader's batch_size must equal the sampler's batch_size (else ConfigError:
//   torch's drop_last compares against it).
// Threading: not thread-safe; used from the thread that iterates the loader (torch's loader asks
// its sampler from that thread also when it has worker threads).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/data/samplers/base.h>

#include "fastrun/samplers/batch_sampler.h"
#include "fastrun/samplers/reproducible_sampler.h"

namespace fastrun::torch {

class DistributedSampler final : public ::torch::data::samplers::Sampler<std::vector<std::size_t>> {
 public:
  // Wraps a configured fastrun sampler (its set_distributed already called, or call it through
  // index_sampler()/batch_sampler() before the first pass). Copied or moved in.
  template <std::derived_from<samplers::ReproducibleSampler> S>
  explicit DistributedSampler(S sampler)
      : DistributedSampler(std::unique_ptr<samplers::ReproducibleSampler>(std::make_unique<S>(std::move(sampler)))) {}
  template <std::derived_from<samplers::BatchSampler> S>
  explicit DistributedSampler(S sampler)
      : DistributedSampler(std::unique_ptr<samplers::BatchSampler>(std::make_unique<S>(std::move(sampler)))) {}
  explicit DistributedSampler(std::unique_ptr<samplers::ReproducibleSampler> sampler);
  explicit DistributedSampler(std::unique_ptr<samplers::BatchSampler> sampler);

  // The wrapped sampler (nullptr for the other kind).
  samplers::ReproducibleSampler* index_sampler() const;
  samplers::BatchSampler* batch_sampler() const;

  void set_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const;

  // Save: the state after everything handed out so far, or after the first k batches of this
  // pass (k <= batches_handed_out(), else SamplerError). Both are absolute: after a restore they
  // still count from the start of the epoch, so saving twice in a resumed epoch is right.
  std::string state() const;
  std::string state_after_batches(std::size_t k) const;
  std::size_t batches_handed_out() const;  // in this pass
  // Restore (any number of ranks; see docs/samplers.md): the next pass continues from it.
  void load_state(const std::string& text);

  // torch::data::samplers::Sampler. reset: see above; a new_size other than the dataset's is a
  // ConfigError (the order is fixed by the fastrun sampler). next: up to batch_size indices of
  // this rank's share, nullopt at its end. save/load: the state string under the archive key
  // "fastrun_sampler_state" (torch::save(sampler, path) / torch::load(sampler, path)).
  void reset(c10::optional<std::size_t> new_size = c10::nullopt) override;
  c10::optional<std::vector<std::size_t>> next(std::size_t batch_size) override;
  void save(::torch::serialize::OutputArchive& archive) const override;
  void load(::torch::serialize::InputArchive& archive) override;

 private:
  struct Shared;
  std::shared_ptr<Shared> s_;
};

}  // namespace fastrun::torch
