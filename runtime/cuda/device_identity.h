#pragma once
// CUDA device discovery for the runtime (join exchange, backend choice). CUDA-free header: it
// can be included anywhere, but it is only compiled where the build has CUDA, so callers guard
// it with `#ifdef FASTRUN_HAVE_NCCL` (the macro fastrun::runtime defines when CUDA and NCCL
// were found).
//
// Contract: these functions initialise the CUDA runtime of the calling process, which reads
// CUDA_VISIBLE_DEVICES once. Call them only inside a rank, after the launcher has set that
// variable; never from the launcher or at static-initialisation time.
#include <string>

namespace fastrun {

struct CudaDeviceProbe {
  int count = 0;      // visible CUDA devices; 0 when there is no driver or no GPU
  std::string error;  // why count is 0 ("cudaGetDeviceCount: cudaErrorNoDevice: ..."), else ""
};

// Never throws: "no driver" and "no device" are answers here, not failures.
CudaDeviceProbe cuda_device_probe() noexcept;
int cuda_device_count() noexcept;

// The PCI bus id of `device` (an index among the visible devices), e.g. "0000:3B:00.0": what
// ranks exchange on joining so that two ranks on one GPU are refused (naming both ranks) before
// NCCL is touched. BackendError when the device does not exist or CUDA fails.
std::string cuda_device_identity(int device);

// The calling thread's current CUDA device, and setting it (BackendError on failure).
int cuda_current_device();
void cuda_set_device(int device);

}  // namespace fastrun
