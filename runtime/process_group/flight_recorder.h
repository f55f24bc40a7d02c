#pragma once
// The flight record of one group on this rank: its last kCapacity ops (number, description,
// start and end times, state), so that when an op times out the error can say which ranks did
// not reach it and what each one was doing instead (docs/errors.md, "How to read a hang").
//
// A rank that is stuck (in compute, or in another collective) cannot answer from the stuck
// thread, so every process that has a group with a job store runs one small monitor thread
// (FlightMonitor) that answers dump requests through the job store:
//   1. the timing-out rank increments flight_request_key() and gets request number n;
//   2. every monitor polls that key every kMonitorInterval and, seeing a new n, writes the state
//      of each of its groups under flight_answer_key(n, its global rank);
//   3. the requester waits at most kAnswerWait for the answers of its group's members and names
//      the ones that did not answer.
// Recording an op costs two coarse clock reads and two short uncontended spin locks; nothing
// touches the store until a timeout asks. Under a fastrun launcher the recorder also shows each
// collective's begin and end on the node's stall board (stall_board.h: a few plain stores), from
// which the launcher reports a stall long before the op timeout. Thread-safety: every method may
// be called from any thread.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/spin_lock.h"
#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun {

class FlightMonitor;
namespace stall {
class RankSlot;
}

struct FlightEntry {
  enum class State { issued, completed, failed };
  OpDesc op;
  std::chrono::steady_clock::time_point start{};
  std::chrono::steady_clock::time_point end{};  // set once completed or failed
  State state = State::issued;
  // Asked completed() when dumped while nobody waits on the op yet (the op may be done without
  // anyone having looked). While a thread waits, that thread records the outcome instead: a
  // handle a failed wait aborted also reads as completed.
  std::weak_ptr<Work> work;
  bool waited_on = false;
};

class FlightRecorder {
 public:
  static constexpr std::size_t kCapacity = 256;
  static constexpr Duration kAnswerWait = std::chrono::milliseconds(1500);

  // `job_store` (unprefixed; may be null: then only this rank's own record is reported).
  FlightRecorder(std::string group_name, std::vector<int> global_ranks, int rank, std::shared_ptr<Store> job_store);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Records the start of `op` (op.seq set by the caller); returns its slot for the calls below.
  std::uint64_t begin(const OpDesc& op);
  void attach(std::uint64_t slot, const WorkHandle& work);
  void waiting(std::uint64_t slot);  // a thread is about to wait on the op
  void end(std::uint64_t slot, bool ok);

  // The last ops, oldest first.
  std::vector<FlightEntry> entries() const;
  // One line on this group's state now: "in op #12 all_reduce(float32 x 4, sum) for 2.1 s",
  // "last op #11 barrier() completed 0.3 s ago", "no op yet".
  std::string state_line() const;
  // The number of the last collective begun (0: none yet).
  std::int64_t last_collective_seq() const;
  // True while an op of this group is issued and not complete.
  bool busy() const;
  const std::string& name() const { return name_; }

  // The explanation of a timeout of `op`: asks every other member (through the monitors) what it
  // is doing, at most kAnswerWait, and says in one line who did not reach op #op.seq and what
  // each rank was doing. The first time, it also records "rank N: <explanation>" as the job's
  // failure (record_failure: first writer wins), which the launcher's summary prints. Computed
  // once per group; later calls return the first text. Never throws.
  std::string explain_timeout(const OpDesc& op);
  // `e` with the explanation appended: what the Group layer throws instead of a bare timeout.
  TimeoutError explained(const TimeoutError& e, const OpDesc& op);

 private:
  std::string ask_peers(const OpDesc& op, Store* store);
  const std::string name_;
  const std::vector<int> global_ranks_;
  const int rank_;
  std::shared_ptr<Store> job_store_;
  std::shared_ptr<FlightMonitor> monitor_;
  std::unique_ptr<stall::RankSlot> board_slot_;  // null: no stall board (written under lock_)
  // Taken twice per op (begin, end) for a few words each; the long reads (entries(), a dump's)
  // come only when a timeout or a launcher asks.
  mutable SpinLock lock_;
  std::vector<FlightEntry> ring_;
  std::uint64_t next_slot_ = 0;
  std::string explanation_;
};

}  // namespace fastrun
