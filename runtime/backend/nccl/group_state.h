#pragma once
// What an NCCL process group shares with its Work handles and its watchdog: the communicator,
// the operations in flight, and the group's failure. Internal header: includes CUDA and NCCL.
//
// Locks (always taken in this order, never held across a wait):
//   comm_mutex: every NCCL call on the communicator (the issuing thread's enqueue, the
//               watchdog's ncclCommGetAsyncError, abort). One thread issues; abort may come
//               from another thread, so the mutex makes abort and enqueue exclusive.
//   mutex:      failed_at and `stopping`.
// The operations in flight are in the group runtime's one registry (in_flight.h, its own lock,
// taken inside comm_mutex when an operation is enqueued).
// The group's failure (the first one, as text and as the error itself) is kept in one place, the
// group runtime's GroupHealth (process_group/group_health.h, its own lock), as on every backend;
// so is the job's failure record.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fastrun/runtime/backend/nccl/communicator.h"
#include "fastrun/runtime/process_group/group_health.h"
#include "fastrun/runtime/process_group/in_flight.h"
#include "fastrun/runtime/process_group/stalled_op_check.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::nccl {

// What the rank does after a failure, once the failure is published and the communicator
// aborted (FASTRUN_NCCL_ON_ERROR; docs/backend-nccl.md "Watchdog policy").
enum class ErrorPolicy { exit, raise };
ErrorPolicy error_policy_from_env();
// The exit policy gives the rank this long to end on its own before the watchdog ends it.
inline constexpr auto kExitGrace = std::chrono::seconds(5);
inline constexpr int kWatchdogExitCode = 70;  // EX_SOFTWARE

// One enqueued collective: its end event, its deadline, and how it ended. Held by the group
// runtime's registry of ops in flight until it ended (InFlightOps::Hold::strong): the watchdog
// keeps its deadline even after the caller dropped its Work.
struct WorkRecord final : InFlightOp {
  enum Status : int { pending = 0, done = 1, failed = 2 };

  WorkRecord(std::string op, Clock::time_point start, Clock::time_point deadline);  // creates the event
  ~WorkRecord();  // destroys the event; never throws
  WorkRecord(const WorkRecord&) = delete;
  WorkRecord& operator=(const WorkRecord&) = delete;

  // pending -> done/failed, once; false if it had already ended.
  bool finish(Status status, std::exception_ptr error = nullptr);
  // InFlightOp: GroupState::fail fails every operation in flight; the watchdog prunes ended ones.
  void fail_from_outside(std::exception_ptr e) override { finish(failed, std::move(e)); }
  bool ended() override { return status.load() > pending; }

  const std::string op;  // "all_reduce #3 (float32 x 1024, sum)"
  const Clock::time_point start;
  const Clock::time_point deadline;
  cudaEvent_t event = nullptr;
  std::atomic<int> status{pending};
  std::exception_ptr error;  // written before status becomes failed; read after
};

struct GroupState {
  std::string label;     // "rank 0 in group 'world' (nccl)" (GroupHealth::label)
  int global_rank = 0;
  int device = 0;
  Duration op_timeout{};
  ErrorPolicy policy = ErrorPolicy::exit;

  std::mutex comm_mutex;
  Communicator comm;

  std::shared_ptr<InFlightOps> in_flight;  // the group runtime's (GroupRuntime::in_flight): WorkRecords
  std::mutex mutex;
  Clock::time_point failed_at{};  // when fail() recorded the group's failure (the exit policy's clock)
  // (fail() records the failure in `health` and sets failed_at under `mutex` together.)
  std::condition_variable wake;  // with `mutex`: wakes the watchdog (failure, stop)
  bool stopping = false;

  // The group's failure record (never null): the first failure (text and error), the "unusable"
  // error, the job's failure record (one FailureWatch, polled at the runtime's one interval).
  std::shared_ptr<GroupHealth> health;
  bool failed() const { return health->failed(); }

  // Ranks that issued different collectives wait on the device (or read garbage) until the op
  // timeout: the issuing thread records each collective's fingerprint here, and the watchdog
  // compares the ranks' last ops through the store once the oldest operation in flight has
  // stalled (stalled_op_check.h; watchdog.h). Null for a group of one or without a store.
  std::shared_ptr<StalledOpCheck> op_check;
  // The watchdog thread's own: the operation whose stall it times, and when it checks next.
  struct StallWatch {
    std::weak_ptr<WorkRecord> op;
    StallSchedule schedule{StallSchedule::Clock::time_point{}};
  } stall_watch;

  // The failure path, whoever detects it (watchdog, a waiter, the issuing thread):
  //  1. the first failure wins (later ones only log);
  //  2. publish "rank <global>: <reason>" under kFailureKey (unless it came from there);
  //  3. ncclCommAbort, so no kernel of ours still touches user buffers;
  //  4. every operation in flight fails with `error` (their wait rethrows it);
  //  5. wake the watchdog, which applies the policy.
  // Never throws. Must not be called with comm_mutex or mutex held.
  enum class Origin { self, peer };
  void fail(std::exception_ptr error, const std::string& reason, Origin origin) noexcept;

  // Rethrows the group's failure, if any (the op that failed it).
  void throw_if_failed();
  // Before an op is issued: once the group failed, the runtime's "unusable" BackendError.
  void check_usable(const std::string& op);

  // Queries the record's event (without blocking) and returns its status; a CUDA error other
  // than "not ready" fails the group.
  int poll(WorkRecord& record);
};

}  // namespace fastrun::nccl
