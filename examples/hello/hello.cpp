// hello: what a rank sees. Run it under the launcher, or under the cluster's own engine:
//   fastrun --nproc 4 ./hello
//   fastrun --devices 0,1 ./hello        # CUDA_VISIBLE_DEVICES is one device per rank
//   mpirun -np 4 ./hello                 # or srun -n 4 ./hello: no MASTER_ADDR/PORT needed
// Each rank joins the job (fastrun::join reads whichever environment started it), prints its
// rank, its device and the environment contract, then all-reduces rank+1 over host memory so
// that the ranks really meet: every rank prints the same sum, 1+2+...+N; then a barrier.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "fastrun/runtime/join/context.h"

namespace {
const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// The rank as the starter's environment names it, for a message when join() itself fails.
const char* rank_from_environment() {
  for (const char* name : {"FASTRUN_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})
    if (const char* v = std::getenv(name)) return v;
  return "?";
}
}  // namespace

int main() {
  // fastrun's errors are exceptions whose message says what went wrong and what to change:
  // print it and fail, rather than let an uncaught exception abort the rank.
  try {
    auto ctx = fastrun::join();  // waits up to FASTRUN_TIMEOUT for the store and the other ranks
    std::printf("hello from rank %d of %d (local %d/%d, node %d, from %s) device CUDA_VISIBLE_DEVICES=%s "
                "(user's: %s) run %s store %s seed %s\n",
                ctx->rank(), ctx->world_size(), ctx->local_rank(), ctx->local_world_size(), ctx->node_rank(),
                ctx->source().c_str(), env_or("CUDA_VISIBLE_DEVICES", "<all>"), env_or("USER_CUDA_VISIBLE_DEVICES", "-"),
                env_or("FASTRUN_RUN_ID", "?"), ctx->store().describe().c_str(), env_or("FASTRUN_GLOBAL_SEED", "?"));
    std::fflush(stdout);
    std::int64_t sum = ctx->rank() + 1;
    auto& host_group = ctx->world().cpu_group();
    host_group.all_reduce(fastrun::view_of(&sum, 1))->wait();
    std::printf("rank %d: all-reduce of 1..%d = %lld over %s\n", ctx->rank(), ctx->world_size(),
                static_cast<long long>(sum), host_group.backend_name().c_str());
    host_group.barrier()->wait();  // rank 0 may host the store: nobody leaves before the others are done
    std::printf("rank %d passed the barrier\n", ctx->rank());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hello: rank %s: %s\n", rank_from_environment(), e.what());
    return 1;
  }
  return 0;
}
