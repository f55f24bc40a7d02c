// Device planning as a table: no GPU, fake CUDA_VISIBLE_DEVICES values.
#include <catch2/catch.hpp>

#include "fastrun/launcher/device_plan.h"
#include "fastrun/runtime/error.h"

using fastrun::ConfigError;
using fastrun::launcher::plan_devices;
using Strings = std::vector<std::string>;

TEST_CASE("device plan maps user indices through CUDA_VISIBLE_DEVICES", "[launcher][devices]") {
  struct Row {
    const char* spec;
    std::optional<std::string> cvd;
    int physical;
    Strings ranks;
    std::string user;
  };
  const std::vector<Row> rows = {
      {"0,2,3", "3,4,5,6", 0, {"3", "5", "6"}, "3,4,5,6"},
      {"3,0", "3,4,5,6", 0, {"6", "3"}, "3,4,5,6"},  // the user's order, not sorted
      {"all", "3,4,5,6", 0, {"3", "4", "5", "6"}, "3,4,5,6"},
      {"1", "GPU-aaaa,GPU-bbbb", 0, {"GPU-bbbb"}, "GPU-aaaa,GPU-bbbb"},
      {"0,1", "MIG-x1, MIG-x2", 0, {"MIG-x1", "MIG-x2"}, "MIG-x1, MIG-x2"},
      {"2,0", std::nullopt, 4, {"2", "0"}, "0,1,2,3"},
      {"all", std::nullopt, 2, {"0", "1"}, "0,1"},
      {"0", "7", 0, {"7"}, "7"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.spec, row.cvd.value_or("<unset>"), row.physical);
    const auto plan = plan_devices(row.spec, row.cvd, row.physical);
    CHECK(plan.rank_devices == row.ranks);
    CHECK(plan.user_visible == row.user);
  }
}

TEST_CASE("device plan rejects bad lists naming the entry and the range", "[launcher][devices]") {
  struct Row {
    const char* spec;
    std::optional<std::string> cvd;
    int physical;
    Strings must_contain;
  };
  const std::vector<Row> rows = {
      {"", "0,1", 0, {"empty", "0..1"}},
      {"0,,1", "0,1,2", 0, {"entry 1 is empty", "0..2"}},
      {"a", "0,1", 0, {"'a'", "0..1"}},
      {"1,x", "0,1", 0, {"'x'"}},
      {"-1", "0,1", 0, {"'-1'", "negative", "0..1"}},
      {"+1", "0,1", 0, {"'+1'"}},
      {"1,1", "0,1,2", 0, {"1 is listed twice"}},
      {"4", "3,4,5,6", 0, {"4 is out of range", "0..3", "4 devices", "CUDA_VISIBLE_DEVICES=3,4,5,6"}},
      {"99999999999999999999", "0", 0, {"out of range"}},
      {"2", std::nullopt, 2, {"2 is out of range", "0..1"}},
      {"0", std::nullopt, 0, {"no GPU found", "--nproc"}},
      {"all", "", 0, {"no GPU is visible", "--nproc"}},
      {"0", "0,bogus", 0, {"'bogus'", "GPU-<uuid>"}},
      {"0", "0,,1", 0, {"entry 1"}},
      {"0", "2,2", 0, {"'2' is listed twice"}},
  };
  for (const Row& row : rows) {
    CAPTURE(row.spec, row.cvd.value_or("<unset>"), row.physical);
    try {
      plan_devices(row.spec, row.cvd, row.physical);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      for (const auto& s : row.must_contain) {
        CAPTURE(e.what());
        CHECK(std::string(e.what()).find(s) != std::string::npos);
      }
    }
  }
}
