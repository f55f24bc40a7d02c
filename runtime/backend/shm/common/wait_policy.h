#pragma once
// How an shm rank waits for a peer: the one spin / yield / futex policy of the collective channel
// (channel.h) and the point-to-point engine (p2p_engine.h). docs/backend-shm.md, "Waiting":
// 1. spin (with `pause` after the first polls) while the peer runs on another CPU (it is
//    probably about to publish);
// 2. while the peer is queued on our own CPU, where spinning would only keep it off, sched_yield
//    for a bounded time, unless a yield recently ran some other task for a whole slice; a waiter
//    that keeps finding the peer on its CPU moves to another (note_colocated);
// 3. then the caller sleeps on a futex word in slices (sleep_slice), checking health between.
// Publishers wake only when a sleeper registered (the sleepers word beside the futex word).
#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "fastrun/runtime/os/futex.h"

namespace fastrun::shm {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A sleeping waiter wakes at least this often to check peers' health and the deadline, which
// bounds how long a dead peer goes unnoticed.
inline constexpr auto kSleepSlice = std::chrono::milliseconds(20);

// Records the CPU this thread runs on in `cpu_word` (a rank's word in shared memory), writing
// only when it changed so that the line is not dirtied on every publish.
void note_cpu(std::int32_t& cpu_word);
// Whether the peer whose CPU word is `peer_cpu` last ran on the CPU noted in `my_cpu` (after
// noting ours again: a peer waiting for us checks the same).
bool shares_cpu(std::int32_t& my_cpu, std::int32_t& peer_cpu);

// The words ranks sleep on are in memory shared between processes: the OS kit's shared futex.
using os::futex_wait;
using os::futex_wake_all;

// One bounded sleep on `word`: registers in `sleepers`, reads `word`, and sleeps while it is
// unchanged if `still_waiting()` (evaluated after the registration, so a publisher that changed
// what it checks either is seen by it or sees the registration and wakes us). The sleep lasts
// until `deadline`, at least 1 µs and at most kSleepSlice.
template <typename StillWaiting>
void sleep_slice(std::uint32_t& word, std::uint32_t& sleepers, std::chrono::steady_clock::time_point deadline,
                 StillWaiting&& still_waiting) {
  std::atomic_ref<std::uint32_t>(sleepers).fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the publisher's fence (or seq_cst store) before it reads `sleepers`.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const std::uint32_t v = std::atomic_ref<std::uint32_t>(word).load(std::memory_order_seq_cst);
  if (still_waiting()) {
    const auto left = deadline - std::chrono::steady_clock::now();
    futex_wait(word, v,
               std::chrono::duration_cast<std::chrono::nanoseconds>(std::max<std::chrono::steady_clock::duration>(
                   std::min<std::chrono::steady_clock::duration>(left, kSleepSlice), std::chrono::microseconds(1))));
  }
  std::atomic_ref<std::uint32_t>(sleepers).fetch_sub(1, std::memory_order_relaxed);
}

// Steps 1 and 2. Thread-safe: several threads may wait through one (it remembers a slow yield
// for all of them).
class SpinThenYield {
 public:
  // `ranks` share `cpus` CPUs: with a core per rank spin up to 50 µs and yield to a peer on our
  // CPU up to 200 µs; with more ranks than CPUs, spinning steals the core a peer needs: only
  // yield, for up to 200 µs, and a slow yield does not stop it (it ran a peer rank).
  // `yield_for` > 0: the waits are for a peer that itself waits on another node (the hier
  // backend's node groups: a leader's broadcast comes a network round trip after the gather).
  // Such a wait only yields, whatever CPU the peer is on, for up to `yield_for` before it sleeps:
  // a sleeper's wake-up (30-50 µs on this project's VM) would be paid on every op, and a yield
  // hands the CPU to whoever needs it (Open MPI's mpi_yield_when_idle polls the same way).
  // `after_idle`: what a wait that only yields because ranks outnumber CPUs does after a yield
  // that ran nothing else on this CPU (see wait()). The point-to-point engine polls: its wait is
  // for one peer, most often one that answers at once (a ping-pong on 4 ranks of 2 CPUs, the
  // other two asleep: one way 0.52 -> 0.20 µs, medians of 6 alternating rounds). The collective
  // channel yields again: a step waits for every rank, and its one series with polling (4-rank
  // all-reduces of 4-64 KiB) had medians 1.3x slower, no gain to set against them.
  enum class AfterIdleYield { yield_again, poll };
  SpinThenYield(int ranks, int cpus, std::chrono::microseconds yield_for = {},
                AfterIdleYield after_idle = AfterIdleYield::yield_again);

