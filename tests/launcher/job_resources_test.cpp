// JobResources: what a job owns outside its processes, created as the launcher creates it.
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

#include "fastrun/launcher/job_resources.h"
#include "process_runner.h"

using namespace fastrun;

TEST_CASE("a job's shm store holds the keys of 4096 ranks", "[launcher][store]") {
  launcher::JobConfig job;
  job.world_size = 4096;
  job.run_id = "keys-" + std::to_string(::getpid());
  job.store_address = "shm://" + job.run_id;
  launcher::JobResources resources(job);
  Store& store = *resources.store();
  // 8 keys per rank, as a job with two process groups sets them (join, barrier, gloo address).
  const Bytes value(48, std::uint8_t{7});
  constexpr int kKeys = 8;
  for (int rank = 0; rank < job.world_size; ++rank) {
    for (int k = 0; k < kKeys; ++k) store.set("g" + std::to_string(k) + "/rank/" + std::to_string(rank), value);
  }
  CHECK(store.num_keys() == std::int64_t{job.world_size} * kKeys);
  CHECK(store.get("g7/rank/4095") == value);
  resources.release();
  CHECK(test::shm_entries("fastrun-" + job.run_id).empty());
}
