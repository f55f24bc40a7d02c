#include "fastrun/runtime/backend/nccl/nccl_check.h"

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::nccl {

std::string_view result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult(unknown)";
  }
}

bool is_fatal(ncclResult_t result) {
  return result != ncclSuccess && result != ncclInProgress && result != ncclInvalidArgument &&
         result != ncclInvalidUsage;
}

std::string describe(ncclResult_t result, ncclComm_t comm, std::string_view call, std::string_view context) {
  // ncclGetLastError is per-thread state inside NCCL (comm may be null): the most specific
  // text NCCL has, e.g. "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device ...".
  const char* last = ncclGetLastError(comm);
  std::string detail = (last && *last) ? fmt::format("; NCCL says: {}", last) : std::string();
  return fmt::format("{}: {} failed: {} ({}){}; set NCCL_DEBUG=WARN for NCCL's own log", context, call,
                     result_name(result), ncclGetErrorString(result), detail);
}

void throw_error(ncclResult_t result, ncclComm_t comm, std::string_view call, std::string_view context) {
  throw BackendError(describe(result, comm, call, context));
}

}  // namespace fastrun::nccl
