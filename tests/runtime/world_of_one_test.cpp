// With no launcher environment at all, join() gives a world of one where everything works.
#include <catch2/catch.hpp>

#include <vector>

#include "fastrun/runtime/fastnlp_compat/driver.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/join/env_sources.h"
#include "fastrun/runtime/objects/object_collectives.h"
#include "test_support/scoped_env.h"

using namespace fastrun;

namespace {
struct NoLauncherEnv {
  test::ScopedEnv a{"FASTRUN_RANK", nullptr}, b{"FASTRUN_WORLD_SIZE", nullptr}, c{"RANK", nullptr},
      d{"WORLD_SIZE", nullptr}, e{"SLURM_PROCID", nullptr}, f{"OMPI_COMM_WORLD_RANK", nullptr},
      g{"FASTRUN_STORE", nullptr}, h{"MASTER_ADDR", nullptr}, i{"FASTRUN_BACKEND", nullptr},
      j{"FASTRUN_NO_SYNC", nullptr};
};
}  // namespace

TEST_CASE("a world of one without any environment", "[join][world1]") {
  NoLauncherEnv clean;
  auto ctx = join();
  CHECK(ctx->rank() == 0);
  CHECK(ctx->world_size() == 1);
  CHECK(ctx->local_rank() == 0);
  CHECK(ctx->local_world_size() == 1);
  CHECK(ctx->node_rank() == 0);
  CHECK(ctx->source() == "none");
  CHECK(ctx->world().size() == 1);

  std::vector<float> v{1, 2, 3};
  for (auto op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product})
    ctx->world().all_reduce(view_of(v.data(), v.size()), {op})->wait();
  CHECK(v == std::vector<float>{1, 2, 3});
  ctx->world().broadcast(view_of(v.data(), v.size()))->wait();
  std::vector<float> out(3);
  ctx->world().all_gather(view_of(v.data(), 3), view_of(out.data(), 3))->wait();
  CHECK(out == v);
  ctx->world().reduce_scatter(view_of(v.data(), 3), view_of(out.data(), 3))->wait();
  CHECK(out == v);
  ctx->world().barrier()->wait();

  CHECK(broadcast_object(std::string("x"), 0, &ctx->world()) == "x");
  CHECK_THROWS_WITH(ctx->world().broadcast(view_of(v.data(), v.size()), {1}),
                    Catch::Contains("broadcast on group 'world': root 1 is not a rank of the group (0..0)"));
  CHECK(all_gather_object(5, &ctx->world()) == std::vector<int>{5});
  CHECK(gather_object(5, 0, &ctx->world()).value() == std::vector<int>{5});

  auto sub = ctx->new_group({0});
  REQUIRE(sub);
  CHECK(sub->size() == 1);
  CHECK_THROWS_AS(ctx->new_group({1}), ConfigError);

  CHECK(is_global_zero());
  barrier();
  CHECK(fastrun::all_gather(std::string("me")) == std::vector<std::string>{"me"});
  CHECK(fastrun::broadcast_object(3) == 3);
  CHECK(rank_zero_call([] { return no_sync_level(); }).value() == 2);
}

TEST_CASE("object collectives without a group or a context act on a world of one", "[objects][world1]") {
  NoLauncherEnv clean;
  REQUIRE(!current_context());
  CHECK(broadcast_object(std::string("x")) == "x");
  CHECK(all_gather_object(5) == std::vector<int>{5});
  CHECK(gather_object(5).value() == std::vector<int>{5});
  // A root outside the world is refused as on any world size, though no data would move.
  CHECK_THROWS_WITH(gather_object(5, 1), "gather_object: root 1 is not a rank of the group (0..0)");
  CHECK_THROWS_WITH(broadcast_object(5, -1), "broadcast_object: root -1 is not a rank of the group (0..0)");
  CHECK_THROWS_WITH(scatter_object(std::vector<int>{7}, 1), "scatter_object: root 1 is not a rank of the group (0..0)");
  CHECK(scatter_object(std::vector<int>{7}) == 7);
  CHECK_THROWS_WITH(scatter_object(std::vector<int>{7, 8}), Catch::Contains("2 values for a group of 1"));
  // A peer does not exist in a world of one: the error says so and what to do.
  CHECK_THROWS_WITH(send_object(1, 1), Catch::Contains("send_object: peer 1") && Catch::Contains("join()"));
  CHECK_THROWS_WITH(recv_object<int>(1), Catch::Contains("recv_object: peer 1"));
}

TEST_CASE("a backend that is not built is a clear error", "[join][world1]") {
  NoLauncherEnv clean;
  CHECK_THROWS_WITH(join({"mpi"}), Catch::Contains("'mpi'") && Catch::Contains("gloo"));
  test::ScopedEnv bad("FASTRUN_BACKEND", "tpu");
  CHECK_THROWS_WITH(join(), Catch::Contains("FASTRUN_BACKEND='tpu'"));
}

