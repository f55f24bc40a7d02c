// Device planning as a table: no GPU, fake CUDA_VISIBLE_DEVICES values.
#include <catch2/catch.hpp>

#include "fastrun/launcher/device_plan.h"
#include "fastrun/runtime/error.h"

using fastrun::ConfigError;
using fastrun::launcher::check_device_spec;
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
      {"", "0,1", 0, {"empty", "'all'"}},
      {"0,,1", "0,1,2", 0, {"entry 1 is empty", "'all'"}},
      {"a", "0,1", 0, {"'a'", "not a device index", "'all'"}},
      {"1,x", "0,1", 0, {"'x'"}},
      {"-1", "0,1", 0, {"'-1'", "negative"}},
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

// A typo in the list is named as one, never reported as "no GPU found" (the probe comes after).
TEST_CASE("device plan names a malformed list and what is accepted before looking for GPUs", "[launcher][devices]") {
  const std::vector<std::string> bad = {"gpu0", "cuda:0", "GPU-1f2e3d4c", "MIG-abc", "0,gpu1", "ALL", "all,0",
                                        "0 ", "1.5", "+1", "0x1", "-2", "0,", ""};
  for (const std::string& spec : bad) {
    CAPTURE(spec);
    for (const auto& [cvd, physical] : {std::pair<std::optional<std::string>, int>{std::nullopt, 0},
                                        {std::nullopt, 4}, {std::string(""), 0}, {std::string("0,1"), 0}}) {
      CAPTURE(cvd.value_or("<unset>"), physical);
      try {
        plan_devices(spec, cvd, physical);
        FAIL("accepted");
      } catch (const ConfigError& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(what.find("no GPU") == std::string::npos);
        CHECK(what.find("'all'") != std::string::npos);            // what is accepted
        CHECK(what.find("indices into the visible GPUs") != std::string::npos);
        CHECK(what.find("GPU-<uuid>") != std::string::npos);
        CHECK(what.find("MIG-<uuid>") != std::string::npos);
      }
    }
    CHECK_THROWS_AS(check_device_spec(spec), ConfigError);
  }
  // The entry itself is named (the empty ones by position).
  for (const std::string spec : {"gpu0", "0,gpu1", "1.5"}) {
    CAPTURE(spec);
    const std::string entry = spec == "0,gpu1" ? "gpu1" : spec;
    CHECK_THROWS_WITH(check_device_spec(spec), Catch::Contains("'" + entry + "' is not a device index"));
  }
  CHECK_THROWS_WITH(check_device_spec("GPU-1f2e3d4c"),
                    Catch::Contains("'GPU-1f2e3d4c' is a device UUID") && Catch::Contains("CUDA_VISIBLE_DEVICES=GPU-1f2e3d4c"));
  CHECK_THROWS_WITH(check_device_spec("0,"), Catch::Contains("entry 1 is empty"));
  for (const char* good : {"all", "0", "0,2,3", "12", "99999999999999999999"}) {  // range is plan_devices' business
    CAPTURE(good);
    CHECK_NOTHROW(check_device_spec(good));
  }
}
