#include "fastrun/runtime/fastnlp_compat/driver.h"

#include <cstdlib>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun {
namespace {

thread_local int t_all_ranks_depth = 0;

// Outside a job, the rank a launcher (torchrun, srun, mpirun) gave; a variable that is set but not
// a rank is an error naming it, not rank 0: a job whose ranks all thought they were 0 would all
// write the checkpoint.
int rank_from_environment() {
  if (auto r = env::find_int(env::kRank)) return static_cast<int>(*r);
  for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(name)) return static_cast<int>(text::parse_integer(name, v, 0, INT32_MAX));
  }
  return 0;
}

}  // namespace

int global_rank() {
  if (auto ctx = current_context()) return ctx->rank();
  return rank_from_environment();
}

bool is_global_zero() { return t_all_ranks_depth > 0 || global_rank() == 0; }

void barrier() {
  if (no_sync_level() >= 1) return;
  if (auto ctx = current_context()) ctx->world().barrier()->wait();
}

AllRanksGuard::AllRanksGuard() { ++t_all_ranks_depth; }
AllRanksGuard::~AllRanksGuard() { --t_all_ranks_depth; }

std::uint64_t per_rank_seed(std::uint64_t global_seed, int rank) {
  // splitmix64 (Steele, Lea, Flood 2014) of the seed offset by a rank-dependent odd constant:
  // a bijection of (seed + k*rank), so ranks never share a seed for one global seed.
  std::uint64_t z = global_seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(rank) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t per_rank_seed() {
  const auto seed = env::find_int(env::kGlobalSeed).value_or(0);
  return per_rank_seed(static_cast<std::uint64_t>(seed), global_rank());
}

}  // namespace fastrun
