// fastrun::torch::DistributedDataParallel over real rank processes (forked by
// test_support/rank_runner.h, shm:// store) on the shm and gloo backends: N ranks with batch b
// end with the same parameters as one process with batch N*b; no_sync accumulation equals one
// big batch; a layout mismatch and an unused parameter are named. One translation unit: each
// one that includes LibTorch costs ~20 s to compile.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/torch/ddp.h"
#include "test_support/rank_runner.h"
#include "test_support/skip.h"

// No `using namespace fastrun;`: fastrun::torch would make TORCH_MODULE's unqualified torch:: ambiguous.
using fastrun::join;
namespace test = fastrun::test;

namespace {

// A small MLP; `extra` adds a layer the forward pass never uses.
struct NetImpl : torch::nn::Module {
  NetImpl(std::int64_t hidden = 16, bool extra = false)
      : fc1(register_module("fc1", torch::nn::Linear(8, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, 1))) {
    if (extra) unused = register_module("unused", torch::nn::Linear(4, 4));
    // Deterministic weights from a formula (the same one tests/torch/ddp_python_reference.py uses).
    torch::NoGradGuard no_grad;
    std::int64_t k = 0;
    for (auto& p : parameters()) {
      auto flat = p.view({-1});
      for (std::int64_t i = 0; i < flat.numel(); ++i) flat[i] = 0.3 * std::sin(0.7 * static_cast<double>(i) + 1.3 * static_cast<double>(k));
      ++k;
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3->forward(torch::tanh(fc2->forward(torch::tanh(fc1->forward(x)))));
  }
  torch::nn::Linear fc1, fc2, fc3, unused{nullptr};
};
TORCH_MODULE(Net);

// Sample s: x_k = sin(0.37 s + 0.11 k), y = cos(0.05 s). A step uses samples [step*B, step*B + B)
// of the global batch B = ranks * b; rank r takes the positions r, r + ranks, ...
std::pair<torch::Tensor, torch::Tensor> batch(int step, int ranks, int rank, int b, int first = 0, int count = -1) {
  if (count < 0) count = b;
  auto x = torch::empty({count, 8});
  auto y = torch::empty({count, 1});
  for (int j = 0; j < count; ++j) {
    const double s = step * ranks * b + (first + j) * ranks + rank;
    for (int k = 0; k < 8; ++k) x[j][k] = std::sin(0.37 * s + 0.11 * k);
    y[j][0] = std::cos(0.05 * s);
  }
  return {x, y};
}

std::vector<float> flat_parameters(Net& net) {
  std::vector<float> out;
  for (const auto& p : net->parameters()) {
    auto c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

// max |a - b| <= rel * max |a|
void rank_check_close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  RANK_REQUIRE(a.size() == b.size());
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  if (max_diff > rel * max_abs)
    throw std::runtime_error(fmt::format("parameters differ: max |a - b| = {} > {} * max |a| = {}", max_diff, rel, max_abs));
}

struct TrainOptions {
  int steps = 8;
  int b = 8;          // per-rank batch
  int accum = 1;      // micro-batches per step, all but the last under no_sync
  bool reset_grads = false;  // every other step, set the gradients to none (zero_grad(set_to_none))
};

// SGD for `steps` steps; with `ddp`, this rank's share of the global batch.
std::vector<float> train(Net& net, fastrun::torch::DistributedDataParallel* ddp, int ranks, int rank,
                         const TrainOptions& o) {
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05));
  for (int step = 0; step < o.steps; ++step) {
    if (o.reset_grads && step % 2 == 1) {
      for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
    } else {
      opt.zero_grad();
    }
    const int micro = o.b / o.accum;
    for (int a = 0; a < o.accum; ++a) {
      auto [x, y] = batch(step, ranks, rank, o.b, a * micro, micro);
      // Scaled so the micro-batches add up to the mean over the rank's batch.
      auto loss = torch::mse_loss(net->forward(x), y) * (static_cast<double>(micro) / o.b);
      if (ddp && a + 1 < o.accum) {
        auto guard = ddp->no_sync();
        loss.backward();
      } else {
        loss.backward();
      }
    }
    if (ddp) RANK_REQUIRE(!ddp->step_open());  // the last gradient's hook finished the step
    opt.step();
  }
  return flat_parameters(net);
}

test::RankRunOptions backend_options(const std::string& backend) {
  test::RankRunOptions o;
  o.timeout = std::chrono::milliseconds(90000);
  o.extra_env["FASTRUN_BACKEND"] = backend;
  return o;
}

// Rank 0 trains the single-process reference (batch ranks * b) itself and compares.
void run_equivalence(int ranks, const std::string& backend, TrainOptions o) {
  auto results = test::run_ranks(
      ranks,
      [&](int rank) {
        torch::set_num_threads(1);
        auto ctx = join();
        Net net;
        if (rank != 0) {  // different start on the other ranks: the set-up broadcast fixes it
          torch::NoGradGuard no_grad;
          for (auto& p : net->parameters()) p.add_(1.0 + rank);
        }
        fastrun::torch::DdpOptions options;
        options.first_bucket_bytes = 64;  // 3 buckets for this small model (fc3, fc2, fc1)
        options.bucket_bytes = 256;
        fastrun::torch::DistributedDataParallel ddp(ctx->world(), net, options);
        RANK_REQUIRE(ddp.engine().buckets().size() >= 3);
        const auto mine = train(net, &ddp, ranks, rank, o);
        if (rank != 0) return;
        Net reference;
        TrainOptions single = o;
        single.b = o.b * ranks;
        single.accum = 1;
        rank_check_close(mine, train(reference, nullptr, 1, 0, single), 2e-5);
      },
      backend_options(backend));
  REQUIRE(test::all_ok(results));
}

std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const fastrun::Error& e) {
    return e.what();
  }
  throw std::runtime_error("expected a fastrun::Error, got none");
}

}  // namespace

