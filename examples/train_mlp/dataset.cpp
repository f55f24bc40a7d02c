#include "dataset.h"

#include <cmath>

namespace train_mlp {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(std::uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }

namespace {
double normal(std::uint64_t& state) {
  const double u1 = 1.0 - uniform01(state);  // (0, 1]: log is finite
  const double u2 = uniform01(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}
}  // namespace

Dataset make_dataset(std::size_t n, std::size_t dim, std::size_t classes, std::uint64_t seed) {
  Dataset d;
  d.n = n;
  d.dim = dim;
  d.classes = classes;
  d.x.resize(n * dim);
  d.y.resize(n);
  std::uint64_t ts = seed ^ 0x7465616368657200ull;  // the teacher's own stream
  std::vector<double> teacher(classes * dim);
  for (auto& t : teacher) t = normal(ts);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t s = seed * 0x100000001b3ull + i;  // one stream per sample
    for (std::size_t k = 0; k < dim; ++k) d.x[i * dim + k] = static_cast<float>(normal(s));
    std::size_t best = 0;
    double best_score = -1e300;
    for (std::size_t c = 0; c < classes; ++c) {
      double score = 0;
      for (std::size_t k = 0; k < dim; ++k) score += teacher[c * dim + k] * d.x[i * dim + k];
      if (score > best_score) best_score = score, best = c;
    }
    d.y[i] = static_cast<std::int32_t>(best);
  }
  return d;
}

}  // namespace train_mlp
