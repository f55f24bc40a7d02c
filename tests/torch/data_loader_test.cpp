// fastrun::torch::DistributedSampler driving real torch::data loaders (with and without worker
// threads), checked index by index against fastrun's samplers; and fastrun::torch checkpoints,
// also interrupted mid-write in real child processes.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

// LibTorch before Catch: Debian's LibTorch brings glog, whose CHECK would replace Catch's.
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include "fastrun/runtime/error.h"
#include "fastrun/samplers/error.h"
#include "fastrun/samplers/random_batch_sampler.h"
#include "fastrun/samplers/random_sampler.h"
#include "fastrun/torch/checkpoint.h"
#include "fastrun/torch/sampler.h"
#include "test_support/children.h"
#include "test_support/temp_dir.h"

namespace fs = std::filesystem;
using fastrun::samplers::LazyRandomSampler;
using fastrun::samplers::RandomBatchSampler;
using fastrun::samplers::RandomSampler;
using fastrun::test::TempDir;
using fastrun::torch::DistributedSampler;
using Batches = std::vector<std::vector<std::uint64_t>>;

namespace {

// Sample i is the tensor [i]: a loader's batches show which indices it drew.
class IndexData : public torch::data::datasets::Dataset<IndexData> {
 public:
  explicit IndexData(std::size_t n) : n_(n) {}
  torch::data::Example<> get(std::size_t i) override {
    auto t = torch::tensor({static_cast<std::int64_t>(i)});
    return {t, t};
  }
  c10::optional<std::size_t> size() const override { return n_; }

 private:
  std::size_t n_;
};

auto make_loader(std::size_t n, const DistributedSampler& sampler, std::size_t batch, std::size_t workers = 0,
                 bool drop_last = false) {
  return torch::data::make_data_loader(
      IndexData(n).map(torch::data::transforms::Stack<>()), sampler,
      torch::data::DataLoaderOptions().batch_size(batch).workers(workers).drop_last(drop_last));
}

// Up to `max` batches of one pass (a new pass starts at each call).
template <class Loader>
Batches take(Loader& loader, std::size_t max = std::numeric_limits<std::size_t>::max()) {
  Batches out;
  if (max == 0) return out;
  for (auto& batch : loader) {
    auto d = batch.data.reshape(-1).contiguous();
    out.emplace_back(d.template data_ptr<std::int64_t>(), d.template data_ptr<std::int64_t>() + d.numel());
    if (out.size() == max) break;
  }
  return out;
}

std::vector<std::uint64_t> flat(const Batches& b) {
  std::vector<std::uint64_t> out;
  for (const auto& x : b) out.insert(out.end(), x.begin(), x.end());
  return out;
}

RandomSampler random_sampler(std::uint64_t n, int R, int r, bool pad) {
  RandomSampler s(n, /*shuffle=*/true, /*seed=*/5);
  s.set_distributed(R, r, pad);
  return s;
}


}  // namespace

TEST_CASE("DistributedSampler: a torch loader yields exactly the fastrun sampler's share batch by batch",
          "[torch][sampler]") {
  torch::set_num_threads(1);
  for (std::uint64_t n : {64u, 103u})
    for (int R : {1, 3, 4})
      for (bool pad : {false, true})
        for (int r = 0; r < R; ++r) {
          CAPTURE(n, R, r, pad);
          auto ref = random_sampler(n, R, r, pad);
          ref.set_epoch(2);
          const auto expected = ref.take_all();

          DistributedSampler sampler(random_sampler(n, R, r, pad));
          sampler.set_epoch(2);
          auto loader = make_loader(n, sampler, 8);
          const auto batches = take(*loader);
          CHECK(flat(batches) == expected);
          for (std::size_t i = 0; i + 1 < batches.size(); ++i) CHECK(batches[i].size() == 8);
          CHECK(sampler.batches_handed_out() == batches.size());
          CHECK(flat(take(*loader)) == expected);  // a second pass restarts the epoch
        }
  INFO("the lazy (Feistel) order through the adapter");
  LazyRandomSampler lazy_ref(1000, 9);
  lazy_ref.set_distributed(3, 1, true);
  LazyRandomSampler lazy(1000, 9);
  lazy.set_distributed(3, 1, true);
  DistributedSampler sampler(std::move(lazy));
  auto loader = make_loader(1000, sampler, 16);
  CHECK(flat(take(*loader)) == lazy_ref.take_all());
}