  // Spins, then yields, until ready() (true) or the policy says sleep (false). shares_cpu()
  // tells whether the awaited peer is queued on our CPU; it is called every 16 pauses.
  template <typename Ready, typename SharesCpu>
  bool wait(Ready&& ready, SharesCpu&& shares_cpu) {
    using Clock = std::chrono::steady_clock;
    if (ready()) return true;  // the peer is there already: no clock read
    bool colocated = only_yields_ || shares_cpu();
    if (!only_yields_ && note_colocated(colocated)) colocated = shares_cpu();  // this thread moved
    // The clock is read first after 16 spins, not on entry: most waits for a running peer end
    // before that, and a clock read (20 ns on a VM) is a fifth of a small message's one-way time.
    // The spin's budget starts there, a few hundred nanoseconds late.
    Clock::time_point t0{};
    if (!colocated) {
      Clock::time_point spin_end{};
      for (unsigned i = 1;; ++i) {
        if (ready()) return true;
        // The first 16 polls without `pause`, whose latency delays the poll that sees the peer's
        // write (an 8-byte ping-pong one way 0.34 -> 0.32-0.33 µs on this project's VM, 4 rounds);
        // longer waits pause.
        if (i > 16) cpu_relax();
        if ((i & 15u) != 0) continue;
        if ((colocated = shares_cpu())) break;
        const auto now = Clock::now();
        if (i == 16) {
          t0 = now;
          spin_end = now + spin_;
        } else if (now >= spin_end) {
          break;
        }
      }
    }
    if (t0 == Clock::time_point{}) t0 = Clock::now();
    // Not when the peer is elsewhere: the yield would only hand our CPU to an unrelated task for
    // a whole slice, during which the peer's publish cannot wake us (we are runnable, not asleep).
    if (colocated && t0.time_since_epoch().count() >= no_yield_until_.load(std::memory_order_relaxed)) {
      const auto yield_end = t0 + yield_;
      for (auto now = Clock::now(); now < yield_end;) {
        if (ready()) return true;
        // Only yielding, and the last yield found nothing else to run on this CPU (the ranks that
        // share it asleep, say): polling costs no one anything and sees the peer's write at once,
        // where a yield puts a syscall (0.6 µs on this project's VM) between the write and our
        // read. Poll for up to kIdleYieldPoll, then yield again, which tells whether that holds.
        if (poll_after_idle_yield_ && last_yield_idle_.load(std::memory_order_relaxed) &&
            poll_until(ready, now + kIdleYieldPoll, now))
          return true;
        if (!yield_once(now)) break;
      }
    }
    return ready();
  }

 private:
  // A yield that returns sooner ran nothing else: a yield alone costs 0.5-0.7 µs on this
  // project's VM, one that ran another waiting rank and came back 3 µs.
  static constexpr std::chrono::nanoseconds kIdleYield{1500};
  static constexpr std::chrono::nanoseconds kIdleYieldPoll{1000};

  // Polls ready() until `until`; `now` moves on. True once ready.
  template <typename Ready>
  static bool poll_until(Ready& ready, std::chrono::steady_clock::time_point until,
                         std::chrono::steady_clock::time_point& now) {
    for (unsigned i = 1;; ++i) {
      if (ready()) return true;
      cpu_relax();
      if ((i & 15u) != 0) continue;
      if ((now = std::chrono::steady_clock::now()) >= until) return false;
    }
  }
  // sched_yield; `now` moves on. False when the yield ran another task for a slice (then the
  // waiter sleeps instead of yielding for a while). Notes whether it ran anything else.
  bool yield_once(std::chrono::steady_clock::time_point& now);
  // Counts waits in a row that began with the peer on our CPU (with a core per rank); after
  // kLeaveAfter of them, at most once per kLeaveEvery, moves this thread to another CPU it may
  // run on (leave_shared_cpu). True when it moved. Two ranks that wake each other stay on one
  // CPU while another idles: the kernel places a woken task on its waker's CPU when the cache
  // looks busy, and its load balancer does not move a task that ran within the last 0.5 ms
  // (docs/backend-shm.md, "Two ranks that wake each other on one CPU").
  bool note_colocated(bool colocated) {
    if (!colocated) {
      if (colocated_waits_.load(std::memory_order_relaxed) != 0) colocated_waits_.store(0, std::memory_order_relaxed);
      return false;
    }
    if (colocated_waits_.fetch_add(1, std::memory_order_relaxed) + 1 < kLeaveAfter) return false;
    colocated_waits_.store(0, std::memory_order_relaxed);
    return leave_shared_cpu();
  }
  bool leave_shared_cpu();
  static constexpr unsigned kLeaveAfter = 8;

  std::chrono::nanoseconds spin_{};
  std::chrono::nanoseconds yield_{};
  // More ranks than CPUs, or a yield window given: never spins, yields whatever CPU the peer is
  // on, and a slow yield does not end the yielding (it ran a peer rank, or the peer's work).
  bool only_yields_ = false;
  bool poll_after_idle_yield_ = false;        // only_yields_ and AfterIdleYield::poll
  std::atomic<bool> last_yield_idle_{false};  // the last yield_once ran nothing else (kIdleYield)
  std::atomic<std::chrono::steady_clock::rep> no_yield_until_{0};  // a steady_clock time
  std::atomic<unsigned> colocated_waits_{0};                       // note_colocated
  std::atomic<std::chrono::steady_clock::rep> no_leave_until_{0};  // a steady_clock time
};

}  // namespace fastrun::shm
