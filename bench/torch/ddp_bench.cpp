// fastrun-bench-torch: step time of a LibTorch MLP trained data-parallel on CPU ranks, through
// fastrun::torch::DistributedDataParallel (shm, gloo), a hand-written all-reduce per parameter
// after backward() (what LibTorch tutorials do), one fused all-reduce of all gradient bytes
// after backward(), no communication at all, and PyTorch's own DDP (python3-torch, gloo), each
// run in the same session:
//
//   fastrun-bench-torch [--nproc 2,4] [--hidden 512] [--layers 4] [--batch 32] [--steps 20]
//
// A separate binary from fastrun-bench so that only it loads LibTorch. Without FASTRUN_RANK it
// orchestrates: each configuration is a job of the fastrun CLI running this binary with
// --worker MODE; rank 0 writes its median step time to a file. Every rank uses one intra-op
// thread (as the Python side does), so the ranks do not fight over the cores.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/tools/flags/number_flags.h"
#include "fastrun/torch/ddp.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<int> nproc{2, 4};
  int hidden = 512, layers = 4, batch = 32, steps = 20, warmup = 3;
  std::string worker, backend = "gloo", out;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("LibTorch DDP step times on CPU ranks (adapter on shm and gloo, hand-written all-reduce, one fused "
               "all-reduce, no communication, PyTorch's DDP)",
               "fastrun-bench-torch");
  fastrun::flags::integer_list(app, "--nproc", a.nproc, "rank counts, comma-separated", 1, 1024);
  fastrun::flags::integer(app, "--hidden", a.hidden, "MLP width", 1, 1 << 20);
  fastrun::flags::integer(app, "--layers", a.layers, "hidden layers", 1, 1000);
  fastrun::flags::integer(app, "--batch", a.batch, "per-rank batch", 1, 1 << 20);
  fastrun::flags::integer(app, "--steps", a.steps, "timed steps", 1, 1000000);
  // What the orchestrating run passes to the ranks it starts.
  fastrun::flags::choice(app, "--worker", a.worker, "run as one rank of this kind", {"local", "adapter", "handwritten", "fused"})
      ->group("internal");
  app.add_option("--backend", a.backend, "the worker's backend")->group("internal");
  app.add_option("--out", a.out, "where the worker writes its step times")->group("internal");
  fastrun::flags::parse(app, argc, argv);
  return a;
}

// The same MLP as bench/torch/ddp_bench.py: 256 -> hidden (x layers) -> 10, tanh between.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int hidden, int layers) {
    int in = 256;
    for (int l = 0; l < layers; ++l) {
      fcs.push_back(register_module(fmt::format("fc{}", l), torch::nn::Linear(in, hidden)));
      in = hidden;
    }
    head = register_module("head", torch::nn::Linear(in, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& fc : fcs) x = torch::tanh(fc->forward(x));
    return head->forward(x);
  }
  std::vector<torch::nn::Linear> fcs;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Mlp);

fastrun::BufferView view(torch::Tensor& t) {
  return fastrun::BufferView{t.data_ptr(), static_cast<std::size_t>(t.numel()), fastrun::DType::float32};
}

// One rank of one configuration; rank 0 writes "median_seconds" to --out.
int run_worker(const Args& a) {
  torch::set_num_threads(1);
  torch::manual_seed(1);
  auto ctx = fastrun::join();
  auto& world = ctx->world();
  Mlp net(a.hidden, a.layers);
  std::unique_ptr<fastrun::torch::DistributedDataParallel> ddp;
  if (a.worker == "adapter") ddp = std::make_unique<fastrun::torch::DistributedDataParallel>(world, net);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::randn({a.batch, 256});
  auto y = torch::randn({a.batch, 10});
  std::int64_t numel = 0;
  for (const auto& p : net->parameters()) numel += p.numel();
  auto flat = torch::zeros({numel});
  std::vector<double> times;
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    world.barrier()->wait();
    const auto start = Clock::now();
    opt.zero_grad();
    torch::mse_loss(net->forward(x), y).backward();
    if (a.worker == "handwritten") {  // the tutorial way: one blocking all-reduce per parameter
      for (auto& p : net->parameters()) {
        world.all_reduce(view(p.mutable_grad()))->wait();
        p.mutable_grad().div_(world.size());
      }
    } else if (a.worker == "fused") {  // one all-reduce of every gradient byte, after backward
      std::int64_t off = 0;
      for (auto& p : net->parameters()) {
        flat.narrow(0, off, p.numel()).copy_(p.grad().view({-1}));
        off += p.numel();
      }
      world.all_reduce(view(flat))->wait();
      flat.div_(world.size());
      off = 0;
      for (auto& p : net->parameters()) {
        p.mutable_grad().view({-1}).copy_(flat.narrow(0, off, p.numel()));
        off += p.numel();
      }
    }
    opt.step();
    if (step >= a.warmup) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  if (ctx->rank() == 0) std::ofstream(a.out) << times[times.size() / 2] << "\n";
  return 0;
}

