#pragma once
// The fastNLP driver surface (docs/runtime.md, "Driver surface"): what fastNLP users call
// around their training loop. These act on the current context (the last fastrun::join() still
// alive, join/context.h); without one they behave as a world of one (rank from the environment).
//
//   if (fastrun::is_global_zero()) save(...);
//   fastrun::barrier();                                   // no-op at NO_SYNC >= 1
//   auto metrics = fastrun::all_gather(local_metrics);    // {local} at NO_SYNC 2
//   auto cfg = fastrun::broadcast_object(cfg_on_0, 0);    // object_collectives.h; own value at NO_SYNC 2
//   fastrun::rank_zero_call([&] { write_report(); });     // rank 0 only, NO_SYNC 2 inside
//   { fastrun::NoSyncGuard g(2); ... }                    // ddp/no_sync_guard.h; restored on every exit path
//   { fastrun::AllRanksGuard g; ... }                     // every rank counts as rank 0 inside
//   std::mt19937_64 rng(fastrun::per_rank_seed());        // seed from FASTRUN_GLOBAL_SEED + rank
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "fastrun/runtime/ddp/no_sync_guard.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/objects/object_collectives.h"
#include "fastrun/runtime/process_group/no_sync.h"

namespace fastrun {

// Global rank of this process: the current context's, else FASTRUN_RANK / RANK / SLURM_PROCID /
// OMPI_COMM_WORLD_RANK, else 0 (usable before join(), as fastNLP's get_global_rank). A set
// variable that is not a whole number >= 0 is a ConfigError naming it.
int global_rank();
// Rank 0, or inside an AllRanksGuard scope.
bool is_global_zero();
// World barrier of the current context; a no-op at NO_SYNC >= 1 or without a context.
void barrier();

// Every rank counts as global zero (is_global_zero, rank_zero_call) inside its scope.
// Nests; restored on every exit path. Thread-local, like the call stack it scopes.
class AllRanksGuard {
 public:
  AllRanksGuard();
  ~AllRanksGuard();
  AllRanksGuard(const AllRanksGuard&) = delete;
  AllRanksGuard& operator=(const AllRanksGuard&) = delete;
};

// Runs f() only where is_global_zero(), with NO_SYNC level 2 inside (so a collective in f
// cannot deadlock the ranks that skip it). Returns f's value there, nullopt elsewhere.
template <class F>
auto rank_zero_call(F&& f) {
  using R = std::invoke_result_t<F&>;
  if constexpr (std::is_void_v<R>) {
    if (!is_global_zero()) return;
    NoSyncGuard guard(2);
    std::forward<F>(f)();
  } else {
    if (!is_global_zero()) return std::optional<R>{};
    NoSyncGuard guard(2);
    return std::optional<R>(std::forward<F>(f)());
  }
}

// A 64-bit seed for this rank's RNG: splitmix64(global_seed + 0x9E3779B97F4A7C15 * (rank + 1)).
// Distinct per rank, equal across runs; documented in docs/runtime.md.
std::uint64_t per_rank_seed(std::uint64_t global_seed, int rank);
// From FASTRUN_GLOBAL_SEED (0 when unset) and global_rank().
std::uint64_t per_rank_seed();

// fastNLP's all_gather(obj): every rank's object in rank order; {obj} at NO_SYNC 2 or without
// a context.
template <class T>
  requires(!std::is_base_of_v<Group, std::decay_t<T>>)
std::vector<T> all_gather(const T& value) {
  auto ctx = current_context();
  if (!ctx) return {value};
  return all_gather_object(value, &ctx->world());
}

}  // namespace fastrun
