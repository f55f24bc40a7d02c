// DDP over real rank processes and the real gloo backend (forked by test_support/rank_runner.h,
// shm:// store): averaging, launch order, no_sync, the unused-parameter error, and the
// equivalence of N ranks x batch b with 1 rank x batch N*b for a linear least-squares model.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "fastrun/runtime/ddp/buffer_ops.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

test::RankRunOptions gloo_options() {
  test::RankRunOptions o;
  o.timeout = std::chrono::milliseconds(60000);
  o.extra_env["FASTRUN_BACKEND"] = "gloo";
  // CPU ranks, as the launcher starts them: no CUDA device. Otherwise, on a GPU machine or
  // under the CPU model of CUDA (docs/cuda-model.md), every rank sees device 0 and join()
  // refuses two ranks on one GPU.
  o.extra_env["CUDA_VISIBLE_DEVICES"] = "";
  return o;
}

// Linear regression y = w . x + c on a fixed synthetic set; each step uses `global` samples
// starting at step * global; a rank takes the interleaved positions rank, rank + R, ...
struct Linear {
  static constexpr std::size_t kDim = 300;  // 1200 B of weights: two buckets with a 1 KiB first cap
  std::vector<float> w = std::vector<float>(kDim, 0.f), gw = std::vector<float>(kDim, 0.f);
  std::vector<float> c = std::vector<float>(1, 0.f), gc = std::vector<float>(1, 0.f);

  static float x(std::size_t sample, std::size_t k) { return std::sin(0.37f * sample + 0.11f * k); }
  static float y(std::size_t sample) { return std::cos(0.05f * sample); }

  // Adds scale * gradient of the squared error of `samples` into gw, gc.
  void backward(const std::vector<std::size_t>& samples, double scale) {
    for (auto s : samples) {
      double pred = c[0];
      for (std::size_t k = 0; k < kDim; ++k) pred += w[k] * x(s, k);
      const double err = pred - y(s);
      for (std::size_t k = 0; k < kDim; ++k) gw[k] += static_cast<float>(scale * 2 * err * x(s, k));
      gc[0] += static_cast<float>(scale * 2 * err);
    }
  }
  std::vector<DdpParameter> params() {
    return {{"w", view_of(w.data(), w.size()), view_of(gw.data(), gw.size())},
            {"c", view_of(c.data(), c.size()), view_of(gc.data(), gc.size())}};
  }
};

// Trains `steps` SGD steps on R ranks with per-rank batch b (accum micro-batches per step,
// all but the last under no_sync); returns the final w and c.
std::vector<float> train_linear(Group* world, int R, int rank, std::size_t b, int steps, std::size_t accum) {
  Linear m;
  DdpOptions options;
  options.first_bucket_bytes = 1024;
  std::unique_ptr<DistributedDataParallel> ddp;
  if (world) ddp = std::make_unique<DistributedDataParallel>(*world, m.params(), options);
  for (int step = 0; step < steps; ++step) {
    std::fill(m.gw.begin(), m.gw.end(), 0.f);
    m.gc[0] = 0;
    std::vector<std::size_t> mine;
    for (std::size_t j = 0; j < b; ++j) mine.push_back(step * b * R + j * R + rank);
    const std::size_t micro = b / accum;
    for (std::size_t a = 0; a < accum; ++a) {
      std::vector<std::size_t> part(mine.begin() + a * micro, mine.begin() + (a + 1) * micro);
      if (ddp && a + 1 < accum) {
        auto guard = ddp->no_sync();
        m.backward(part, 1.0 / b);
        ddp->synchronize();  // a no-op under no_sync
      } else {
        m.backward(part, 1.0 / b);
        if (ddp) ddp->synchronize();
      }
    }
    for (std::size_t k = 0; k < Linear::kDim; ++k) m.w[k] -= 0.05f * m.gw[k];
    m.c[0] -= 0.05f * m.gc[0];
  }
  std::vector<float> out(Linear::kDim + 1);
  std::copy(m.w.begin(), m.w.end(), out.begin());
  out[Linear::kDim] = m.c[0];
  return out;
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}
std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> out(static_cast<std::size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
  return out;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  REQUIRE(a.size() == b.size());
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  INFO("max |a - b| = " << max_diff << ", max |a| = " << max_abs);
  CHECK(max_diff <= rel * max_abs);
}

}  // namespace

