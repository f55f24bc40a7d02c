#pragma once
// Test hooks of the nccl backend (CUDA-free header; compiled only with NCCL, so guard with
// FASTRUN_HAVE_NCCL). Used by the GPU checks to drive the watchdog's timeout path for real.
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::nccl {

// Enqueues on `group`'s stream a host function that sleeps for `duration`: every collective
// issued after it cannot complete before the sleep ends, as if a peer were stuck.
// BackendError when `group` is not an nccl group.
void stall_stream_for_testing(Backend& group, Duration duration);

}  // namespace fastrun::nccl
