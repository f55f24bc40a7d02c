#pragma once
// Watches the job's failure key (kFailureKey, "rank N: why") so that a rank blocked in a
// collective learns within a fraction of a second that a peer failed, instead of hanging until
// the op timeout. Thread-safe: it owns its own clone of the job store, guarded by a mutex, and
// rate-limits store reads (poll() touches the store at most every kPollInterval).
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "fastrun/runtime/store/store.h"

namespace fastrun {

class FailureWatch {
 public:
  static constexpr Duration kPollInterval = std::chrono::milliseconds(200);

  // `job_store` may be null (a world of one without a store): then nothing is ever reported.
  explicit FailureWatch(const std::shared_ptr<Store>& job_store);

  // The recorded failure, if any. Never throws (a broken store reads as "no failure yet").
  // `force` skips the rate limit (used once, right after an I/O error, to find the root cause).
  std::optional<std::string> poll(bool force = false);
  // Records `text` ("rank N: why") unless a failure is already recorded: the first one wins.
  void publish(const std::string& text) noexcept;

 private:
  std::mutex mutex_;
  std::unique_ptr<Store> store_;
  std::chrono::steady_clock::time_point last_poll_{};
  std::optional<std::string> seen_;
};

}  // namespace fastrun
