#include "fastrun/runtime/backend/shm/common/wait_policy.h"

#include <sched.h>

namespace fastrun::shm {
namespace {

// A sched_yield that returns this much later ran another task for a time slice: something else
// that wants this CPU shares it with us, and yielding to it again would cost a slice per wait
// (a rank that yielded is runnable, so its peer's publish cannot wake it early the way it wakes
// a sleeper). So the waiter stops yielding for a while and sleeps instead.
constexpr auto kSlowYield = std::chrono::microseconds(30);
constexpr auto kNoYieldAfterSlowYield = std::chrono::milliseconds(100);

}  // namespace

void note_cpu(std::int32_t& cpu_word) {
  const int cpu = ::sched_getcpu();
  std::atomic_ref<std::int32_t> mine(cpu_word);
  if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);
}

bool shares_cpu(std::int32_t& my_cpu, std::int32_t& peer_cpu) {
  note_cpu(my_cpu);
  return std::atomic_ref<std::int32_t>(peer_cpu).load(std::memory_order_relaxed) ==
         std::atomic_ref<std::int32_t>(my_cpu).load(std::memory_order_relaxed);
}

SpinThenYield::SpinThenYield(int ranks, int cpus) {
  if (ranks <= cpus) {
    spin_ = std::chrono::microseconds(50);
    yield_ = std::chrono::microseconds(200);
  } else {
    // More ranks than CPUs: the peer we wait for is usually runnable but queued behind us, so
    // handing it the CPU is the fast path (docs/benchmarks.md, "Figures behind the constants").
    // As long as with a core per rank, then sleep: a long wait costs at most one yield window
    // per sleep slice.
    yield_ = std::chrono::microseconds(200);
    oversubscribed_ = true;
  }
}

bool SpinThenYield::yield_once(std::chrono::steady_clock::time_point& now) {
  ::sched_yield();
  const auto before = now;
  now = std::chrono::steady_clock::now();
  // Oversubscribed, a late return is a peer rank doing its share, which is what we wait for.
  if (oversubscribed_ || now - before <= kSlowYield) return true;
  no_yield_until_.store((now + kNoYieldAfterSlowYield).time_since_epoch().count(), std::memory_order_relaxed);
  return false;
}

}  // namespace fastrun::shm
