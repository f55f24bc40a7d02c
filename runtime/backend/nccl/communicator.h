#pragma once
// Owner of one ncclComm_t: creation through the group's store, and the two ways to end it.
// Internal header: includes nccl.h.
//
// Threading: not thread-safe. The process group serialises every call (its comm mutex); only
// abort() may be called from the watchdog, under that same mutex.
#include <chrono>
#include <string>

#include <nccl.h>

#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::nccl {

using Clock = std::chrono::steady_clock;

class Communicator {
 public:
  Communicator() = default;
  // Set-up, as numbered steps (docs/backend-nccl.md, "Set-up, step by step"):
  //  1. rank 0 makes the unique id and publishes it under "nccl/uid" in the group's (prefixed)
  //     store; the others blocking-get it until `deadline`;
  //  2. each rank marks "nccl/arrived/<rank>" and calls ncclCommInitRankConfig with
  //     config.blocking = 0 on the calling thread's current CUDA device;
  //  3. ncclCommGetAsyncError is polled until the init completes; past `deadline` the
  //     communicator is aborted and TimeoutError names the ranks that never arrived.
  // A world of one uses no store. `label` prefixes every message ("nccl group 'world' rank 0/2").
  static Communicator create(const GroupSpec& spec, const std::string& label, Clock::time_point deadline);

  ~Communicator();  // aborts a communicator nobody closed; never throws
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t get() const { return comm_; }
  explicit operator bool() const { return comm_ != nullptr; }

  // ncclCommGetAsyncError: errors from NCCL's proxy/network threads surface only here.
  ncclResult_t async_error() const;

  // Cancels everything in flight and frees the communicator (ncclCommAbort). Idempotent.
  void abort() noexcept;
  // The orderly end: ncclCommFinalize polled until `deadline`, then ncclCommDestroy; aborts
  // instead when finalizing fails or runs late. Returns false when it had to abort.
  bool close(Clock::time_point deadline) noexcept;

 private:
  explicit Communicator(ncclComm_t comm) : comm_(comm) {}
  ncclComm_t comm_ = nullptr;
};

}  // namespace fastrun::nccl
