#pragma once
// The default mismatch check of backends whose transport cannot carry an op's fingerprint for
// free (gloo): ranks that issue different collectives there wait for messages that never come
// (gloo's all_reduce and broadcast use different slots), until the op timeout, 600 s by default.
// A per-op exchange would cost a round trip per op, so this check runs only when an op stalls:
//   - each op's fingerprint (op_record.h) goes into a ring of this rank's last kHistory ops, on
//     the issuing thread: a 64-byte copy between two stores of a sequence word (a seqlock), the
//     whole per-op cost (a mutex there was a tenth of a small op's instructions);
//   - when a wait on an op has lasted kFirstCheck (then 2x, 4x, ... up to kMaxInterval apart),
//     the waiting thread writes the ring under "op_check/<rank>" in the group's store and reads
//     the peers' rings (non-blocking): ops with the same number that differ are a mismatch, and
//     the message is the sequence mode's (sequence_check.h), from the lowest such number.
// A peer that is not stalled publishes nothing, so a stall where only one side waits (a rank
// busy computing) gives no verdict; both sides of a mismatch wait, and each finds it.
// Thread-safety: record() on the thread that runs the op (one at a time: the group's ops run in
// order), check() on any waiting thread.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun {

class StalledOpCheck {
 public:
  static constexpr std::size_t kHistory = 16;
  static constexpr Duration kFirstCheck = std::chrono::seconds(1);
  static constexpr Duration kMaxInterval = std::chrono::seconds(30);
  // The most one check waits for the store (its clone's timeout, replies included): it runs on
  // a waiting thread (nccl: the watchdog, which also enforces the op timeout), and a store host
  // that stopped answering must not hold that thread for the store's own timeout (300 s).
  static constexpr Duration kStoreTimeout = std::chrono::seconds(5);

  // `store`: the group's (prefixed) store, cloned here for the waiting threads; `global_ranks`
  // name the members in messages.
  StalledOpCheck(Store& store, int rank, int size, std::vector<int> global_ranks, std::string group);

  // Op #op.seq was issued on this rank.
  void record(const OpDesc& op);
  // The same from its fingerprint (words[0]: the op number), where the backend made one already.
  void record(const Fingerprint& op);
  // Publishes this rank's ring and compares it with the peers' that are published: the mismatch
  // message, or nothing (no verdict yet). Never throws (a broken store reads as no verdict).
  std::optional<std::string> check();

 private:
  // This rank's last ops, as check() reads them while record() may write (seqlock, above).
  std::vector<Fingerprint> recorded_ops();

  std::mutex mutex_;  // check()'s: its store handle, shared by the waiting threads
  std::unique_ptr<Store> store_;
  int rank_;
  int size_;
  std::vector<int> global_ranks_;
  std::string group_;
  std::array<Fingerprint, kHistory> ring_{};  // its words accessed atomically (relaxed)
  std::atomic<std::uint64_t> recorded_{0};     // ops recorded; written by record() only
  std::atomic<std::uint64_t> version_{0};      // odd while record() writes

};

// GroupRuntime::Hooks::stalled for a backend whose waits run `check`: the mismatch as a
// ConfigError (which fails the group and its ops in flight), or null while there is no verdict.
std::function<std::exception_ptr()> stalled_op_hook(std::shared_ptr<StalledOpCheck> check);

// When a stalled wait runs the check: kFirstCheck after the wait began, then after twice as long
// each time, at most kMaxInterval apart (a check costs a store write and a read per peer).
class StallSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StallSchedule(Clock::time_point began) : next_(began + StalledOpCheck::kFirstCheck) {}
  // Whether a check is due at `now`; when it is, the next one is scheduled.
  bool due(Clock::time_point now) {
    if (now < next_) return false;
    interval_ = std::min<Duration>(2 * interval_, StalledOpCheck::kMaxInterval);
    next_ = now + interval_;
    return true;
  }

 private:
  Duration interval_ = StalledOpCheck::kFirstCheck;
  Clock::time_point next_;
};

}  // namespace fastrun
