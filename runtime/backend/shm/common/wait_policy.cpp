#include "fastrun/runtime/backend/shm/common/wait_policy.h"

#include <sched.h>

#include <algorithm>

namespace fastrun::shm {
namespace {

// A sched_yield that returns this much later ran another task for a time slice: something else
// that wants this CPU shares it with us, and yielding to it again would cost a slice per wait
// (a rank that yielded is runnable, so its peer's publish cannot wake it early the way it wakes
// a sleeper). So the waiter stops yielding for a while and sleeps instead.
constexpr auto kSlowYield = std::chrono::microseconds(30);
constexpr auto kNoYieldAfterSlowYield = std::chrono::milliseconds(100);
// At most one move off a CPU shared with the peer in this long: a move costs about 10 µs, and
// on a machine busy with other work ranks meet on a CPU again soon after.
constexpr auto kLeaveEvery = std::chrono::milliseconds(50);

// Moves the calling thread to another CPU of its affinity mask and restores the mask: the kernel
// migrates a running thread whose mask no longer holds its CPU before sched_setaffinity returns,
// and leaves it where it is when the mask widens again. False when the mask holds no other CPU
// (a bound rank) or the mask cannot be read (over 1,024 CPUs).
bool leave_current_cpu() {
  cpu_set_t mask;
  if (::sched_getaffinity(0, sizeof mask, &mask) != 0) return false;
  const int cpu = ::sched_getcpu();
  if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask) || CPU_COUNT(&mask) < 2) return false;
  cpu_set_t elsewhere = mask;
  CPU_CLR(cpu, &elsewhere);
  if (::sched_setaffinity(0, sizeof elsewhere, &elsewhere) != 0) return false;
  // Fails only if the mask was narrowed meanwhile (a cpuset change), which then rules anyway.
  (void)::sched_setaffinity(0, sizeof mask, &mask);
  return true;
}

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

SpinThenYield::SpinThenYield(int ranks, int cpus, std::chrono::microseconds yield_for, AfterIdleYield after_idle) {
  if (ranks <= cpus) {
    spin_ = std::chrono::microseconds(50);
    yield_ = std::chrono::microseconds(200);
  } else {
    // More ranks than CPUs: the peer we wait for is usually runnable but queued behind us, so
    // handing it the CPU is the fast path (docs/benchmarks.md, "Figures behind the constants").
    // As long as with a core per rank, then sleep: a long wait costs at most one yield window
    // per sleep slice.
    yield_ = std::chrono::microseconds(200);
    only_yields_ = true;
  }
  if (yield_for > std::chrono::microseconds::zero()) {
    // Waits a network round trip long: yield-poll for that long (as with more ranks than CPUs),
    // then sleep.
    yield_ = std::max<std::chrono::nanoseconds>(yield_, yield_for);
    only_yields_ = true;
  }
  // Not for waits a network round trip long: their peer does not answer within the poll.
  poll_after_idle_yield_ = only_yields_ && yield_for == std::chrono::microseconds::zero() &&
                           after_idle == AfterIdleYield::poll;
}

bool SpinThenYield::yield_once(std::chrono::steady_clock::time_point& now) {
  ::sched_yield();
  const auto before = now;
  now = std::chrono::steady_clock::now();
  if (poll_after_idle_yield_) {
    const bool idle = now - before < kIdleYield;
    if (last_yield_idle_.load(std::memory_order_relaxed) != idle) last_yield_idle_.store(idle, std::memory_order_relaxed);
  }
  // Only yielding, a late return is a peer rank (or the peer's work) doing its share, which is
  // what we wait for.
  if (only_yields_ || now - before <= kSlowYield) return true;
  no_yield_until_.store((now + kNoYieldAfterSlowYield).time_since_epoch().count(), std::memory_order_relaxed);
  return false;
}

bool SpinThenYield::leave_shared_cpu() {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (now < no_leave_until_.load(std::memory_order_relaxed)) return false;
  no_leave_until_.store(now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(kLeaveEvery).count(),
                        std::memory_order_relaxed);
  return leave_current_cpu();
}

}  // namespace fastrun::shm
