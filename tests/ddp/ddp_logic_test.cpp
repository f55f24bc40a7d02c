// DDP logic with ranks as threads (thread_group.h): bucket plan, averaging, launch order,
// no_sync, unused-parameter and layout-mismatch errors, 16-bit dtypes.
#include <catch2/catch.hpp>

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "fastrun/runtime/ddp/buffer_ops.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/error.h"
#include "thread_group.h"

using namespace fastrun;
using fastrun::test::run_thread_ranks;
using fastrun::test::ThreadGroup;

namespace {

// A toy model: parameter k has `sizes[k]` floats; values and grads owned here.
struct Model {
  std::vector<std::vector<float>> value, grad;
  explicit Model(const std::vector<std::size_t>& sizes) {
    for (auto n : sizes) {
      value.emplace_back(n, 0.f);
      grad.emplace_back(n, 0.f);
    }
  }
  std::vector<DdpParameter> params() {
    std::vector<DdpParameter> out;
    for (std::size_t k = 0; k < value.size(); ++k)
      out.push_back({"p" + std::to_string(k), view_of(value[k].data(), value[k].size()),
                     view_of(grad[k].data(), grad[k].size())});
    return out;
  }
};

}  // namespace

TEST_CASE("bucket plan: reverse order, first cap, dtype separation, big params alone", "[ddp][plan]") {
  using ddp::ParamLayout;
  // 4 float params of 100 floats (400 B), caps 500 B first then 1000 B.
  std::vector<ParamLayout> p(6, ParamLayout{100, DType::float32, DeviceKind::cpu});
  auto plan = ddp::plan_buckets(p, 500, 1000);
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].params == std::vector<std::size_t>{4, 5});  // 800 B >= 500: closed; ascending inside
  CHECK(plan[0].offsets == std::vector<std::size_t>{0, 100});
  CHECK(plan[1].params == std::vector<std::size_t>{1, 2, 3});  // 1200 B >= 1000
  CHECK(plan[2].params == std::vector<std::size_t>{0});        // the remainder, still open at the end
  p.push_back({1000, DType::float32, DeviceKind::cpu});  // a big one, registered last
  p.insert(p.begin(), ParamLayout{10, DType::float16, DeviceKind::cpu});
  plan = ddp::plan_buckets(p, 500, 1000);
  REQUIRE(plan.size() == 4);
  CHECK(plan[0].params == std::vector<std::size_t>{7});  // the big one alone, first
  CHECK(plan[1].params == std::vector<std::size_t>{4, 5, 6});
  CHECK(plan[2].params == std::vector<std::size_t>{1, 2, 3});
  CHECK(plan[3].params == std::vector<std::size_t>{0});     // float16 never mixed
  CHECK(plan[3].dtype == DType::float16);
}

TEST_CASE("16-bit conversions round trip and round to nearest even", "[ddp][dtype]") {
  for (float f : {0.f, 1.f, -2.5f, 0.1f, 65504.f, 1e-7f, -3.14159f}) {
    CHECK(ddp::half_to_float(ddp::float_to_half(f)) == Approx(f).epsilon(1e-3).margin(1e-7));
    CHECK(ddp::bf16_to_float(ddp::float_to_bf16(f)) == Approx(f).epsilon(1e-2));
  }
  CHECK(ddp::float_to_half(1.0f) == 0x3c00);
  CHECK(ddp::float_to_half(1e6f) == 0x7c00);  // overflow -> inf
  CHECK(ddp::float_to_bf16(1.0f) == 0x3f80);
}

TEST_CASE("DDP averages gradients and broadcasts rank 0's parameters", "[ddp][threads]") {
  for (int world : {2, 4}) {
    std::mutex m;
    std::vector<std::vector<std::string>> issued(world);
    run_thread_ranks(world, [&](ThreadGroup& g) {
      Model model({3000, 7, 500, 1, 20000});
      for (auto& v : model.value) std::fill(v.begin(), v.end(), static_cast<float>(g.rank() + 1));
      DdpOptions options;
      options.first_bucket_bytes = 4096;
      options.bucket_bytes = 16384;
      DistributedDataParallel ddp(g, model.params(), options);
      for (auto& v : model.value)
        for (float x : v) T_REQUIRE(x == 1.f);  // rank 0's values
      T_REQUIRE(ddp.buckets().size() == 2);  // [20000], [1, 500, 7, 3000]
      for (int step = 0; step < 3; ++step) {
        for (std::size_t k = 0; k < model.grad.size(); ++k)
          for (std::size_t i = 0; i < model.grad[k].size(); ++i)
            model.grad[k][i] = static_cast<float>((g.rank() + 1) * (step + 1)) + static_cast<float>(k);
        // Gradients arrive out of order (forwards): buckets must still launch in index order.
        for (std::size_t k = 0; k < model.grad.size(); ++k) ddp.mark_ready(k);
        ddp.finish();
        const float mean_rank = (world + 1) / 2.f;  // mean of 1..world
        for (std::size_t k = 0; k < model.grad.size(); ++k)
          for (float x : model.grad[k]) T_REQUIRE(x == Approx(mean_rank * (step + 1) + k));
      }
      std::lock_guard lock(m);
      issued[g.rank()] = g.issued;
    });
    for (int r = 1; r < world; ++r) CHECK(issued[r] == issued[0]);
  }
}

