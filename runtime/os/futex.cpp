#include "fastrun/runtime/os/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace fastrun::os {
namespace {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "a futex word must be a plain 32-bit word");

std::uint32_t* address(std::atomic<std::uint32_t>& word) { return reinterpret_cast<std::uint32_t*>(&word); }

}  // namespace

bool futex_wait(std::uint32_t& word, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout <= std::chrono::nanoseconds::zero()) return false;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  // FUTEX_WAIT's timeout is relative; the word is read by the kernel atomically with the sleep.
  if (::syscall(SYS_futex, &word, FUTEX_WAIT, expected, &ts, nullptr, 0) == 0) return true;
  return errno != ETIMEDOUT;
}

bool futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  return futex_wait(*address(word), expected, timeout);
}

void futex_wake_all(std::uint32_t& word) { ::syscall(SYS_futex, &word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

void futex_wake_all(std::atomic<std::uint32_t>& word) { futex_wake_all(*address(word)); }

}  // namespace fastrun::os
