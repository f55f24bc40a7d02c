#pragma once
// A synthetic, seeded classification dataset generated in the program (nothing downloaded):
// n points x in R^dim with standard normal coordinates, labelled by a random linear "teacher"
// (label = argmax of T x). Every value comes from splitmix64 streams keyed by (seed, index) and
// a hand-written Box–Muller, so the data are bit-identical on every rank, platform and build
// (std::normal_distribution is not specified exactly, so it is not used).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace train_mlp {

std::uint64_t splitmix64(std::uint64_t& state);
// Uniform in [0, 1) with 53 random bits.
double uniform01(std::uint64_t& state);

struct Dataset {
  std::size_t n = 0, dim = 0, classes = 0;
  std::vector<float> x;        // n * dim, row-major
  std::vector<std::int32_t> y;  // n
  const float* row(std::size_t i) const { return x.data() + i * dim; }
};

Dataset make_dataset(std::size_t n, std::size_t dim, std::size_t classes, std::uint64_t seed);

}  // namespace train_mlp