TEST_CASE("DistributedSampler: a mid-epoch resume on another rank count gives exactly the rest of the epoch",
          "[torch][sampler][resume]") {
  torch::set_num_threads(1);
  const std::uint64_t n = 100;
  // 4 ranks, batch 3, epoch 1: each rank consumes 5 batches (60 samples in all), then the job stops.
  std::vector<std::uint64_t> seen;
  std::vector<std::string> states;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler sampler(random_sampler(n, 4, r, false));
    sampler.set_epoch(1);
    auto loader = make_loader(n, sampler, 3);
    auto first = flat(take(*loader, 5));
    seen.insert(seen.end(), first.begin(), first.end());
    states.push_back(sampler.state_after_batches(5));
  }
  for (const auto& s : states) CHECK(s == states[0]);  // ranks in lock step: rank 0 may save for all
  CHECK_THAT(states[0], Catch::Contains("\"epoch\":1,\"consumed\":60"));

  // Resumed on 3 ranks: each yields exactly what the fastrun sampler restored the same way yields.
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    RandomSampler ref(n, true, 0);  // seed and epoch come from the state
    ref.set_distributed(3, r, false);
    ref.load_state(states[0]);
    const auto expected = ref.take_all();
    CHECK(expected.size() == 13);  // floor((100 - 60) / 3)

    DistributedSampler sampler(random_sampler(n, 3, r, false));
    sampler.load_state(states[0]);
    sampler.set_epoch(1);  // the restored epoch keeps its position
    auto loader = make_loader(n, sampler, 3);
    const auto rest = flat(take(*loader));
    CHECK(rest == expected);
    seen.insert(seen.end(), rest.begin(), rest.end());
    // The pass after the resumed one is the whole epoch again, on 3 ranks.
    CHECK(flat(take(*loader)).size() == 33);
  }
  // Before and after together: the epoch's order, each sample once, less the one position that
  // 3 ranks without pad cannot share (40 = 3 * 13 + 1).
  RandomSampler whole(n, true, 5);
  whole.set_epoch(1);
  const auto order = whole.order().to_vector();
  const std::set<std::uint64_t> unique(seen.begin(), seen.end());
  CHECK(unique.size() == seen.size());
  CHECK(seen.size() == 99);
  CHECK(std::set<std::uint64_t>(order.begin(), order.begin() + 99) == unique);
}

TEST_CASE("DistributedSampler: with loader workers prefetching state_after_batches is the exact resume point",
          "[torch][sampler][resume][workers]") {
  torch::set_num_threads(1);
  const std::uint64_t n = 200;
  auto ref = random_sampler(n, 2, 0, false);
  const auto expected = ref.take_all();  // rank 0's whole share, 100 samples

  DistributedSampler sampler(random_sampler(n, 2, 0, false));
  std::string saved;
  {
    auto loader = make_loader(n, sampler, 4, /*workers=*/2);
    const auto first = flat(take(*loader, 7));
    CHECK(first == std::vector<std::uint64_t>(expected.begin(), expected.begin() + 28));
    CHECK(sampler.batches_handed_out() > 7);  // the loader asked ahead of the model
    saved = sampler.state_after_batches(7);
    CHECK_THAT(saved, Catch::Contains("\"consumed\":56"));
    CHECK(sampler.state() != saved);
  }
  DistributedSampler resumed(random_sampler(n, 2, 0, false));
  resumed.load_state(saved);
  auto loader = make_loader(n, resumed, 4, /*workers=*/2);
  CHECK(flat(take(*loader)) == std::vector<std::uint64_t>(expected.begin() + 28, expected.end()));
}

