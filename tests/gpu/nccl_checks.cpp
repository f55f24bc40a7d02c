// fastrun-nccl-checks: the NCCL backend's GPU checks as a program that prints one PASS/FAIL line
// per check and exits non-zero when any failed. Run by tools/gpu_checks.sh on a GPU machine.
//
//   fastrun --devices 0 fastrun-nccl-checks      world of one through the launcher: join() on
//                                                the nccl backend, then every collective and
//                                                the point-to-point, rooted and all-to-all ops
//   fastrun-nccl-checks                          the same without the launcher (no environment)
//   FASTRUN_NCCL_ON_ERROR=raise fastrun-nccl-checks --failures
//                                                watchdog paths: op timeout, peer failure, init
//                                                deadline (the process must survive them)
//   fastrun-nccl-checks --exit-policy            an op timeout under the default exit policy:
//                                                the watchdog must end this process with exit 70
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/join/context.h"
#include "gpu/nccl_failure_checks.h"
#include "gpu/nccl_p2p_suite.h"
#include "gpu/nccl_suite.h"

using namespace fastrun;

namespace {

// Every collective, then the point-to-point, rooted and all-to-all ops.
std::vector<nccl_suite::Result> every_op(Backend& pg) {
  auto results = nccl_suite::check_collectives(pg);
  auto more = nccl_suite::check_p2p_and_rooted(pg);
  results.insert(results.end(), more.begin(), more.end());
  return results;
}

int report(const std::vector<nccl_suite::Result>& results) {
  int failed = 0;
  for (const auto& r : results) {
    if (r.passed) {
      std::printf("PASS %s\n", r.name.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", r.name.c_str(), r.detail.c_str());
    }
  }
  std::printf("nccl checks: %zu passed, %d failed\n", results.size() - failed, failed);
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}

int collectives() {
  if (env::raw(env::kRank)) {
    // Started by a launcher: the real join path (env layout, store, device identity exchange).
    JoinOptions options;
    options.backend = "nccl";
    auto ctx = join(options);
    std::printf("joined: rank %d of %d from the %s environment, device %s, backend %s\n", ctx->rank(),
                ctx->world_size(), ctx->source().c_str(), ctx->device_identity().c_str(),
                ctx->world().backend_name().c_str());
    std::fflush(stdout);
    return report(every_op(ctx->world().backend()));
  }
  std::printf("no launcher environment: world of one made directly on the nccl backend, device %s\n",
              cuda_device_identity(0).c_str());
  std::fflush(stdout);
  auto pg = nccl_suite::make_world_of_one(std::chrono::seconds(60), nullptr, "world");
  return report(every_op(*pg));
}

int failures() {
  if (env::get_string(env::kNcclOnError) != "raise") {
    std::printf("FAIL --failures needs FASTRUN_NCCL_ON_ERROR=raise (the default, exit, ends this process)\n");
    return 2;
  }
  return report({nccl_suite::check_init_deadline(), nccl_suite::check_peer_failure(),
                 nccl_suite::check_op_timeout()});
}

// Under FASTRUN_NCCL_ON_ERROR=exit the rank catches the timeout and carries on; the watchdog
// must end it (exit 70) about 5 s after the failure. Returning normally is the failure.
int exit_policy() {
  auto pg = nccl_suite::make_world_of_one(std::chrono::seconds(1), nullptr, "exit-policy-check");
  DeviceBuffer buf = nccl_suite::to_device({1.0}, DType::float32);
  nccl::stall_stream_for_testing(*pg, std::chrono::seconds(3));
  try {
    pg->all_reduce(buf.view(1, DType::float32))->wait(std::chrono::seconds(30));
    std::printf("FAIL exit policy: the stalled all_reduce completed\n");
    return 1;
  } catch (const TimeoutError& e) {
    std::printf("caught as expected: %s\n", e.what());
    std::fflush(stdout);
  }
  pg.reset();  // dropping the failed group must not cancel the exit
  std::this_thread::sleep_for(std::chrono::seconds(30));
  std::printf("FAIL exit policy: the process was not ended by the watchdog\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (const CudaDeviceProbe probe = cuda_device_probe(); probe.count == 0) {
      std::printf("FAIL no GPU visible (%s)\n", probe.error.c_str());
      return 1;
    }
    if (mode.empty()) return collectives();
    if (mode == "--failures") return failures();
    if (mode == "--exit-policy") return exit_policy();
    std::fprintf(stderr, "usage: %s [--failures | --exit-policy]\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
}
