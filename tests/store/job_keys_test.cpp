// The job-level keys (runtime/store/job_keys.h): their names are a contract with the docs and
// with other releases' launchers, and a failure is recorded by the first writer only.
#include <catch2/catch.hpp>

#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/memory_store.h"

using namespace fastrun;

TEST_CASE("job keys: the names the docs and every layer use") {
  CHECK(std::string(kFailureKey) == "fastrun/failure");
  CHECK(peer_key(3) == "fastrun/peer/3");
  CHECK(join_arrival_key(2, 5) == "fastrun/join/2/5");
  CHECK(launcher_keys::node(1) == "fastrun/launcher/node/1");
  CHECK(launcher_keys::heartbeat(1) == "fastrun/launcher/heartbeat/1");
  CHECK(launcher_keys::done(1) == "fastrun/launcher/done/1");
  CHECK(launcher_keys::ack(1) == "fastrun/launcher/ack/1");
}

TEST_CASE("job keys: the first failure recorded wins") {
  MemoryStore store;
  CHECK(record_failure(store, "rank 1: out of memory") == "rank 1: out of memory");
  // The launcher's generic reason, written after the rank's own, must not replace it.
  CHECK(record_failure(store, "rank 1: exited with code 1") == "rank 1: out of memory");
  CHECK(to_string(store.get(kFailureKey)) == "rank 1: out of memory");
}

TEST_CASE("job keys: set_if_absent keeps the earlier writer's value") {
  MemoryStore store;
  CHECK(set_if_absent(store, launcher_keys::kNodeFailure, "a") == "a");
  CHECK(set_if_absent(store, launcher_keys::kNodeFailure, "b") == "a");
}
