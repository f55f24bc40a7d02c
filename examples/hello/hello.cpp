// hello: what a rank sees. Run it under the launcher:
//   fastrun --nproc 4 ./hello
//   fastrun --devices 0,1 ./hello        # CUDA_VISIBLE_DEVICES is one device per rank
// Each rank prints its rank, its device and the environment contract, then passes a barrier
// through the job's store (FASTRUN_STORE) so that the ranks really meet.
#include <cstdio>
#include <cstdlib>

#include "fastrun/runtime/store/factory.h"

namespace {
const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
}  // namespace

int main() {
  const char* rank = env_or("FASTRUN_RANK", "?");
  std::printf("hello from rank %s of %s (local %s/%s) device CUDA_VISIBLE_DEVICES=%s (user's: %s) run %s store %s "
              "seed %s\n",
              rank, env_or("FASTRUN_WORLD_SIZE", "?"), env_or("FASTRUN_LOCAL_RANK", "?"),
              env_or("FASTRUN_LOCAL_WORLD_SIZE", "?"), env_or("CUDA_VISIBLE_DEVICES", "<all>"),
              env_or("USER_CUDA_VISIBLE_DEVICES", "-"), env_or("FASTRUN_RUN_ID", "?"), env_or("FASTRUN_STORE", "?"),
              env_or("FASTRUN_GLOBAL_SEED", "?"));
  std::fflush(stdout);
  if (const char* address = std::getenv("FASTRUN_STORE")) {
    // fastrun's errors are exceptions whose message says what went wrong and what to change:
    // print it and fail, rather than let an uncaught exception abort the rank.
    try {
      auto store = fastrun::connect_store(address);  // waits up to FASTRUN_TIMEOUT for the store
      fastrun::store_barrier(*store, "hello", std::atoi(env_or("FASTRUN_WORLD_SIZE", "1")), std::chrono::seconds(60));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hello: rank %s: %s\n", rank, e.what());
      return 1;
    }
    std::printf("rank %s passed the barrier\n", rank);
  }
  return 0;
}