TEST_CASE("DDP launches buckets in bucket-index order whatever the ready order", "[ddp][threads][order]") {
  std::mutex m;
  std::vector<std::vector<std::string>> issued(2);
  run_thread_ranks(2, [&](ThreadGroup& g) {
    Model model({100, 200, 300, 400});
    DdpOptions options;
    options.first_bucket_bytes = 1;  // every param its own bucket
    options.bucket_bytes = 1;
    DistributedDataParallel ddp(g, model.params(), options);
    g.issued.clear();
    // rank 0 marks 0,1,2,3; rank 1 marks 3,1,0,2: both must issue 400,300,200,100.
    std::vector<std::size_t> order = g.rank() == 0 ? std::vector<std::size_t>{0, 1, 2, 3}
                                                   : std::vector<std::size_t>{3, 1, 0, 2};
    for (auto k : order) ddp.mark_ready(k);
    ddp.finish();
    std::lock_guard lock(m);
    issued[g.rank()] = g.issued;
  });
  std::vector<std::string> expected = {"all_reduce 400 float32", "all_reduce 300 float32", "all_reduce 200 float32",
                                       "all_reduce 100 float32"};
  CHECK(issued[0] == expected);
  CHECK(issued[1] == expected);
}

TEST_CASE("DDP no_sync accumulates locally and the next synced step reduces the sum", "[ddp][threads][no_sync]") {
  run_thread_ranks(2, [&](ThreadGroup& g) {
    Model model({10, 20});
    DistributedDataParallel ddp(g, model.params());
    g.issued.clear();
    for (int micro = 0; micro < 3; ++micro) {
      auto guard = ddp.no_sync();
      for (auto& gr : model.grad)
        for (auto& x : gr) x += static_cast<float>(g.rank() + micro);
      ddp.synchronize();  // no-op inside no_sync
    }
    T_REQUIRE(g.issued.empty());
    for (auto& gr : model.grad)
      for (auto& x : gr) x += static_cast<float>(g.rank() + 3);
    ddp.synchronize();
    // rank r holds sum_{m=0..3} (r + m) = 4r + 6; average over r = 0, 1 is 8.
    for (auto& gr : model.grad)
      for (float x : gr) T_REQUIRE(x == Approx(8.f));
  });
}

// One guard type for both strengths (no_sync_guard.h): ddp.no_sync() is a fastrun::NoSyncGuard.
static_assert(std::is_same_v<decltype(std::declval<DistributedDataParallel&>().no_sync()), NoSyncGuard>);

