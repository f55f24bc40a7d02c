#pragma once
// The one boundary where NCCL status codes become fastrun exceptions (docs/errors.md; NCCL's own
// src/include/checks.h is the model). Internal header: includes nccl.h.
//
//   FASTRUN_NCCL_CHECK(ncclAllReduce(...), comm, context)
// returns the status when it is ncclSuccess or ncclInProgress (non-blocking communicators),
// and otherwise throws BackendError:
//   "<context>: ncclAllReduce(...) failed: ncclSystemError (unhandled system error ...);
//    NCCL says: <ncclGetLastError>; set NCCL_DEBUG=WARN for NCCL's own log"
#include <string>
#include <string_view>

#include <nccl.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "fastrun's nccl backend needs NCCL >= 2.14 (non-blocking init, ncclCommFinalize); configure with -DFASTRUN_WITH_CUDA=OFF to build without it"
#endif

namespace fastrun::nccl {

// "ncclSystemError" etc.
std::string_view result_name(ncclResult_t result);

// Caller bugs (invalid argument/usage) leave the communicator usable; the others mean the
// communicator must be aborted (docs/backend-nccl.md, "The watchdog and the failure policy").
bool is_fatal(ncclResult_t result);

// The message check() would throw, for paths that must not throw (destructors, the watchdog).
std::string describe(ncclResult_t result, ncclComm_t comm, std::string_view call, std::string_view context);

[[noreturn]] void throw_error(ncclResult_t result, ncclComm_t comm, std::string_view call, std::string_view context);

inline ncclResult_t check(ncclResult_t result, ncclComm_t comm, std::string_view call, std::string_view context) {
  if (result != ncclSuccess && result != ncclInProgress) throw_error(result, comm, call, context);
  return result;
}

}  // namespace fastrun::nccl

#define FASTRUN_NCCL_CHECK(call, comm, context) ::fastrun::nccl::check((call), (comm), #call, (context))