TEST_CASE("bad launcher variables are ConfigErrors naming them", "[join]") {
  NoLauncherEnv clean;
  {
    test::ScopedEnv r("RANK", "x");
    CHECK_THROWS_WITH(join(), Catch::Contains("RANK='x'"));
  }
  {
    test::ScopedEnv r("RANK", "3"), w("WORLD_SIZE", "2");
    CHECK_THROWS_WITH(join(), Catch::Contains("RANK=3") && Catch::Contains("WORLD_SIZE=2"));
  }
  {
    test::ScopedEnv r("SLURM_PROCID", "1"), w("SLURM_NTASKS", "2");
    // The advice must be one that works under an external launcher: MASTER_ADDR/PORT (rank 0
    // hosts), not a file:// store nothing would create (docs/runtime.md, "Joining").
    CHECK_THROWS_WITH(join(), Catch::Contains("slurm") && Catch::Contains("set MASTER_ADDR and MASTER_PORT") &&
                                  !Catch::Contains("file://"));
  }
}

TEST_CASE("environment sources: Open MPI and Slurm layouts", "[join]") {
  NoLauncherEnv clean;
  {
    test::ScopedEnv r("OMPI_COMM_WORLD_RANK", "3"), w("OMPI_COMM_WORLD_SIZE", "4"),
        lr("OMPI_COMM_WORLD_LOCAL_RANK", "1"), lw("OMPI_COMM_WORLD_LOCAL_SIZE", "2"), s("FASTRUN_STORE", "file:///tmp/x");
    const auto l = join_detail::detect_layout();
    CHECK(l.source == "openmpi");
    CHECK(l.rank == 3);
    CHECK(l.world_size == 4);
    CHECK(l.local_rank == 1);
    CHECK(l.local_world_size == 2);
    CHECK(l.store_address == "file:///tmp/x");
    CHECK_FALSE(l.host_store);
  }
  {
    test::ScopedEnv r("SLURM_PROCID", "0"), w("SLURM_NTASKS", "8"), n("SLURM_NODEID", "0"), a("MASTER_ADDR", "10.0.0.1"),
        p("MASTER_PORT", "29500"), t("FASTRUN_STORE_TOKEN", nullptr);
    const auto l = join_detail::detect_layout();
    CHECK(l.source == "slurm");
    CHECK(l.store_address == "tcp://10.0.0.1:29500");
    CHECK(l.host_store);  // rank 0 hosts it
    CHECK_FALSE(l.local_world_size.has_value());  // computed from host names at join
  }
  {  // fastrun's own variables win over the others
    test::ScopedEnv r("FASTRUN_RANK", "1"), w("FASTRUN_WORLD_SIZE", "2"), tr("RANK", "0"), tw("WORLD_SIZE", "2"),
        s("FASTRUN_STORE", "shm://job");
    const auto l = join_detail::detect_layout();
    CHECK(l.source == "fastrun");
    CHECK(l.rank == 1);
  }
}

TEST_CASE("environment sources: under a real torchrun every rank uses the agent's c10d store", "[join]") {
  NoLauncherEnv clean;
  test::ScopedEnv r("RANK", "3"), w("WORLD_SIZE", "4"), a("MASTER_ADDR", "10.0.0.1"), p("MASTER_PORT", "29500"),
      agent("TORCHELASTIC_USE_AGENT_STORE", "True"), restart("TORCHELASTIC_RESTART_COUNT", "2"),
      run("TORCHELASTIC_RUN_ID", "job7");
  // On one node and across nodes alike: nobody hosts; keys go under fastrun's prefix per run and
  // restart (torch's own keys live in that store too).
  for (const char* local_world : {"4", "2"}) {
    test::ScopedEnv lw("LOCAL_WORLD_SIZE", local_world);
    const auto l = join_detail::detect_layout();
    CHECK(l.store_address == "c10d://10.0.0.1:29500");
    CHECK(l.store_prefix == "fastrun/job7/attempt_2");
    CHECK_FALSE(l.host_store);
    CHECK(l.master_host == "10.0.0.1");
    CHECK(l.master_port == 29500);
    // A torch 2.x agent's store speaks another protocol: on one node rank 0 then hosts shm.
    CHECK(l.fallback_store == (std::string(local_world) == "4" ? "shm://torchrun-29500-2" : ""));
  }
  {  // torchrun sets both; a half-copied environment is named
    test::ScopedEnv no_addr("MASTER_ADDR", nullptr);
    CHECK_THROWS_WITH(join_detail::detect_layout(),
                      Catch::Contains("MASTER_PORT=29500") && Catch::Contains("MASTER_ADDR is not"));
  }
}
