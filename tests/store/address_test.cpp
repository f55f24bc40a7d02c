// Store addresses: the accepted forms round-trip, bad ones are ConfigErrors saying what is accepted.
#include <catch2/catch.hpp>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"

using namespace fastrun;

TEST_CASE("store address: accepted forms", "[store][address]") {
  auto a = parse_store_address("shm://job-42.run_1");
  CHECK(a.kind == StoreAddress::Kind::shm);
  CHECK(a.name == "job-42.run_1");
  CHECK(a.to_string() == "shm://job-42.run_1");
  a = parse_store_address("file:///nfs/jobs/42");
  CHECK(a.kind == StoreAddress::Kind::file);
  CHECK(a.name == "/nfs/jobs/42");
  CHECK(a.to_string() == "file:///nfs/jobs/42");
  a = parse_store_address("tcp://node0.cluster:29500");
  CHECK(a.kind == StoreAddress::Kind::tcp);
  CHECK(a.name == "node0.cluster");
  CHECK(a.port == 29500);
  CHECK(a.to_string() == "tcp://node0.cluster:29500");
  a = parse_store_address("tcp://127.0.0.1:0");
  CHECK(a.port == 0);
  a = parse_store_address("tcp://[::1]:4242");
  CHECK(a.name == "::1");
  CHECK(a.to_string() == "tcp://[::1]:4242");
}

TEST_CASE("store address: bad forms say what is accepted", "[store][address]") {
  for (const char* bad : {"", "shm://", "tcp://host", "tcp://host:99999", "ftp://x", "tcp://:80", "tcp://h:",
                          "tcp://h:12ab", "file://", "shm://a/b", "shm://..", "job-42", "tcp://[::1]80"}) {
    INFO("address '" << bad << "'");
    try {
      parse_store_address(bad);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK_THAT(e.what(), Catch::Contains(std::string("'") + bad + "'"));
      CHECK_THAT(e.what(), Catch::Contains("shm://NAME") && Catch::Contains("file://PATH") &&
                               Catch::Contains("tcp://HOST:PORT"));
    }
    CHECK_THROWS_AS(host_store(bad), ConfigError);
    CHECK_THROWS_AS(connect_store(bad), ConfigError);
  }
}