std::string exe_dir() { return fs::read_symlink("/proc/self/exe").parent_path().string(); }

// The fastrun CLI: installed beside this binary, or in the build tree's tools/.
std::string find_fastrun() {
  for (const fs::path& p : {fs::path(exe_dir()) / "fastrun", fs::path(exe_dir()) / "../../tools/fastrun",
                            fs::path(exe_dir()) / "../tools/fastrun"})
    if (fs::exists(p)) return fs::canonical(p).string();
  return "fastrun";
}

std::string find_script() {
  for (const fs::path& p : {fs::path(exe_dir()) / "../share/fastrun/torch_ddp_bench.py",
                            fs::path(FASTRUN_BENCH_TORCH_SOURCE_DIR) / "ddp_bench.py"})
    if (fs::exists(p)) return p.string();
  return "";
}

double read_seconds(const std::string& path) {
  std::ifstream in(path);
  double v = -1;
  if (!(in >> v)) v = -1;
  std::remove(path.c_str());
  return v;
}

int orchestrate(const Args& a) {
  const std::vector<int>& counts = a.nproc;
  const std::string fastrun_cli = find_fastrun(), script = find_script();
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const bool have_python = !script.empty() && std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
  const std::string model = fmt::format("--hidden {} --layers {} --batch {} --steps {}", a.hidden, a.layers, a.batch, a.steps);
  std::int64_t numel = 0;
  {
    Mlp net(a.hidden, a.layers);
    for (const auto& p : net->parameters()) numel += p.numel();
  }
  fmt::print("LibTorch {} MLP 256-{}x{}-10 ({} parameters, {:.1f} MB of gradients), batch {} per rank, median of {} steps,\n"
             "one intra-op thread per rank. Step = zero_grad + forward + backward + gradient averaging + SGD step.\n\n",
             TORCH_VERSION, a.hidden, a.layers, numel, numel * 4 / 1e6, a.batch, a.steps);
  fmt::print("{:>5}  {:<8} {:<48} {:>12} {:>12}\n", "ranks", "backend", "how the gradients are averaged", "step ms", "vs no comm");
  for (int n : counts) {
    struct Row { std::string backend, what; double s; };
    std::vector<Row> rows;
    auto job = [&](const std::string& mode, const std::string& backend) {
      const std::string out = fmt::format("/tmp/fastrun-bench-torch-{}-{}.txt", ::getpid(), rows.size());
      const std::string cmd = fmt::format("FASTRUN_BACKEND={} {} --nproc {} --output only_error {} --worker {} --backend {} {} --out {} >/dev/null",
                                          backend, fastrun_cli, n, self, mode, backend, model, out);
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "failed: %s\n", cmd.c_str());
      return read_seconds(out);
    };
    rows.push_back({"-", "none (local steps only)", job("local", "shm")});
    for (const std::string backend : {"shm", "gloo"}) {
      rows.push_back({backend, "fastrun::torch::DistributedDataParallel", job("adapter", backend)});
      rows.push_back({backend, "hand-written all-reduce per parameter", job("handwritten", backend)});
      rows.push_back({backend, "one fused all-reduce after backward()", job("fused", backend)});
    }
    if (have_python) {
      const std::string out = fmt::format("/tmp/fastrun-bench-torch-py-{}.txt", ::getpid());
      const std::string cmd = fmt::format("/usr/bin/python3 {} --nproc {} {} --out {} >/dev/null", script, n, model, out);
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "failed: %s\n", cmd.c_str());
      rows.push_back({"gloo", "PyTorch DDP (python3-torch, mp.spawn)", read_seconds(out)});
    } else {
      rows.push_back({"gloo", "PyTorch DDP: skipped, /usr/bin/python3 cannot import torch", -1});
    }
    const double local = rows[0].s;
    for (const auto& r : rows)
      fmt::print("{:>5}  {:<8} {:<48} {:>12} {:>12}\n", n, r.backend, r.what, r.s < 0 ? "-" : fmt::format("{:.2f}", r.s * 1e3),
                 r.s < 0 || local <= 0 ? "-" : fmt::format("{:+.2f}", (r.s - local) * 1e3));
    for (std::size_t k = 1; k + 2 < rows.size(); k += 3)
      if (rows[k].s > 0 && rows[k + 2].s > 0)
        fmt::print("{:>5}  {:<8} adapter overhead vs one fused all-reduce: {:+.2f} ms per step\n", n, rows[k].backend,
                   (rows[k].s - rows[k + 2].s) * 1e3);
    fmt::print("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (!a.worker.empty()) return run_worker(a);
    return orchestrate(a);
  } catch (const fastrun::ConfigError& e) {
    std::fprintf(stderr, "fastrun-bench-torch: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fastrun-bench-torch: %s\n", e.what());
    return 1;
  }
}
