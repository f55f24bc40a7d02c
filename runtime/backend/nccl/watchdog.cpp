#include "fastrun/runtime/backend/nccl/watchdog.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/nccl/nccl_check.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/op_timeout.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::nccl {
namespace {

constexpr auto kRound = std::chrono::milliseconds(100);

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// Compares the ranks' last ops through the store (stalled_op_check.h); a mismatch fails the
// group with the sequence mode's message as a ConfigError. False: no verdict (or no check).
bool fail_on_mismatch(GroupState& state) {
  if (!state.op_check) return false;
  const auto text = state.op_check->check();
  if (!text) return false;
  state.fail(std::make_exception_ptr(ConfigError(*text)), *text, GroupState::Origin::self);
  return true;
}

void check_async_error(GroupState& state) {
  std::string reason;
  {
    std::lock_guard lock(state.comm_mutex);
    if (!state.comm) return;
    const ncclResult_t r = state.comm.async_error();
    if (r == ncclSuccess || r == ncclInProgress) return;
    reason = describe(r, state.comm.get(), "ncclCommGetAsyncError", state.label) + "; the communicator was aborted";
  }
  // A peer that found the ranks out of step aborted its communicator, which NCCL may report
  // here as a remote error: the mismatch names the root cause.
  if (fail_on_mismatch(state)) return;
  state.fail(std::make_exception_ptr(BackendError(reason)), reason, GroupState::Origin::self);
}

// Polls every operation in flight (one snapshot of the registry per round) and fails the group
// at the first that is past its deadline. Returns the oldest operation still pending (the
// registry keeps the order ops were enqueued in), for check_stalled_op, so that the round walks
// the registry once.
std::shared_ptr<WorkRecord> check_operations(GroupState& state) {
  const auto now = Clock::now();
  bool retired = false;
  std::shared_ptr<WorkRecord> oldest;
  for (const auto& op : state.in_flight->snapshot()) {
    auto w = std::dynamic_pointer_cast<WorkRecord>(op);  // the registry holds nothing else on nccl
    if (!w) continue;
    const int status = state.poll(*w);
    if (status != WorkRecord::pending) {
      retired = true;
    } else if (now >= w->deadline) {
      const std::string reason = op_timeout_message(
          {state.label, w->op, Duration(w->deadline - w->start), {}, "the communicator was aborted by the watchdog"});
      state.fail(std::make_exception_ptr(TimeoutError(reason)), reason, GroupState::Origin::self);
      return nullptr;
    } else if (!oldest) {
      oldest = std::move(w);
    }
  }
  if (retired) state.in_flight->prune();
  return oldest;
}

// Ranks that issued different collectives wait on the device until the op timeout. Once the
// oldest operation in flight has been pending for StallSchedule's times (1 s, then 2, 4 ... at
// most 30 s apart), compare the ranks' last ops: a mismatch fails the group (on every rank, as
// each of the stalled ranks finds it or reads the failure and looks: check_failure_key). The
// store is touched only then, never per op.
void check_stalled_op(GroupState& state, const std::shared_ptr<WorkRecord>& oldest) {
  if (!state.op_check) return;
  auto& watch = state.stall_watch;
  if (!oldest) {
    watch.op.reset();
    return;
  }
  if (watch.op.lock() != oldest) {  // a new oldest operation: its stall clock starts at its enqueue
    watch.op = oldest;
    watch.schedule = StallSchedule(oldest->start);
  }
  if (watch.schedule.due(Clock::now())) fail_on_mismatch(state);
}

// The job's failure record, through the group runtime's one FailureWatch (rate-limited to its
// poll interval, like every backend's; a store that cannot be read reads as "no failure yet").
void check_failure_key(GroupState& state) {
  const auto value = state.health->recorded_failure();
  if (!value) return;
  const std::string reason =
      fmt::format("{}: peer failure marked in the store ('{}'): {}; this rank's NCCL operations fail and the "
                  "communicator was aborted",
                  state.label, kFailureKey, *value);
  // A peer that failed may have found the ranks out of step: that names the root cause.
  if (fail_on_mismatch(state)) return;
  state.fail(std::make_exception_ptr(PeerFailure(reason)), reason, GroupState::Origin::peer);
}

[[noreturn]] void end_process(const std::string& message) noexcept {
  // std::_Exit: the rank's other threads may still run, so no atexit handlers or static
  // destructors; write(2) needs no stdio state.
  (void)!::write(STDERR_FILENO, message.data(), message.size());
  std::_Exit(kWatchdogExitCode);
}

}  // namespace

Watchdog::Watchdog(std::shared_ptr<GroupState> state) : state_(std::move(state)) {
  thread_ = std::thread(&Watchdog::run, state_);
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  bool detach = false;
  {
    std::lock_guard lock(state_->mutex);
    detach = state_->failed() && state_->policy == ErrorPolicy::exit;
    if (!detach) state_->stopping = true;
    state_->wake.notify_all();
  }
  if (detach) {
    thread_.detach();  // it owns a reference to the state and ends the process at the grace's end
  } else {
    thread_.join();
  }
}

// Not an os::PeriodicThread: its wait is on the group's own mutex and condition variable
// (GroupState::wake), which fail() signals to end the round early; after a failure it waits out
// the exit grace instead of ticking; and the destructor may detach it rather than join.
void Watchdog::run(std::shared_ptr<GroupState> state) noexcept {
  try {
    // Event queries need no current device, but NCCL and CUDA calls made from this thread
    // should see the group's device, not device 0 by default.
    (void)cudaSetDevice(state->device);
    std::unique_lock lock(state->mutex);
    while (!state->stopping) {
      if (state->failed()) {
        if (state->policy == ErrorPolicy::raise) {
          state->wake.wait(lock, [&] { return state->stopping; });
          break;
        }
        const std::string message = fmt::format(
            "[fastrun] {}: ending the rank (exit {}) {:.0f} s after the failure above "
            "(FASTRUN_NCCL_ON_ERROR=exit; set it to raise to only fail the waits): {}\n",
            state->label, kWatchdogExitCode, seconds(kExitGrace), state->health->failure());
        if (state->wake.wait_until(lock, state->failed_at + kExitGrace, [&] { return state->stopping; })) break;
        end_process(message);
      }
      state->wake.wait_for(lock, kRound, [&] { return state->stopping || state->failed(); });
      if (state->stopping || state->failed()) continue;
      lock.unlock();
      check_async_error(*state);
      if (!state->failed()) {
        const auto oldest = check_operations(*state);
        if (!state->failed()) check_stalled_op(*state, oldest);
      }
      if (!state->failed()) check_failure_key(*state);
      lock.lock();
    }
  } catch (const std::exception& e) {
    // Only allocation or logging can throw in this loop. A watchdog that died cannot protect
    // the rank from a hang, so end it loudly rather than carry on unwatched.
    end_process(fmt::format("[fastrun] NCCL watchdog failed: {}\n", e.what()));
  } catch (...) {
    end_process("[fastrun] NCCL watchdog failed\n");
  }
}

}  // namespace fastrun::nccl