TEST_CASE("NoSyncGuard(ddp) is ddp.no_sync(): nests, restores on throw, rejects a mid-step entry",
          "[ddp][threads][no_sync]") {
  run_thread_ranks(2, [&](ThreadGroup& g) {
    Model model({4});
    DistributedDataParallel ddp(g, model.params());
    g.issued.clear();
    {
      NoSyncGuard outer(ddp);
      T_REQUIRE(!ddp.syncing());
      {
        auto inner = ddp.no_sync();
        T_REQUIRE(!ddp.syncing());
      }
      T_REQUIRE(!ddp.syncing());
      ddp.synchronize();
    }
    T_REQUIRE(ddp.syncing());
    T_REQUIRE(g.issued.empty());
    try {
      NoSyncGuard guard(ddp);
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    T_REQUIRE(ddp.syncing());
    ddp.mark_ready(0);  // a synced step has started: a guard now would lose this gradient
    bool threw = false;
    try {
      NoSyncGuard late(ddp);
    } catch (const Error& e) {
      threw = std::string(e.what()).find("middle of a synced step") != std::string::npos;
    }
    T_REQUIRE(threw);
    ddp.finish();
  });
}

TEST_CASE("DDP: a parameter never marked ready is an error naming it, not a hang", "[ddp][threads][unused]") {
  std::mutex m;
  std::vector<std::string> messages;
  REQUIRE_NOTHROW(run_thread_ranks(2, [&](ThreadGroup& g) {
    Model model({10, 20, 30});
    DdpOptions options;
    options.first_bucket_bytes = 1;
    options.bucket_bytes = 1;
    DistributedDataParallel ddp(g, model.params(), options);
    ddp.mark_ready(2);
    ddp.mark_ready(0);  // p1 unused: bucket 1 never launches, bucket 2 queued behind it
    try {
      ddp.finish();
      T_FAIL("finish() did not throw");
    } catch (const Error& e) {
      std::lock_guard lock(m);
      messages.push_back(e.what());
    }
    // The object is usable again for the next step.
    ddp.synchronize();
  }));
  REQUIRE(messages.size() == 2);
  for (auto& msg : messages) {
    CHECK_THAT(msg, Catch::Contains("1 ('p1')"));
    CHECK_THAT(msg, Catch::Contains("never marked ready"));
  }
}

TEST_CASE("DDP set-up names the first mismatching parameter and the ranks", "[ddp][threads][layout]") {
  std::mutex m;
  std::vector<std::string> messages;
  run_thread_ranks(3, [&](ThreadGroup& g) {
    Model model({10, g.rank() == 1 ? std::size_t{21} : std::size_t{20}, 30});
    try {
      DistributedDataParallel ddp(g, model.params());
      T_FAIL("no error");
    } catch (const ConfigError& e) {
      std::lock_guard lock(m);
      messages.push_back(e.what());
    }
  });
  REQUIRE(messages.size() == 3);
  CHECK_THAT(messages[0], Catch::Contains("parameter 1 ('p1' here)"));
  CHECK_THAT(messages[0], Catch::Contains("20 x float32 on cpu on ranks [0, 2]"));
  CHECK_THAT(messages[0], Catch::Contains("21 x float32 on cpu on ranks [1]"));

  messages.clear();
  run_thread_ranks(2, [&](ThreadGroup& g) {
    Model model(g.rank() == 0 ? std::vector<std::size_t>{4, 4} : std::vector<std::size_t>{4, 4, 4});
    try {
      DistributedDataParallel ddp(g, model.params());
    } catch (const ConfigError& e) {
      std::lock_guard lock(m);
      messages.push_back(e.what());
    }
  });
  REQUIRE(messages.size() == 2);
  for (auto& msg : messages) CHECK_THAT(msg, Catch::Contains("4 x float32 on cpu on ranks [1], absent on ranks [0]"));
  CHECK_THAT(messages[0] + messages[1], Catch::Contains("parameter 2 ('absent' here)"));
}

TEST_CASE("DDP averages float16 and bfloat16 gradients, with sum and avg, and rejects bad input", "[ddp][threads][dtype]") {
  for (DType t : {DType::float16, DType::bfloat16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      run_thread_ranks(2, [&](ThreadGroup& g) {
        std::vector<std::uint16_t> value(64), grad(64);
        auto to16 = [&](float f) { return t == DType::float16 ? ddp::float_to_half(f) : ddp::float_to_bf16(f); };
        auto from16 = [&](std::uint16_t b) { return t == DType::float16 ? ddp::half_to_float(b) : ddp::bf16_to_float(b); };
        DdpOptions options;
        options.reduce = op;
        DistributedDataParallel ddp(g, {{"h", {value.data(), 64, t}, {grad.data(), 64, t}}}, options);
        std::fill(grad.begin(), grad.end(), to16(g.rank() == 0 ? 1.0f : 2.0f));
        ddp.synchronize();
        for (auto x : grad) T_REQUIRE(from16(x) == 1.5f);
      });
    }
  }
  run_thread_ranks(1, [&](ThreadGroup& g) {
    std::vector<float> v(4), gr(3);
    T_CHECK_THROWS_AS(DistributedDataParallel(g, {{"w", view_of(v.data(), 4), view_of(gr.data(), 3)}}), ConfigError);
    std::vector<std::int32_t> iv(4), ig(4);
    T_CHECK_THROWS_AS(DistributedDataParallel(g, {{"i", view_of(iv.data(), 4), view_of(ig.data(), 4)}}), ConfigError);
    std::vector<float> v4(4), g4(4);
    DistributedDataParallel ddp(g, {{"w", view_of(v4.data(), 4), view_of(g4.data(), 4)}});
    T_CHECK_THROWS_AS(ddp.mark_ready(1), ConfigError);
    ddp.mark_ready(0);
    T_CHECK_THROWS_WITH(ddp.mark_ready(0), Catch::Contains("marked ready twice"));
  });
}

TEST_CASE("DDP reduces a bucket in place when its gradients are contiguous", "[ddp][threads][in_place]") {
  for (bool in_place : {true, false}) {
    run_thread_ranks(2, [&](ThreadGroup& g) {
      // One arena for values and one for gradients: params of 100, 50, 25 floats, then a
      // separate one (not contiguous with the others).
      std::vector<float> values(175, float(g.rank() + 5)), grads(175), lone_v(10, float(g.rank())), lone_g(10);
      std::vector<DdpParameter> params = {
          {"a", view_of(values.data(), 100), view_of(grads.data(), 100)},
          {"b", view_of(values.data() + 100, 50), view_of(grads.data() + 100, 50)},
          {"c", view_of(values.data() + 150, 25), view_of(grads.data() + 150, 25)},
          {"lone", view_of(lone_v.data(), 10), view_of(lone_g.data(), 10)}};
      DdpOptions options;
      options.first_bucket_bytes = 1;  // bucket 0: lone alone
      options.bucket_bytes = 1000;     // bucket 1: c, b, a (700 B, contiguous), left open
      options.reduce_in_place = in_place;
      DistributedDataParallel ddp(g, params, options);
      T_REQUIRE(ddp.buckets().size() == 2);
      T_REQUIRE(values[0] == 5.f);  // rank 0's values, broadcast in place
      T_REQUIRE(lone_v[3] == 0.f);
      for (int step = 0; step < 2; ++step) {
        for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = float(g.rank() * 2 + step) + float(i);
        std::fill(lone_g.begin(), lone_g.end(), float(g.rank()));
        ddp.mark_ready(1);
        ddp.mark_ready(0);
        ddp.mark_ready(3);
        ddp.mark_ready(2);
        ddp.finish();
        for (std::size_t i = 0; i < grads.size(); ++i) T_REQUIRE(grads[i] == float(1 + step) + float(i));
        for (float x : lone_g) T_REQUIRE(x == 0.5f);
        T_REQUIRE(ddp.last_step_stats()[1].in_place == in_place);
        T_REQUIRE(ddp.last_step_stats()[0].in_place == in_place);  // a single parameter is contiguous
      }
    });
  }
}

TEST_CASE("DDP copies a bucket whose gradients are not contiguous", "[ddp][threads][in_place]") {
  run_thread_ranks(2, [&](ThreadGroup& g) {
    std::vector<float> grads(300, float(g.rank())), values(300);
    // b and a leave a gap between them: the bucket goes through a flat buffer.
    DistributedDataParallel ddp(g, {{"a", view_of(values.data(), 100), view_of(grads.data(), 100)},
                                    {"b", view_of(values.data() + 200, 100), view_of(grads.data() + 200, 100)}});
    ddp.synchronize();
    T_REQUIRE_FALSE(ddp.last_step_stats()[0].in_place);
    T_REQUIRE(grads[0] == 0.5f);
    T_REQUIRE(grads[150] == float(g.rank()));  // the gap is not touched
    T_REQUIRE(grads[299] == 0.5f);
  });
}

TEST_CASE("DDP copies a bucket whose arena is in reverse registration order", "[ddp][threads][in_place]") {
  run_thread_ranks(2, [&](ThreadGroup& g) {
    // Contiguous, but registered last-to-first: the flat layout (ascending registration) differs
    // from memory order, so in place would mix parameters across ranks that copy. It copies.
    std::vector<float> values(30), grads(30);
    for (std::size_t i = 0; i < 30; ++i) grads[i] = float(g.rank() * 100) + float(i);
    DistributedDataParallel ddp(g, {{"a", view_of(values.data() + 20, 10), view_of(grads.data() + 20, 10)},
                                    {"b", view_of(values.data() + 10, 10), view_of(grads.data() + 10, 10)},
                                    {"c", view_of(values.data(), 10), view_of(grads.data(), 10)}});
    ddp.synchronize();
    T_REQUIRE_FALSE(ddp.last_step_stats()[0].in_place);
    for (std::size_t i = 0; i < 30; ++i) T_REQUIRE(grads[i] == 50.f + float(i));
  });
}

TEST_CASE("DDP: one rank in place, another copying, agree element for element", "[ddp][threads][in_place]") {
  run_thread_ranks(2, [&](ThreadGroup& g) {
    // Rank 0: one arena in registration order (in place); rank 1: separate vectors (copies).
    std::vector<float> arena_v(30), arena_g(30), v[3], gr[3];
    std::vector<DdpParameter> params;
    for (std::size_t k = 0; k < 3; ++k) {
      v[k].resize(10);
      gr[k].resize(10);
      float* gk = g.rank() == 0 ? arena_g.data() + 10 * k : gr[k].data();
      float* vk = g.rank() == 0 ? arena_v.data() + 10 * k : v[k].data();
      for (std::size_t i = 0; i < 10; ++i) gk[i] = float(k * 10 + i) + (g.rank() == 0 ? 0.f : 1000.f);
      params.push_back({"p" + std::to_string(k), view_of(vk, 10), view_of(gk, 10)});
    }
    DistributedDataParallel ddp(g, params);
    ddp.synchronize();
    T_REQUIRE(ddp.last_step_stats()[0].in_place == (g.rank() == 0));
    for (std::size_t k = 0; k < 3; ++k)
      for (std::size_t i = 0; i < 10; ++i)
        T_REQUIRE(static_cast<float*>(params[k].grad.data)[i] == float(k * 10 + i) + 500.f);
  });
}
