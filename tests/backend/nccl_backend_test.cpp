// The nccl backend. Compiled only where fastrun::runtime was built with NCCL; the cases that
// need a GPU skip (test::skip_case: "Skipped" in CTest's summary) when none is visible. On CI's
// CPU machines the binary runs against the CPU model of CUDA and NCCL (FASTRUN_CUDA_MODEL,
// docs/cuda-model.md), which has devices: the GPU cases run there. The collective checks themselves live in tests/gpu/nccl_suite.h, shared
// with the GPU check program (tools/gpu_checks.sh runs both on a GPU machine).
#ifdef FASTRUN_HAVE_NCCL

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "fastrun/runtime/backend/nccl/nccl_check.h"
#include "fastrun/runtime/backend/nccl/nccl_types.h"
#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/error.h"
#include "gpu/nccl_failure_checks.h"
#include "gpu/nccl_suite.h"
#include "test_support/scoped_env.h"
#include "test_support/skip.h"

using namespace fastrun;

namespace {

// "" when a GPU is visible, else the skip message.
std::string no_gpu_reason() {
  const CudaDeviceProbe probe = cuda_device_probe();
  return probe.count > 0 ? std::string() : "no GPU visible (" + probe.error + ")";
}

void require_all(const std::vector<nccl_suite::Result>& results) {
  for (const auto& r : results) {
    INFO(r.name << ": " << r.detail);
    CHECK(r.passed);
  }
}

}  // namespace

TEST_CASE("nccl: status codes become BackendError with NCCL's own text", "[nccl]") {
  REQUIRE(nccl::check(ncclSuccess, nullptr, "call", "ctx") == ncclSuccess);
  REQUIRE(nccl::check(ncclInProgress, nullptr, "call", "ctx") == ncclInProgress);  // non-blocking comms
  try {
    FASTRUN_NCCL_CHECK(ncclInvalidArgument, nullptr, "nccl group 'world' rank 0/1");
    FAIL("no exception");
  } catch (const BackendError& e) {
    const std::string what = e.what();
    CHECK(what.find("nccl group 'world' rank 0/1") != std::string::npos);
    CHECK(what.find("ncclInvalidArgument") != std::string::npos);
    CHECK(what.find("invalid argument") != std::string::npos);  // ncclGetErrorString's text
    CHECK(what.find("NCCL_DEBUG") != std::string::npos);
  }
  CHECK_FALSE(nccl::is_fatal(ncclInvalidUsage));
  CHECK(nccl::is_fatal(ncclSystemError));
  CHECK(nccl::is_fatal(ncclRemoteError));
}

TEST_CASE("nccl: every dtype and op maps to NCCL's", "[nccl]") {
  CHECK(nccl::to_nccl(DType::float32) == ncclFloat32);
  CHECK(nccl::to_nccl(DType::float64) == ncclFloat64);
  CHECK(nccl::to_nccl(DType::float16) == ncclFloat16);
  CHECK(nccl::to_nccl(DType::bfloat16) == ncclBfloat16);
  CHECK(nccl::to_nccl(DType::int32) == ncclInt32);
  CHECK(nccl::to_nccl(DType::int64) == ncclInt64);
  CHECK(nccl::to_nccl(ReduceOp::sum) == ncclSum);
  CHECK(nccl::to_nccl(ReduceOp::avg) == ncclAvg);
  CHECK(nccl::to_nccl(ReduceOp::min) == ncclMin);
  CHECK(nccl::to_nccl(ReduceOp::max) == ncclMax);
  CHECK(nccl::to_nccl(ReduceOp::product) == ncclProd);
}

TEST_CASE("nccl: the backend is registered and the device probe never throws", "[nccl]") {
  CHECK(backend::available("nccl"));
  const CudaDeviceProbe probe = cuda_device_probe();
  CHECK(probe.count == cuda_device_count());
  // The driver lists every GPU under /proc/driver/nvidia/gpus: with none listed, none is seen.
  // (Not under the CPU model of CUDA, whose devices the driver does not list.)
#ifndef FASTRUN_CUDA_MODEL
  std::error_code ec;
  if (std::filesystem::is_empty("/proc/driver/nvidia/gpus", ec) || ec) CHECK(probe.count == 0);
#endif
  if (probe.count == 0) {
    CHECK_FALSE(probe.error.empty());
    CHECK_THROWS_AS(cuda_device_identity(0), BackendError);
  } else {
    CHECK(cuda_device_identity(0).size() >= 12);  // "0000:3B:00.0"
  }
}

TEST_CASE("nccl: without a GPU, making a group says why and names the alternative", "[nccl]") {
  if (cuda_device_count() > 0) {
    test::skip_case("a GPU is visible, so the no-GPU error path cannot be seen here");
    return;
  }
  GroupSpec spec;
  spec.name = "world";
  try {
    auto pg = backend::find("nccl")(spec);
    FAIL("a group was made without a GPU");
  } catch (const BackendError& e) {
    const std::string what = e.what();
    CHECK(what.find("cudaGetDeviceCount") != std::string::npos);
    CHECK(what.find("gloo") != std::string::npos);
  }
}

TEST_CASE("nccl: world of one: every collective, dtype and op on device buffers", "[nccl][gpu]") {
  if (const std::string skip = no_gpu_reason(); !skip.empty()) {
    test::skip_case(skip);
    return;
  }
  test::ScopedEnv raise("FASTRUN_NCCL_ON_ERROR", "raise");  // a failure fails the case, not the binary
  auto pg = nccl_suite::make_world_of_one(std::chrono::seconds(60), nullptr, "world");
  REQUIRE(pg->backend_name() == "nccl");
  REQUIRE(pg->size() == 1);
  require_all(nccl_suite::check_collectives(*pg));
}

TEST_CASE("nccl: watchdog: op timeout, peer failure and init deadline", "[nccl][gpu]") {
  if (const std::string skip = no_gpu_reason(); !skip.empty()) {
    test::skip_case(skip);
    return;
  }
  test::ScopedEnv raise("FASTRUN_NCCL_ON_ERROR", "raise");  // this process must survive the failures
  require_all({nccl_suite::check_init_deadline(), nccl_suite::check_peer_failure(), nccl_suite::check_op_timeout()});
}

#endif  // FASTRUN_HAVE_NCCL