TEST_CASE("torch DDP: 2 and 4 ranks give the parameters of one process with the 2x and 4x batch (shm, gloo)",
          "[torch][ddp][equivalence]") {
  TrainOptions o;
  o.reset_grads = true;  // also covers gradients set to none between steps
  run_equivalence(2, "shm", o);
  run_equivalence(2, "gloo", o);
  run_equivalence(4, "shm", o);
  run_equivalence(4, "gloo", o);
}

TEST_CASE("torch DDP: no_sync accumulation over 4 micro-batches equals one big batch", "[torch][ddp][no_sync]") {
  TrainOptions o;
  o.accum = 4;
  run_equivalence(2, "gloo", o);
  run_equivalence(2, "shm", o);
}

TEST_CASE("torch DDP: a parameter layout mismatch names the parameter on every rank", "[torch][ddp][layout]") {
  auto results = test::run_ranks(
      2,
      [](int rank) {
        torch::set_num_threads(1);
        auto ctx = join();
        Net net(rank == 1 ? 17 : 16);
        const auto what = expect_error([&] { fastrun::torch::DistributedDataParallel ddp(ctx->world(), net); });
        if (what.find("fc1.weight' [16, 8] float32 on cpu on ranks [0]") == std::string::npos ||
            what.find("fc1.weight' [17, 8] float32 on cpu on ranks [1]") == std::string::npos)
          throw std::runtime_error("unexpected message: " + what);
      },
      backend_options("gloo"));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("torch DDP: an unused parameter is named, or averaged when asked", "[torch][ddp][unused]") {
  auto results = test::run_ranks(
      2,
      [](int rank) {
        torch::set_num_threads(1);
        auto ctx = join();
        {
          Net net(16, /*extra=*/true);
          fastrun::torch::DistributedDataParallel ddp(ctx->world(), net);
          auto [x, y] = batch(0, 2, rank, 4);
          torch::mse_loss(net->forward(x), y).backward();
          RANK_REQUIRE(ddp.step_open());
          const auto what = expect_error([&] { ddp.finish(); });
          if (what.find("2 parameter(s) got no gradient in this backward(): unused.weight, unused.bias") == std::string::npos)
            throw std::runtime_error("unexpected message: " + what);
          // Without finish(): the next backward() names them.
          torch::mse_loss(net->forward(x), y).backward();
          const auto next = expect_error([&] { torch::mse_loss(net->forward(x), y).backward(); });
          if (next.find("unused.weight") == std::string::npos || next.find("finish() was not called") == std::string::npos)
            throw std::runtime_error("unexpected message: " + next);
        }
        {
          // average: finish() lets them take part; the used ones are averaged as usual.
          Net net(16, /*extra=*/true);
          fastrun::torch::DdpOptions options;
          options.unused_parameters = fastrun::torch::UnusedParameters::average;
          fastrun::torch::DistributedDataParallel ddp(ctx->world(), net, options);
          for (int step = 0; step < 3; ++step) {
            auto [x, y] = batch(step, 2, rank, 4);
            torch::mse_loss(net->forward(x), y).backward();
            ddp.finish();
            RANK_REQUIRE(!ddp.step_open());
            RANK_REQUIRE(net->unused->weight.grad().defined());
            RANK_REQUIRE(net->unused->weight.grad().abs().sum().item<float>() == 0.f);
          }
          // The averaged gradient is the same on both ranks.
          auto g = net->fc1->weight.grad().clone();
          auto other = g.clone();
          ctx->world().broadcast(fastrun::BufferView{other.data_ptr(), static_cast<std::size_t>(other.numel()), fastrun::DType::float32}, {1})->wait();
          RANK_REQUIRE(torch::equal(g, other));
        }
      },
      backend_options("gloo"));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("torch DDP: the loss curve matches PyTorch's own DDP of the same torch version (gloo) on the same model, "
          "data and weights", "[torch][ddp][pytorch]") {
  // The python whose torch is the LibTorch linked here (FASTRUN_TORCH_REFERENCE_PYTHON,
  // tests/torch/CMakeLists.txt): its DDP is the reference, so a wheel's LibTorch 2.x is compared
  // with 2.x's DDP and Debian's 1.13 with 1.13's.
  const std::string python_bin = FASTRUN_TORCH_REFERENCE_PYTHON;
  if (std::system(("'" + python_bin + "' -c 'import torch.distributed' >/dev/null 2>&1").c_str()) != 0) {
    test::skip_case(python_bin + " with torch is not installed (Debian: python3-torch; a wheel: its venv's python)");
    return;
  }
  const int steps = 30;
  const std::string out = fmt::format("/tmp/fastrun-torch-ddp-python-{}.txt", ::getpid());
  const std::string command = fmt::format("timeout -k 5 150 '{}' {} --nproc 2 --steps {} --out {}", python_bin,
                                          FASTRUN_TORCH_PY_REFERENCE, steps, out);
  // PyTorch's own gloo teardown aborts a worker now and then on a busy machine ("terminate called
  // without an active exception", SIGABRT; torch 2.x: 1 of 16 runs beside two busy loops, once in
  // CI, with both ranks through a barrier before destroy_process_group). That is the reference's
  // crash, not fastrun's: it is run again, up to three times, and its losses are checked as before.
  int status = -1;
  for (int attempt = 1; attempt <= 3 && status != 0; ++attempt) {
    status = std::system(command.c_str());
    if (status != 0) WARN("PyTorch's reference run " << attempt << " of 3 failed (wait status " << status << ")");
  }
  REQUIRE(status == 0);
  std::vector<double> python;
  std::string version_line;
  {
    std::ifstream in(out);
    std::getline(in, version_line);
    for (double v; in >> v;) python.push_back(v);
  }
  std::remove(out.c_str());
  // Same major.minor as the LibTorch compiled in: a comparison against another version's DDP
  // would not test this build.
  const std::string linked = fmt::format("torch {}.{}.", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR);
  INFO("reference: " << version_line << " (" << python_bin << "), linked LibTorch " << TORCH_VERSION);
  REQUIRE(version_line.rfind(linked, 0) == 0);
  REQUIRE(python.size() == static_cast<std::size_t>(steps));
  auto results = test::run_ranks(
      2,
      [&](int rank) {
        torch::set_num_threads(1);
        auto ctx = join();
        Net net;
        fastrun::torch::DistributedDataParallel ddp(ctx->world(), net);
        torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05));
        for (int step = 0; step < steps; ++step) {
          opt.zero_grad();
          auto [x, y] = batch(step, 2, rank, 8);
          auto loss = torch::mse_loss(net->forward(x), y);
          loss.backward();
          opt.step();
          const double mine = loss.item<double>();
          if (rank == 0 && std::fabs(mine - python[step]) > 1e-5 * std::max(1.0, std::fabs(python[step])))
            throw std::runtime_error(fmt::format("step {}: loss {} here, {} with PyTorch's DDP", step, mine, python[step]));
        }
      },
      backend_options("gloo"));
  REQUIRE(test::all_ok(results));
}