TEST_CASE("DistributedSampler: passes and epochs and restores follow torch's reset and fastrun's set_epoch",
          "[torch][sampler]") {
  torch::set_num_threads(1);
  const std::uint64_t n = 40;
  auto epoch_share = [&](std::uint64_t e) {
    auto s = random_sampler(n, 2, 1, true);
    s.set_epoch(e);
    return s.take_all();
  };
  DistributedSampler sampler(random_sampler(n, 2, 1, true));
  auto loader = make_loader(n, sampler, 5);
  CHECK(flat(take(*loader)) == epoch_share(0));
  CHECK(flat(take(*loader)) == epoch_share(0));  // no set_epoch: the same epoch again, like torch
  sampler.set_epoch(3);
  CHECK(sampler.epoch() == 3);
  const auto e3 = epoch_share(3);
  CHECK(flat(take(*loader, 2)) == std::vector<std::uint64_t>(e3.begin(), e3.begin() + 10));
  const std::string mid = sampler.state_after_batches(2);
  sampler.set_epoch(0);
  take(*loader, 1);
  sampler.load_state(mid);  // back to epoch 3, two batches in
  CHECK(sampler.epoch() == 3);
  CHECK(flat(take(*loader)) == std::vector<std::uint64_t>(e3.begin() + 10, e3.end()));
  CHECK(flat(take(*loader)) == e3);  // the next pass restarts epoch 3
}

TEST_CASE("DistributedSampler over a batch sampler: its own batches and the loader's batch size must match",
          "[torch][sampler][batch]") {
  torch::set_num_threads(1);
  auto make = [] {
    RandomBatchSampler s(50, /*batch_size=*/4, /*shuffle=*/true, /*drop_last=*/false, /*seed=*/3);
    s.set_distributed(2, 1, false);
    return s;
  };
  auto ref = make();
  Batches expected;
  for (std::vector<std::uint64_t> b; ref.next_batch(b);) expected.push_back(b);

  DistributedSampler sampler(make());
  REQUIRE(sampler.batch_sampler() != nullptr);
  CHECK(sampler.index_sampler() == nullptr);
  auto loader = make_loader(50, sampler, 4);
  CHECK(take(*loader) == expected);
  // Resume after 3 batches, on 1 rank: the batch sampler restored the same way.
  take(*loader, 3);
  const std::string saved = sampler.state_after_batches(3);
  RandomBatchSampler ref1(50, 4, true, false, 0);
  ref1.load_state(saved);
  Batches rest;
  for (std::vector<std::uint64_t> b; ref1.next_batch(b);) rest.push_back(b);
  RandomBatchSampler one(50, 4, true, false, 0);
  DistributedSampler resumed(std::move(one));
  resumed.load_state(saved);
  auto loader1 = make_loader(50, resumed, 4);
  CHECK(take(*loader1) == rest);
  CHECK(flat(rest).size() == 50 - 3 * 4 * 2);

  auto wrong = make_loader(50, sampler, 5);
  CHECK_THROWS_AS(take(*wrong), fastrun::ConfigError);
  CHECK_THROWS_WITH(take(*wrong), Catch::Contains("batch_size is 5") && Catch::Contains("batches of 4"));
}

