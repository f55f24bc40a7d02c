// Uses the installed umbrella header and libraries the way a user's program would: joins a
// world of one (no FASTRUN_* variables set) on the backend FASTRUN_BACKEND names, and draws
// from a sampler. On a bad backend it prints the error and exits 3 instead of aborting.
#include <cstdio>

#include <fastrun/fastrun.h>

int main() {
  try {
    auto ctx = fastrun::join();
    fastrun::samplers::RandomSampler sampler(2);
    std::printf("consumer: rank %d of %d, %llu samples, backend %s\n", ctx->rank(), ctx->world_size(),
                static_cast<unsigned long long>(sampler.num_samples()), ctx->world().backend_name().c_str());
  } catch (const fastrun::Error& e) {
    std::printf("consumer error: %s\n", e.what());
    return 3;
  }
  return 0;
}
