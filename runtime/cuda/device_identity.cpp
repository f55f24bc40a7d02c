#include "fastrun/runtime/cuda/device_identity.h"

#include <array>

#include <fmt/format.h>

#include "fastrun/runtime/cuda/cuda_check.h"
#include "fastrun/runtime/error.h"

namespace fastrun {

CudaDeviceProbe cuda_device_probe() noexcept {
  CudaDeviceProbe probe;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    try {
      probe.error = "cudaGetDeviceCount: " + cuda_error_text(status);
    } catch (...) {  // allocation failure while describing: the count is still the answer
    }
    return probe;
  }
  probe.count = count;
  if (count == 0) probe.error = "cudaGetDeviceCount: 0 devices";
  return probe;
}

int cuda_device_count() noexcept { return cuda_device_probe().count; }

std::string cuda_device_identity(int device) {
  const CudaDeviceProbe probe = cuda_device_probe();
  if (device < 0 || device >= probe.count) {
    throw BackendError(fmt::format("cuda_device_identity: device {} is not visible: {} device(s) visible{}{} "
                                   "(CUDA_VISIBLE_DEVICES selects them; the launcher's --devices sets it)",
                                   device, probe.count, probe.error.empty() ? "" : ", ", probe.error));
  }
  std::array<char, 64> bus_id{};
  check_cuda(cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()), device),
             fmt::format("cudaDeviceGetPCIBusId(device {})", device));
  return std::string(bus_id.data());
}

int cuda_current_device() {
  int device = -1;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

void cuda_set_device(int device) {
  check_cuda(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
}

}  // namespace fastrun
