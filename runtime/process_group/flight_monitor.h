#pragma once
// The per-process thread that answers flight-record dump requests through the job store
// (protocol in flight_recorder.h). One per process (per rank, where tests run ranks as threads),
// made by the first group with a job store and stopped (joined) when the last one lets go. It never blocks on the store for long: it polls
// one key every kInterval with non-blocking calls, so stopping it takes at most one interval
// plus one store round trip.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fastrun/runtime/os/periodic_thread.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun {

class FlightRecorder;

class FlightMonitor {
 public:
  static constexpr Duration kInterval = std::chrono::milliseconds(200);
  static constexpr std::int64_t kMaxBacklog = 64;  // requests answered in one round, at most
  // Closed groups whose last state is kept (the latest closed): a program that makes and drops
  // groups in a loop must not grow the monitor or its answers.
  static constexpr std::size_t kMaxClosed = 16;

  // The monitor of `global_rank` in this process, started on first use with its own clone of
  // `job_store`.
  static std::shared_ptr<FlightMonitor> acquire(const std::shared_ptr<Store>& job_store, int global_rank);

  FlightMonitor(std::unique_ptr<Store> store, int global_rank);
  ~FlightMonitor();
  FlightMonitor(const FlightMonitor&) = delete;
  FlightMonitor& operator=(const FlightMonitor&) = delete;

  // Recorders register themselves for dumps (a recorder unregisters before it is destroyed).
  // A recorder that unregisters leaves its last state behind, answered for its group until a
  // group of that name registers again: a rank that timed out and is closing its groups (or
  // has closed one and goes on with others) did reach its last op, and must not read as a rank
  // that never came.
  void add(const FlightRecorder* recorder);
  void remove(const FlightRecorder* recorder);

  // This process's answer: one line per group, "name \t last started seq \t busy \t state".
  std::string dump() const;

 private:
  bool answer_requests();  // one round of the thread
  std::unique_ptr<Store> store_;  // used only by the thread
  const int global_rank_;
  struct Closed {  // a group's state when its recorder unregistered
    std::int64_t last_seq = 0;
    std::string line;
    std::chrono::steady_clock::time_point at;
  };
  mutable std::mutex mutex_;  // recorders_, closed_
  std::vector<const FlightRecorder*> recorders_;
  std::map<std::string, Closed> closed_;  // by group name; none of them registered now
  std::int64_t answered_ = 0;     // the thread's
  bool logged_ = false;           // the thread's: a store error is logged once
  os::PeriodicThread thread_;  // last: started when everything above is ready, stopped first
};

}  // namespace fastrun
