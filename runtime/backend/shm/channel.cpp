#include "fastrun/runtime/backend/shm/channel.h"

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <ctime>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/process_group/process_group.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FASTRUN_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define FASTRUN_CPU_RELAX() asm volatile("yield")
#else
#define FASTRUN_CPU_RELAX() ((void)0)
#endif

namespace fastrun::shm {
namespace {

using Clock = std::chrono::steady_clock;
// A sleeping waiter wakes at least this often to check peers' health and the deadline, which
// bounds how long a dead peer goes unnoticed.
constexpr auto kSleepSlice = std::chrono::milliseconds(20);
// A sched_yield that returns this much later ran another task for a time slice: something else
// that wants this CPU shares it with us, and yielding to it again would cost a slice per wait
// (a rank that yielded is runnable, so its peer's publish cannot wake it early the way it wakes
// a sleeper). So the rank stops yielding for a while and sleeps instead.
constexpr auto kSlowYield = std::chrono::microseconds(30);
constexpr auto kNoYieldAfterSlowYield = std::chrono::milliseconds(100);

std::atomic_ref<std::uint32_t> word(std::uint32_t& w) { return std::atomic_ref<std::uint32_t>(w); }

void futex_wait(std::uint32_t* addr, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  // Shared (not PRIVATE) futex: the word is in memory mapped by several processes. EAGAIN (the
  // value changed), EINTR and ETIMEDOUT all just mean "look again".
  ::syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::uint32_t* addr) { ::syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

}  // namespace

Channel::Channel(Segment segment, Layout layout, ChannelInfo info, std::shared_ptr<FailureWatch> watch)
    : segment_(std::move(segment)),
      base_(segment_.data()),
      layout_(layout),
      info_(std::move(info)),
      watch_(std::move(watch)),
      pidfds_(static_cast<std::size_t>(info_.size), kNoPidfd) {
  // With a core per rank a peer is usually microseconds away: spin long enough to catch it; a
  // peer on our own CPU gets it through sched_yield for up to 200 us (docs/backend-shm.md,
  // "Waiting"). With more ranks than cores, spinning steals the core the peer needs: yield and
  // sleep soon.
  if (info_.size <= info_.cpus) {
    spin_ = std::chrono::microseconds(50);
    yield_ = std::chrono::microseconds(200);
  } else {
    yield_ = std::chrono::microseconds(5);
    yield_while_spinning_ = true;
  }
}

Channel::~Channel() {
  // Peers that still wait on a step this rank will never publish learn it at once.
  abort();
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

void Channel::watch_peers() {
  for (int p = 0; p < info_.size; ++p) {
    if (p == info_.rank) continue;
    const pid_t pid = control(p).pid;
    os::UniqueFd fd = os::open_pidfd(pid);
    if (fd) {
      pidfds_[static_cast<std::size_t>(p)] = fd.release();
      continue;
    }
    // Already gone: it mapped the segment and passed the barrier, so it may have joined and
    // left cleanly (join() is allowed to end a program). That is a failure only if we ever wait
    // for a step it never published, which check_health decides.
    if (errno == ESRCH) {
      pidfds_[static_cast<std::size_t>(p)] = kGone;
      continue;
    }
    // No pidfds (old kernel): check_health falls back to kill(pid, 0).
  }
}

void Channel::begin_op(const char* op, std::chrono::steady_clock::duration timeout) {
  op_ = op;
  timeout_ = timeout;
  deadline_ = Clock::now() + timeout;
}

void Channel::abort() noexcept {
  if (!base_) return;
  RankControl& me = control(info_.rank);
  word(me.aborted).store(1, std::memory_order_seq_cst);
  futex_wake_all(&me.step);
}

void Channel::publish(std::uint32_t k) {
  RankControl& me = control(info_.rank);
  // seq_cst store then seq_cst load of `sleepers` pairs with the waiter's increment-then-recheck:
  // either the waiter sees k, or we see its registration and wake it.
  note_cpu();
  word(me.step).store(k, std::memory_order_seq_cst);
  if (word(me.sleepers).load(std::memory_order_seq_cst) != 0) futex_wake_all(&me.step);
}

void Channel::note_cpu() {
  const int cpu = ::sched_getcpu();
  std::atomic_ref<std::int32_t> mine(control(info_.rank).cpu);
  if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);
}

bool Channel::shares_cpu_with(int peer) {
  note_cpu();  // a peer waiting for us checks the same
  return std::atomic_ref<std::int32_t>(control(peer).cpu).load(std::memory_order_relaxed) ==
         std::atomic_ref<std::int32_t>(control(info_.rank).cpu).load(std::memory_order_relaxed);
}

bool Channel::reached(int peer, std::uint32_t k) const {
  const std::uint32_t v = word(control(peer).step).load(std::memory_order_acquire);
  return static_cast<std::int32_t>(v - k) >= 0;
}

void Channel::wait_all(std::uint32_t k) {
  for (int p = 0; p < info_.size; ++p)
    if (p != info_.rank && !reached(p, k)) wait_slow(p, k);
  if (static_cast<std::int32_t>(k - all_reached_) > 0) all_reached_ = k;
}

void Channel::wait_one(int peer, std::uint32_t k) {
  if (!reached(peer, k)) wait_slow(peer, k);
}

void Channel::wait_slow(int peer, std::uint32_t k) {
  RankControl& c = control(peer);
  const auto t0 = Clock::now();
  // 1. Spin with pause while the peer runs on another CPU: it is probably about to publish, and
  //    this catches it within a fraction of a microsecond. A peer queued on our own CPU cannot
  //    run while we spin, so go straight to 2 then (checked every 16 pauses: either side may
  //    migrate).
  bool colocated = yield_while_spinning_ || shares_cpu_with(peer);
  if (!colocated) {
    const auto spin_end = t0 + spin_;
    for (unsigned i = 1;; ++i) {
      if (reached(peer, k)) return;
      FASTRUN_CPU_RELAX();
      if ((i & 15u) == 0 && ((colocated = shares_cpu_with(peer)) || Clock::now() >= spin_end)) break;
    }
  }
  // 2. When the peer is queued on our CPU, yield for a bounded time: it gets the CPU at once, and
  //    we are back as soon as it waits, without two futex calls and wake-ups per step. Not when
  //    the peer is elsewhere: then the yield would only hand our CPU to an unrelated task for a
  //    whole slice, during which the peer's publish cannot wake us (we are runnable, not asleep).
  if (colocated && t0 >= no_yield_until_) {
    const auto yield_end = t0 + yield_;
    for (auto now = Clock::now(); now < yield_end;) {
      if (reached(peer, k)) return;
      ::sched_yield();
      const auto before = now;
      now = Clock::now();
      if (now - before > kSlowYield) {
        no_yield_until_ = now + kNoYieldAfterSlowYield;
        break;
      }
    }
  }
  // 3. Sleep on the peer's step word in slices, checking health between slices.
  for (;;) {
    word(c.sleepers).fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t v = word(c.step).load(std::memory_order_seq_cst);
    if (static_cast<std::int32_t>(v - k) < 0 && word(c.aborted).load(std::memory_order_relaxed) == 0) {
      const auto left = deadline_ - Clock::now();
      futex_wait(&c.step, v, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::max<Clock::duration>(std::min<Clock::duration>(left, kSleepSlice),
                                                           std::chrono::microseconds(1))));
    }
    word(c.sleepers).fetch_sub(1, std::memory_order_relaxed);
    if (reached(peer, k)) return;
    check_health(peer, k);
  }
}

void Channel::check_health(int peer, std::uint32_t k) {
  if (cancelled_.load(std::memory_order_acquire))
    throw BackendError(fmt::format("{}: cancelled (a wait on it gave up; the group is unusable)", where()));
  // Every check re-reads the step afterwards: a peer that published and then exited or left
  // the group normally is not a failure.
  if (word(control(peer).aborted).load(std::memory_order_acquire) != 0) {
    if (reached(peer, k)) return;
    throw PeerFailure(fmt::format("{}: {} left the group or failed in a collective of its own; see its error",
                                  where(), who(peer)));
  }
  // One poll over every peer's pidfd: a dead rank is reported even if we wait on another one.
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (int p = 0; p < info_.size; ++p) {
    const int fd = pidfds_[static_cast<std::size_t>(p)];
    if (fd >= 0) {
      fds.push_back(pollfd{fd, POLLIN, 0});
      ranks.push_back(p);
    } else if (fd == kGone) {
      if (!reached(p, k))
        throw PeerFailure(fmt::format("{}: {} (pid {}) exited before reaching step {}", where(), who(p),
                                      control(p).pid, k));
    } else if (p != info_.rank) {
      const pid_t pid = control(p).pid;
      if (pid > 0 && !os::pid_exists(pid) && !reached(p, k))
        throw PeerFailure(fmt::format("{}: {} (pid {}) died", where(), who(p), pid));
    }
  }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      const int p = ranks[i];
      if (reached(p, k)) continue;  // it published what we need before exiting
      throw PeerFailure(fmt::format("{}: {} (pid {}) died", where(), who(p), control(p).pid));
    }
  }
  if (watch_) {
    if (auto failure = watch_->poll()) {
      if (reached(peer, k)) return;
      throw PeerFailure(fmt::format("{}: the job recorded a failure ('{}' = \"{}\")", where(), kFailureKey, *failure));
    }
  }
  if (Clock::now() >= deadline_) {
    std::vector<std::string> missing;
    for (int p = 0; p < info_.size; ++p)
      if (p != info_.rank && !reached(p, k)) missing.push_back(who(p));
    const double secs = std::chrono::duration<double>(timeout_).count();
    throw TimeoutError(fmt::format("{}: timed out after {:.3g} s waiting for [{}] to reach step {}; raise "
                                   "FASTRUN_OP_TIMEOUT or pass a longer timeout if the op is legitimately slow",
                                   where(), secs, fmt::join(missing, ", "), k));
  }
}

std::string Channel::who(int rank) const {
  const auto r = static_cast<std::size_t>(rank);
  if (r < info_.global_ranks.size() && info_.global_ranks[r] != rank)
    return fmt::format("rank {} (global rank {})", rank, info_.global_ranks[r]);
  return fmt::format("rank {}", rank);
}

std::string Channel::where() const {
  return fmt::format("shm {} on group '{}' ({} of {})", op_, info_.group, who(info_.rank), info_.size);
}

}  // namespace fastrun::shm
