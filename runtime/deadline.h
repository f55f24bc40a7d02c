#pragma once
// fastrun::Deadline: one op's timeout, shared by the several waits the op is made of. Each inner
// wait gets left(): what remains, but never less than 1 ms, because a zero Duration means "the
// default timeout" to many callers (Duration); a wait asked for 1 ms after the deadline has
// passed times out at once, which is what the op needs.
#include <chrono>

#include "fastrun/runtime/duration.h"

namespace fastrun {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Deadline(Duration timeout) : end_(Clock::now() + timeout) {}
  explicit Deadline(Clock::time_point end) : end_(end) {}

  Duration left() const {
    const Duration rest(end_ - Clock::now());
    return rest > std::chrono::milliseconds(1) ? rest : Duration(std::chrono::milliseconds(1));
  }
  bool passed() const { return Clock::now() >= end_; }

 private:
  Clock::time_point end_;
};

}  // namespace fastrun