TEST_CASE("DistributedSampler: torch::save and torch::load of the sampler and misuse named", "[torch][sampler][errors]") {
  torch::set_num_threads(1);
  TempDir dir;
  DistributedSampler sampler(random_sampler(30, 3, 2, false));
  auto loader = make_loader(30, sampler, 2);
  take(*loader, 2);
  torch::save(sampler, dir / "sampler.pt");
  DistributedSampler restored(random_sampler(30, 3, 2, false));
  torch::load(restored, dir / "sampler.pt");
  CHECK(restored.state() == sampler.state());
  CHECK_THAT(restored.state(), Catch::Contains("\"consumed\":12"));

  torch::save(torch::ones({2}), dir / "tensor.pt");
  CHECK_THROWS_AS(torch::load(restored, dir / "tensor.pt"), fastrun::samplers::SamplerError);
  CHECK_THROWS_WITH(restored.reset(31), Catch::Contains("new size 31") && Catch::Contains("has 30"));
  CHECK_THROWS_WITH(sampler.state_after_batches(3), Catch::Contains("only 2 batch(es)"));
  CHECK_THROWS_AS(sampler.next(0), fastrun::ConfigError);
  CHECK_THROWS_WITH(restored.load_state("{\"format\":\"fastrun.sampler/1\",\"kind\":\"RandomSampler\",\"n\":31,"
                                        "\"epoch\":0,\"consumed\":0,\"seed\":5,\"shuffle\":true}"),
                    Catch::Contains("field 'n' is 31 in the state but 30"));
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

namespace {

struct Tiny : torch::nn::Module {
  explicit Tiny(std::int64_t hidden = 8) {
    fc1 = register_module("fc1", torch::nn::Linear(4, hidden));
    norm = register_module("norm", torch::nn::BatchNorm1d(hidden));  // has buffers
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(norm(fc1(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
};

// A few SGD-with-momentum steps, so the optimizer has state worth saving.
void train_steps(Tiny& m, torch::optim::Optimizer& opt, int steps, std::uint64_t seed) {
  torch::manual_seed(seed);
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    auto loss = m.forward(torch::randn({16, 4})).pow(2).mean();
    loss.backward();
    opt.step();
  }
}

std::vector<torch::Tensor> values(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.named_parameters()) out.push_back(p.value().detach().clone());
  for (const auto& b : m.named_buffers()) out.push_back(b.value().clone());
  return out;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

// A module of `floats` values all equal to `v`: a checkpoint of it shows whether it is whole.
struct Block : torch::nn::Module {
  Block(std::int64_t floats, float v) { w = register_parameter("w", torch::full({floats}, v)); }
  torch::Tensor w;
};

}  // namespace

TEST_CASE("checkpoint: model and optimizer state and sampler state and counters round-trip", "[torch][checkpoint]") {
  torch::set_num_threads(1);
  TempDir dir;
  torch::manual_seed(1);
  Tiny a;
  torch::optim::SGD opt_a(a.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  train_steps(a, opt_a, 3, 10);
  fastrun::torch::TrainingProgress p{2, 345, "{\"sampler\":1}"};
  fastrun::torch::save_checkpoint(dir / "ck.pt", a, &opt_a, p);
  CHECK(dir.names() == std::vector<std::string>{"ck.pt"});

  torch::manual_seed(2);
  Tiny b;
  torch::optim::SGD opt_b(b.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  CHECK_FALSE(same(values(a), values(b)));
  const auto got = fastrun::torch::load_checkpoint(dir / "ck.pt", b, &opt_b);
  CHECK(got.epoch == 2);
  CHECK(got.step == 345);
  CHECK(got.sampler_state == p.sampler_state);
  CHECK(same(values(a), values(b)));
  // The momentum buffers came along: the next steps agree exactly.
  train_steps(a, opt_a, 2, 11);
  train_steps(b, opt_b, 2, 11);
  CHECK(same(values(a), values(b)));

  INFO("the model alone, without the optimizer");
  Tiny c;
  CHECK(fastrun::torch::load_checkpoint(dir / "ck.pt", c, nullptr).step == 345);
}

TEST_CASE("checkpoint: a file of another model or another kind or none is an error naming the problem and nothing changes",
          "[torch][checkpoint][errors]") {
  torch::set_num_threads(1);
  TempDir dir;
  Tiny small(8);
  fastrun::torch::save_checkpoint(dir / "ck.pt", small, nullptr, {});
  Tiny wide(16);
  const auto before = values(wide);
  CHECK_THROWS_AS(fastrun::torch::load_checkpoint(dir / "ck.pt", wide, nullptr), fastrun::Error);
  CHECK_THROWS_WITH(fastrun::torch::load_checkpoint(dir / "ck.pt", wide, nullptr),
                    Catch::Contains("parameter 'fc1.weight' is [8, 4] Float in the file but [16, 4] Float"));
  CHECK(same(before, values(wide)));

  torch::optim::SGD opt(small.parameters(), torch::optim::SGDOptions(0.1));
  CHECK_THROWS_WITH(fastrun::torch::load_checkpoint(dir / "ck.pt", small, &opt),
                    Catch::Contains("no optimizer state in the file"));
  torch::save(small.fc1, dir / "plain.pt");
  CHECK_THROWS_WITH(fastrun::torch::load_checkpoint(dir / "plain.pt", small, nullptr),
                    Catch::Contains("not a fastrun checkpoint"));
  CHECK_THROWS_WITH(fastrun::torch::load_checkpoint(dir / "missing.pt", small, nullptr),
                    Catch::Contains("missing.pt") && Catch::Contains("No such file"));
}

TEST_CASE("checkpoint: a save interrupted mid-write leaves the previous checkpoint loadable and nothing else",
          "[torch][checkpoint][atomic][process]") {
  torch::set_num_threads(1);
  TempDir dir;
  const std::string path = dir / "ck.pt";
  const std::int64_t floats = 1 << 20;  // a 4 MiB checkpoint
  Block one(floats, 1.0f);
  fastrun::torch::save_checkpoint(path, one, nullptr, {0, 1, "state 1"});
  const auto whole = fs::file_size(path);

  for (bool signal_kills : {true, false}) {
    CAPTURE(signal_kills);
    // The file-size limit stops the write half-way: by SIGXFSZ (as a kill would), or, with the
    // signal ignored, by EFBIG, which save_checkpoint reports.
    fastrun::test::Children kids(/*capture_messages=*/true);
    kids.spawn([&] {
      rlimit no_core{0, 0};
      ::setrlimit(RLIMIT_CORE, &no_core);
      if (!signal_kills) ::signal(SIGXFSZ, SIG_IGN);
      rlimit half{whole / 2, whole / 2};
      ::setrlimit(RLIMIT_FSIZE, &half);
      Block two(floats, 2.0f);
      fastrun::torch::save_checkpoint(path, two, nullptr, {0, 2, "state 2"});
      return 0;
    });
    const auto st = kids.wait_all(std::chrono::seconds(60));
    REQUIRE(st.size() == 1);
    if (signal_kills) {
      CHECK(st[0].signal == SIGXFSZ);
    } else {
      CHECK(st[0].code == fastrun::test::Children::kThrew);
      CHECK_THAT(st[0].message, Catch::Contains("writing " + path) && Catch::Contains("File too large"));
    }
    Block loaded(floats, 0.0f);
    const auto p = fastrun::torch::load_checkpoint(path, loaded, nullptr);
    CHECK(p.step == 1);
    CHECK(p.sampler_state == "state 1");
    CHECK(torch::all(loaded.w == 1.0f).item<bool>());
    CHECK(dir.names() == std::vector<std::string>{"ck.pt"});
  }
}

TEST_CASE("checkpoint: a writer SIGKILLed at random moments of a stream of saves always leaves a whole one",
          "[torch][checkpoint][atomic][process]") {
  torch::set_num_threads(1);
  TempDir dir;
  const std::string path = dir / "ck.pt";
  const std::int64_t floats = 1 << 20;
  std::mt19937 rng(12345);
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    fastrun::test::Children kids;
    kids.spawn([&] {
      for (int v = 1;; ++v) {  // saves until killed
        Block b(floats, static_cast<float>(v));
        fastrun::torch::save_checkpoint(path, b, nullptr, {0, static_cast<std::uint64_t>(v), "v"});
      }
      return 0;
    });
    // Wait for a first complete checkpoint, then kill at a random moment.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 150)(rng)));
    kids.kill_all(SIGKILL);
    const auto st = kids.wait_all(std::chrono::seconds(30));
    REQUIRE(st.size() == 1);
    CHECK(st[0].signal == SIGKILL);
    Block loaded(floats, 0.0f);
    const auto p = fastrun::torch::load_checkpoint(path, loaded, nullptr);
    CHECK(p.step >= 1);
    CHECK(torch::all(loaded.w == static_cast<float>(p.step)).item<bool>());
    fs::remove(path);
  }
}
