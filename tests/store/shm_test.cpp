// shm:// specifics: owner-only segment, name collisions, a full segment, missing segments.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "conformance.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "test_support/scoped_env.h"

using namespace fastrun;
using namespace std::chrono_literals;

TEST_CASE("shm store: segment is /dev/shm/fastrun-NAME, mode 0600, removed by its host", "[store][shm]") {
  const std::string name = test::unique_test_name("perm");
  const std::string path = "/dev/shm/fastrun-" + name;
  {
    const mode_t old = ::umask(0);  // the segment must be 0600 whatever the umask
    auto hosted = host_store("shm://" + name);
    ::umask(old);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == ::geteuid());
    CHECK(hosted->address() == "shm://" + name);
    CHECK(hosted->token().empty());
    // A second host of the same name is refused and leaves the first intact.
    try {
      host_store("shm://" + name);
      FAIL("second host accepted");
    } catch (const StoreError& e) {
      CHECK_THAT(e.what(), Catch::Contains("already exists") && Catch::Contains("--cleanup"));
    }
    auto s = connect_store("shm://" + name);
    s->set("k", to_bytes("v"));
    CHECK(to_string(hosted->connect()->get("k", 1s)) == "v");
  }
  struct stat st {};
  CHECK(::stat(path.c_str(), &st) != 0);
  CHECK(test::leftovers().empty());
}

TEST_CASE("shm store: a full segment is a clear error, and the store keeps working", "[store][shm]") {
  StoreOptions o;
  o.shm_bytes = 65536;  // the minimum: two heaps of ~24 KiB
  auto hosted = host_store("shm://" + test::unique_test_name("full"), o);
  auto s = hosted->connect();
  s->set("small", to_bytes("kept"));
  try {
    s->set("huge", Bytes(100000, 7));
    FAIL("a value larger than the segment was stored");
  } catch (const StoreError& e) {
    CHECK_THAT(e.what(), Catch::Contains("full") && Catch::Contains("FASTRUN_SHM_STORE_BYTES") &&
                             Catch::Contains("65536") && Catch::Contains("huge"));
  }
  CHECK_FALSE(s->check({"huge"}));
  CHECK(to_string(s->get("small", 1s)) == "kept");
  // Overwriting many times compacts instead of running out.
  for (int i = 0; i < 2000; ++i) s->set("churn", Bytes(1000, static_cast<std::uint8_t>(i)));
  CHECK(s->get("churn", 1s) == Bytes(1000, static_cast<std::uint8_t>(1999)));
  // Too many keys: also a clear error.
  bool refused = false;
  for (int i = 0; i < 5000 && !refused; ++i) {
    try {
      s->set("key-" + std::to_string(i), to_bytes("v"));
    } catch (const StoreError& e) {
      refused = true;
      CHECK_THAT(e.what(), Catch::Contains("FASTRUN_SHM_STORE_BYTES"));
    }
  }
  CHECK(refused);
  CHECK(to_string(s->get("small", 1s)) == "kept");
  CHECK(s->delete_key("key-0"));
  s->set("after", to_bytes("ok"));
  CHECK(to_string(s->get("after", 1s)) == "ok");
}

TEST_CASE("shm store: sizes below the minimum are refused", "[store][shm]") {
  StoreOptions o;
  o.shm_bytes = 1000;
  CHECK_THROWS_AS(host_store("shm://" + test::unique_test_name("tiny"), o), ConfigError);
  test::ScopedEnv env("FASTRUN_SHM_STORE_BYTES", "12");
  CHECK_THROWS_WITH(host_store("shm://" + test::unique_test_name("tiny")), Catch::Contains("FASTRUN_SHM_STORE_BYTES"));
  CHECK(test::leftovers().empty());
}

TEST_CASE("shm store: connecting to a segment nobody hosts times out naming it", "[store][shm]") {
  StoreOptions o;
  o.timeout = 200ms;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(connect_store("shm://" + test::unique_test_name("nobody"), o),
                    Catch::Contains("/dev/shm/fastrun-") && Catch::Contains("nobody"));
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}
