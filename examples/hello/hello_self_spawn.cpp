// hello_self_spawn: the same hello, but the program starts its own ranks (no `fastrun` needed):
//   ./hello_self_spawn 4            # 4 CPU ranks
//   ./hello_self_spawn --devices 0,1
// launch_self() must be the first thing main does, before any CUDA call: rank 0 sets its own
// CUDA_VISIBLE_DEVICES there. Ranks 1..N-1 are this binary re-executed with the same argv.
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "fastrun/launcher/self_launch.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/tools/flags/number_flags.h"

int main(int argc, char** argv) {
  fastrun::SelfLaunchOptions options;
  options.nproc = 2;
  options.tag_output = true;
  CLI::App app("hello from ranks this program starts itself", "hello_self_spawn");
  fastrun::flags::integer(app, "N", options.nproc, "CPU ranks to start", 1, 4096);
  app.add_option("--devices", options.devices, "one rank per GPU instead: LIST = indices, e.g. 0,1, or all")
      ->type_name("LIST");
  int rank = 0;
  try {
    fastrun::flags::parse(app, argc, argv);
    if (app.count("--devices")) options.nproc = 0;  // --devices instead of N
    rank = fastrun::launch_self(argc, argv, options);  // FIRST: before any CUDA use
  } catch (const fastrun::ConfigError& e) {  // bad options, found before anything starts
    std::fprintf(stderr, "hello_self_spawn: %s\n", e.what());
    return 2;  // a usage error, as the fastrun CLI exits
  } catch (const std::exception& e) {  // the job could not start (store, spawn)
    std::fprintf(stderr, "hello_self_spawn: %s\n", e.what());
    return 1;
  }
  const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
  std::printf("hello from rank %d of %s, device %s, run %s\n", rank, std::getenv("FASTRUN_WORLD_SIZE"),
              devices ? devices : "<all>", std::getenv("FASTRUN_RUN_ID"));
  std::fflush(stdout);
  try {
    auto store = fastrun::connect_store(std::getenv("FASTRUN_STORE"));
    const auto world = static_cast<int>(fastrun::env::get_int(fastrun::env::kWorldSize));
    fastrun::store_barrier(*store, "hello", world, std::chrono::seconds(60));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hello_self_spawn: rank %d: %s\n", rank, e.what());
    return 1;
  }
  std::printf("rank %d passed the barrier\n", rank);
  return 0;  // rank 0 waits here (at exit) for the other ranks
}
