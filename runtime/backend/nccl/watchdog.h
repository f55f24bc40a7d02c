#pragma once
// The NCCL watchdog: one thread per group, a ~100 ms loop (docs/backend-nccl.md). Internal header.
//
// Each round it
//  - asks ncclCommGetAsyncError (errors of NCCL's network/proxy threads surface only there);
//  - polls the end event of each operation in flight, retires finished ones, and fails the
//    group when one runs past its deadline (enqueue time + GroupSpec::op_timeout);
//  - once the oldest operation in flight has been pending 1 s (then 2, 4 ... at most 30 s
//    apart: StallSchedule), compares the ranks' last collectives through the group's store
//    (stalled_op_check.h): ranks that called different ones hang on the device, so a mismatch
//    fails the group with the sequence mode's message (ConfigError);
//  - every 500 ms, checks kFailureKey in the failure store: another rank (or the launcher)
//    marked a failure, so operations that need that rank would hang: fail with PeerFailure
//    (or with the mismatch, when the ranks' last ops show one: the peer may have found it).
// Failing takes GroupState::fail. Then, under the exit policy, it gives the rank kExitGrace to
// end on its own and ends the process with kWatchdogExitCode (std::_Exit: other threads may
// still run, so no static destructors), so the launcher sees the rank fail and stops the job.
#include <memory>
#include <thread>

#include "fastrun/runtime/backend/nccl/group_state.h"

namespace fastrun::nccl {

class Watchdog {
 public:
  explicit Watchdog(std::shared_ptr<GroupState> state);
  // Stops and joins the thread, except when the group failed under the exit policy: then the
  // thread is detached and still ends the process when the grace period runs out (a program
  // that caught the error and dropped the group must not carry on with a dead communicator).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  static void run(std::shared_ptr<GroupState> state) noexcept;
  std::shared_ptr<GroupState> state_;
  std::thread thread_;
};

}  // namespace fastrun::nccl
