// The fastNLP driver surface without peers: guards restore on every exit path, seeds.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <stdexcept>

#include "fastrun/runtime/fastnlp_compat/driver.h"
#include "fastrun/runtime/join/rendezvous.h"
#include "fastrun/runtime/process_group/peer_info.h"
#include "test_support/scoped_env.h"

using namespace fastrun;

TEST_CASE("NoSyncGuard sets a level and restores it, exceptions included", "[driver]") {
  const int before = no_sync_level();
  {
    NoSyncGuard g(1);
    CHECK(no_sync_level() == 1);
    {
      NoSyncGuard inner(2);
      CHECK(no_sync_level() == 2);
    }
    CHECK(no_sync_level() == 1);
  }
  CHECK(no_sync_level() == before);
  try {
    NoSyncGuard g(2);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  CHECK(no_sync_level() == before);
  CHECK_THROWS_WITH(NoSyncGuard(3), Catch::Contains("FASTRUN_NO_SYNC"));
  CHECK(no_sync_level() == before);
}

TEST_CASE("rank_zero_call and AllRanksGuard", "[driver]") {
  test::ScopedEnv r("FASTRUN_RANK", "1");  // no context: the rank comes from the environment
  CHECK(global_rank() == 1);
  CHECK_FALSE(is_global_zero());
  int calls = 0;
  rank_zero_call([&] { ++calls; });
  CHECK(calls == 0);
  CHECK_FALSE(rank_zero_call([] { return 1; }).has_value());
  {
    AllRanksGuard all;
    CHECK(is_global_zero());
    CHECK(rank_zero_call([] { return no_sync_level(); }).value() == 2);
  }
  try {
    AllRanksGuard all;
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(is_global_zero());
}

TEST_CASE("per-rank seeds are distinct, stable and documented", "[driver]") {
  // splitmix64(0 + golden * 1): the first output of splitmix64 seeded with 0.
  CHECK(per_rank_seed(0, 0) == 0xE220A8397B1DCDAFull);
  std::set<std::uint64_t> seen;
  for (int r = 0; r < 1000; ++r) seen.insert(per_rank_seed(42, r));
  CHECK(seen.size() == 1000);
  // splitmix64(42 + golden * 4): the documented formula, so a change of it cannot pass unseen.
  CHECK(per_rank_seed(42, 3) == 0x581CE1FF0E4AE394ull);
  test::ScopedEnv s("FASTRUN_GLOBAL_SEED", "42"), r("FASTRUN_RANK", "3");
  CHECK(per_rank_seed() == per_rank_seed(42, 3));
}

TEST_CASE("two ranks on one GPU are refused, naming both", "[join]") {
  std::vector<PeerInfo> peers{{0, "h", 10, "0000:3B:00.0"}, {1, "h", 11, "0000:3C:00.0"}, {2, "h", 12, "0000:3B:00.0"},
                              {3, "other", 13, "0000:3B:00.0"}, {4, "h", 14, "cpu"}, {5, "h", 15, "cpu"}};
  CHECK_THROWS_WITH(join_detail::check_distinct_devices(peers),
                    Catch::Contains("ranks 0 and 2") && Catch::Contains("0000:3B:00.0"));
  peers.erase(peers.begin() + 2);
  CHECK_NOTHROW(join_detail::check_distinct_devices(peers));
}

TEST_CASE("outside a job the rank is a launcher's, and a bad one is an error naming it", "[driver]") {
  test::ScopedEnv fastrun_rank("FASTRUN_RANK", nullptr), rank("RANK", nullptr),
      slurm("SLURM_PROCID", "5"), ompi("OMPI_COMM_WORLD_RANK", nullptr);
  CHECK(global_rank() == 5);
  {
    test::ScopedEnv torchrun("RANK", "2");  // torchrun's, before srun's
    CHECK(global_rank() == 2);
  }
  // These read as rank 0 or as a prefix before (strtol): every rank would have written the checkpoint.
  for (const char* bad : {"2x", "-1", "", " 3", "+3", "three", "99999999999"}) {
    test::ScopedEnv torchrun("RANK", bad);
    CAPTURE(bad);
    CHECK_THROWS_WITH(global_rank(), Catch::Contains(std::string("RANK='") + bad + "' is not valid") &&
                                         Catch::Contains("expected an integer from 0 to 2147483647"));
  }
}
