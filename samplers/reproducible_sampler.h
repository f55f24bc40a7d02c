#pragma once
// Base of the reproducible samplers (RandomSampler, SequentialSampler, SortedSampler,
// LazyRandomSampler): one order per (seed, epoch), the same on every rank; rank r of R takes
// positions C0 + r, C0 + r + R, ... of it, where C0 is the global count of samples already
// consumed when this share began (0 at the start of an epoch, the saved count after
// load_state). With pad the order is extended from its start so every rank gets
// ceil((n - C0) / R); without, it is cut so every rank gets floor((n - C0) / R).
//
// Consumption is global: each index this rank yields adds R to consumed() (all ranks advance in
// lock step), so a state saved on R ranks resumes on any R'.
//
// Threading: not thread-safe; one sampler per rank, used by one thread.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/samplers/order.h"
#include "fastrun/samplers/state.h"

namespace fastrun::samplers {

// Samples one rank takes from positions [start, n) of an order of n, R ranks.
std::uint64_t share_count(std::uint64_t n, std::uint64_t start, std::uint64_t num_replicas, bool pad);
// Checks 1 <= num_replicas and 0 <= rank < num_replicas; throws SamplerError naming the values.
void check_distributed(int num_replicas, int rank, std::string_view who);

class ReproducibleSampler {
 public:
  virtual ~ReproducibleSampler() = default;

  virtual std::string_view kind() const = 0;
  std::uint64_t size() const { return n_; }  // samples in the dataset

  // Sets this rank's place; keeps the global position (a sampler restored from a state and then
  // set_distributed continues from the saved count). Default: 1 replica, rank 0, no pad.
  void set_distributed(int num_replicas, int rank, bool pad);
  int num_replicas() const { return replicas_; }
  int rank() const { return rank_; }
  bool pad() const { return pad_; }

  // Selects the epoch's order. A different epoch starts it from its beginning; the epoch already
  // in use (e.g. the one just restored by load_state) keeps the position. Default epoch: 0.
  void set_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const { return epoch_; }
  void restart_epoch();  // back to the beginning of the current epoch

  // Sizes for this rank. num_samples: what this share yields in all (from the start of the
  // epoch, or from the restored position); num_left: what it has still to yield;
  // samples_per_epoch: an uninterrupted epoch's share (ceil(n/R) with pad, else floor(n/R)).
  std::uint64_t num_samples() const { return share_count(n_, start_, replicas_, pad_); }
  std::uint64_t num_left() const { return num_samples() - taken_; }
  std::uint64_t samples_per_epoch() const { return share_count(n_, 0, replicas_, pad_); }

  // Iteration: the next index of this rank's share, or nullopt at its end.
  std::optional<std::uint64_t> next();
  // Writes up to `max` next indices to out; returns how many (0 at the end).
  std::size_t next_into(std::uint64_t* out, std::size_t max);
  // The rest of this rank's share, consumed.
  std::vector<std::uint64_t> take_all();
  // The rest of this rank's share, not consumed.
  std::vector<std::uint64_t> remaining() const;

  // Global samples consumed in this epoch by all ranks (<= n).
  std::uint64_t consumed() const { return consumed_after(taken_); }
  // The global count once this rank has yielded `yielded` samples of its current share.
  std::uint64_t consumed_after(std::uint64_t yielded) const;
  std::uint64_t yielded() const { return taken_; }  // of the current share

  // Save: the state of this sampler; state_after(k) as if this rank had yielded k samples of
  // its current share (a trainer whose loader prefetches passes what the model really used).
  std::string state() const { return state_after(taken_); }
  std::string state_after(std::uint64_t yielded) const;
  // Restore: kind and n (and the sampler's own identity fields) must match; the state's seed,
  // shuffle and epoch win. The share restarts at the saved count, on this sampler's ranks.
  void load_state(const std::string& text);

  // For samplers built on this one (the batch samplers): the same state under another kind,
  // with extra fields written after this sampler's own; load_state_as checks the kind `as_kind`
  // and lets `read_extra` check and adopt the extra fields (it runs before anything changes).
  std::string state_as(std::string_view as_kind, std::uint64_t yielded,
                       const std::function<void(StateWriter&)>& write_extra) const;
  void load_state_as(const std::string& text, std::string_view as_kind,
                     const std::function<void(const StateReader&)>& read_extra);

  // The current epoch's order (built on first use, cached until the epoch changes).
  const Order& order() const;

 protected:
  explicit ReproducibleSampler(std::uint64_t n) : n_(n) {}
  virtual Order build_order(std::uint64_t epoch) const = 0;
  virtual void write_fields(StateWriter& w) const = 0;  // after kind, n, epoch, consumed
  virtual void read_fields(const StateReader& r) = 0;   // check identity fields, adopt the rest
  void invalidate() { cache_.reset(); }
  std::uint64_t share_start() const { return start_; }

 private:
  std::uint64_t n_;
  int replicas_ = 1;
  int rank_ = 0;
  bool pad_ = false;
  std::uint64_t epoch_ = 0;
  std::uint64_t start_ = 0;  // C0: global consumed count at the start of this share
  std::uint64_t taken_ = 0;  // indices this rank has yielded from this share
  mutable std::optional<Order> cache_;
};

}  // namespace fastrun::samplers
