#include "fastrun/runtime/cuda/cuda_check.h"

#include <string>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun {

std::string cuda_error_text(cudaError_t status) {
  return fmt::format("{}: {}", cudaGetErrorName(status), cudaGetErrorString(status));
}

void throw_cuda_error(cudaError_t status, std::string_view what) {
  (void)cudaGetLastError();  // reset the non-sticky error state; sticky errors stay regardless
  throw BackendError(fmt::format("{}: CUDA error {}", what, cuda_error_text(status)));
}

}  // namespace fastrun
