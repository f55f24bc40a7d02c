#include "fastrun/runtime/backend/nccl/component.h"

#include <cstdlib>
#include <string>

#include "fastrun/runtime/backend/nccl/nccl_backend.h"
#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/cuda/ddp_device_ops.h"
#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/device_probe.h"

namespace {

std::string cuda_identity() {
  // CUDA_VISIBLE_DEVICES set and empty (the launcher gives CPU ranks that): CUDA sees no device.
  // Say so without initialising the CUDA runtime, which on a machine without a driver searches
  // the library path for libcuda.so.1 in every rank of a CPU job (part of join()'s cost).
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && *visible == '\0') return "cpu";
  const fastrun::CudaDeviceProbe probe = fastrun::cuda_device_probe();
  return probe.count > 0 ? fastrun::cuda_device_identity(0) : "cpu";
}

}  // namespace

extern "C" int fastrun_nccl_component() {
  static const int installed = [] {
    static const fastrun::backend::Registration nccl("nccl", &fastrun::nccl::make_nccl_backend);
    fastrun::ddp::install_cuda_device_ops();
    fastrun::install_device_identity_probe(&cuda_identity);
    return 1;
  }();
  return installed;
}

namespace {
// Loading the library is enough (a test binary linking it directly, a dlopen).
[[maybe_unused]] const int kInstalledOnLoad = fastrun_nccl_component();
}  // namespace
