#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace train_mlp {

Mlp::Mlp(std::size_t d, std::size_t h, std::size_t c, std::uint64_t seed) : dim(d), hidden(h), classes(c) {
  param = {std::vector<float>(h * d), std::vector<float>(h), std::vector<float>(c * h), std::vector<float>(c)};
  std::uint64_t s = seed ^ 0x6d6c702d696e6974ull;
  auto init = [&](std::vector<float>& w, std::size_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (auto& v : w) v = static_cast<float>((2 * uniform01(s) - 1) * bound);
  };
  init(param[0], d);
  init(param[2], h);
  for (auto& p : param) grad.emplace_back(p.size(), 0.f);
}

std::size_t Mlp::num_values() const {
  std::size_t n = 0;
  for (auto& p : param) n += p.size();
  return n;
}

std::vector<float> Mlp::values() const {
  std::vector<float> v;
  v.reserve(num_values());
  for (auto& p : param) v.insert(v.end(), p.begin(), p.end());
  return v;
}

void Mlp::load_values(const std::vector<float>& v) {
  if (v.size() != num_values())
    throw std::invalid_argument("Mlp::load_values: " + std::to_string(v.size()) + " values for a model of " +
                                std::to_string(num_values()));
  auto it = v.begin();
  for (auto& p : param) {
    std::copy(it, it + static_cast<long>(p.size()), p.begin());
    it += static_cast<long>(p.size());
  }
}

void Mlp::zero_grad() {
  for (auto& g : grad) std::fill(g.begin(), g.end(), 0.f);
}

void Mlp::sgd_step(float lr) {
  for (std::size_t k = 0; k < param.size(); ++k)
    for (std::size_t i = 0; i < param[k].size(); ++i) param[k][i] -= lr * grad[k][i];
}

BatchResult forward_backward(Mlp& m, const Dataset& data, const std::vector<std::uint64_t>& idx, double scale,
                             const std::function<void(std::size_t)>& ready) {
  const std::size_t b = idx.size(), D = m.dim, H = m.hidden, C = m.classes;
  const auto &W1 = m.param[0], &b1 = m.param[1], &W2 = m.param[2], &b2 = m.param[3];
  std::vector<double> hpre(b * H), h(b * H), dlogit(b * C);
  BatchResult out;
  // Forward, and d(loss)/d(logits) per sample.
  std::vector<double> logit(C);
  for (std::size_t s = 0; s < b; ++s) {
    const float* x = data.row(idx[s]);
    for (std::size_t j = 0; j < H; ++j) {
      double a = b1[j];
      for (std::size_t k = 0; k < D; ++k) a += static_cast<double>(W1[j * D + k]) * x[k];
      hpre[s * H + j] = a;
      h[s * H + j] = a > 0 ? a : 0;
    }
    double mx = -1e300;
    for (std::size_t c = 0; c < C; ++c) {
      double a = b2[c];
      for (std::size_t j = 0; j < H; ++j) a += static_cast<double>(W2[c * H + j]) * h[s * H + j];
      logit[c] = a;
      mx = std::max(mx, a);
    }
    double z = 0;
    for (std::size_t c = 0; c < C; ++c) z += std::exp(logit[c] - mx);
    const auto label = static_cast<std::size_t>(data.y[idx[s]]);
    out.loss_sum += -(logit[label] - mx - std::log(z));
    out.correct += static_cast<std::uint64_t>(std::max_element(logit.begin(), logit.end()) - logit.begin()) == label;
    for (std::size_t c = 0; c < C; ++c)
      dlogit[s * C + c] = scale * (std::exp(logit[c] - mx) / z - (c == label ? 1.0 : 0.0));
  }
  // Layer 2 gradients: final now, hand them over before layer 1 is computed.
  {
    auto &gW2 = m.grad[2], &gb2 = m.grad[3];
    for (std::size_t c = 0; c < C; ++c) {
      double gb = 0;
      for (std::size_t s = 0; s < b; ++s) gb += dlogit[s * C + c];
      gb2[c] += static_cast<float>(gb);
      for (std::size_t j = 0; j < H; ++j) {
        double g = 0;
        for (std::size_t s = 0; s < b; ++s) g += dlogit[s * C + c] * h[s * H + j];
        gW2[c * H + j] += static_cast<float>(g);
      }
    }
    ready(3);
    ready(2);
  }
  // Layer 1.
  std::vector<double> dh(b * H);
  for (std::size_t s = 0; s < b; ++s)
    for (std::size_t j = 0; j < H; ++j) {
      if (hpre[s * H + j] <= 0) continue;
      double a = 0;
      for (std::size_t c = 0; c < C; ++c) a += dlogit[s * C + c] * W2[c * H + j];
      dh[s * H + j] = a;
    }
  auto &gW1 = m.grad[0], &gb1 = m.grad[1];
  std::vector<double> acc(D);
  for (std::size_t j = 0; j < H; ++j) {
    double gb = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::size_t s = 0; s < b; ++s) {
      const double d = dh[s * H + j];
      if (d == 0) continue;
      gb += d;
      const float* x = data.row(idx[s]);
      for (std::size_t k = 0; k < D; ++k) acc[k] += d * x[k];
    }
    gb1[j] += static_cast<float>(gb);
    for (std::size_t k = 0; k < D; ++k) gW1[j * D + k] += static_cast<float>(acc[k]);
  }
  ready(1);
  ready(0);
  return out;
}

}  // namespace train_mlp
