// Uses one vendored fastrun library: a world of two, rank 1's share of ten samples.
#include <cstdio>

#include <fastrun/samplers/samplers.h>

int main() {
  fastrun::samplers::SequentialSampler sampler(10);
  sampler.set_distributed(2, 1, false);
  std::printf("sampler_app: %llu samples\n", static_cast<unsigned long long>(sampler.num_samples()));
  return 0;
}
