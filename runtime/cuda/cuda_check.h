#pragma once
// The one boundary where CUDA runtime status codes become fastrun exceptions (docs/errors.md).
// Internal header: it includes the CUDA runtime API, so only code built with CUDA includes it
// (runtime/cuda/, runtime/backend/nccl/). Everything above it is exception-based.
#include <string_view>

#include <cuda_runtime_api.h>

namespace fastrun {

// Throws BackendError("<what>: CUDA error cudaErrorX: <text>"). Clears CUDA's last-error slot
// first so a non-sticky error does not resurface in the next, unrelated call.
[[noreturn]] void throw_cuda_error(cudaError_t status, std::string_view what);

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw_cuda_error(status, what);
}
inline void check_cuda(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) throw_cuda_error(status, what);
}

// "cudaErrorX: text", for messages that are not exceptions (logs, destructors).
std::string cuda_error_text(cudaError_t status);

}  // namespace fastrun