TEST_CASE("DDP on gloo: N ranks with batch b equal 1 rank with batch N times b, and no_sync equals one big batch",
          "[ddp][process][equivalence]") {
  const int steps = 20;
  const std::size_t b = 8;
  for (int R : {2, 4}) {
    const auto reference = train_linear(nullptr, 1, 0, b * R, steps, 1);
    const std::string out = fmt::format("/tmp/fastrun-ddp-eq-{}-{}.bin", ::getpid(), R);
    auto results = test::run_ranks(
        R,
        [&](int rank) {
          auto ctx = join();
          auto w = train_linear(&ctx->world(), R, rank, b, steps, 1);
          if (rank == 0) write_floats(out, w);
        },
        gloo_options());
    REQUIRE(test::all_ok(results));
    check_close(read_floats(out), reference, 1e-5);
    std::remove(out.c_str());
  }
  // no_sync over k = 4 micro-batches of b/4 on 2 ranks == one batch of b per rank.
  const auto reference = train_linear(nullptr, 1, 0, b * 2, steps, 1);
  const std::string out = fmt::format("/tmp/fastrun-ddp-nosync-{}.bin", ::getpid());
  auto results = test::run_ranks(
      2,
      [&](int rank) {
        auto ctx = join();
        auto w = train_linear(&ctx->world(), 2, rank, b, steps, 4);
        if (rank == 0) write_floats(out, w);
      },
      gloo_options());
  REQUIRE(test::all_ok(results));
  check_close(read_floats(out), reference, 1e-5);
  std::remove(out.c_str());
}

TEST_CASE("DDP on gloo: rank 0's parameters, averaged gradients, unused parameter named", "[ddp][process]") {
  auto results = test::run_ranks(
      3,
      [](int rank) {
        auto ctx = join();
        std::vector<float> v1(5000, float(rank)), g1(5000), v2(300, float(rank)), g2(300);
        DdpOptions options;
        options.first_bucket_bytes = 1024;
        options.bucket_bytes = 4096;
        DistributedDataParallel ddp(ctx->world(), {{"big", view_of(v1.data(), v1.size()), view_of(g1.data(), g1.size())},
                                                   {"small", view_of(v2.data(), v2.size()), view_of(g2.data(), g2.size())}},
                                    options);
        RANK_REQUIRE(v1[4999] == 0.f && v2[0] == 0.f);
        RANK_REQUIRE(ddp.buckets().size() == 2);
        for (int step = 0; step < 3; ++step) {
          std::fill(g1.begin(), g1.end(), float(rank * 2 + step));
          std::fill(g2.begin(), g2.end(), float(rank));
          ddp.mark_ready(0);  // out of order: bucket 0 holds "small", launched only after it
          ddp.mark_ready(1);
          ddp.finish();
          RANK_REQUIRE(g1[0] == Approx(2.0 + step) && g1[4999] == Approx(2.0 + step));
          RANK_REQUIRE(g2[17] == Approx(1.0));
        }
        ddp.mark_ready(1);  // "big" never marked ready on any rank
        try {
          ddp.finish();
          RANK_REQUIRE(!"finish() did not throw");
        } catch (const Error& e) {
          RANK_REQUIRE(std::string(e.what()).find("0 ('big')") != std::string::npos);
        }
        ddp.synchronize();  // usable again
        // ReduceOp::avg: the backend averages (no pre-division); float16 buffers.
        std::vector<std::uint16_t> hv(64), hg(64, ddp::float_to_half(float(rank)));
        DdpOptions avg;
        avg.reduce = ReduceOp::avg;
        DistributedDataParallel half(ctx->world(), {{"h", {hv.data(), 64, DType::float16}, {hg.data(), 64, DType::float16}}},
                                     avg);
        half.synchronize();
        RANK_REQUIRE(ddp::half_to_float(hg[63]) == 1.0f);
      },
      gloo_options());
  REQUIRE(test::all_ok(results));
}
