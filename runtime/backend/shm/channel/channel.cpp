#include "fastrun/runtime/backend/shm/channel/channel.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/op.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/process_group/op_timeout.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/process_group/rank_name.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::shm {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic_ref<std::uint32_t> word(std::uint32_t& w) { return std::atomic_ref<std::uint32_t>(w); }

}  // namespace

Channel::Channel(Segment segment, Layout layout, ChannelInfo info, std::shared_ptr<FailureWatch> watch)
    : segment_(std::move(segment)),
      base_(segment_.data()),
      layout_(layout),
      info_(std::move(info)),
      watch_(std::move(watch)),
      pidfds_(static_cast<std::size_t>(info_.size)),
      fingerprints_(base_, layout_, info_.rank, info_.global_ranks, info_.group),
      compared_(static_cast<std::size_t>(info_.size)),
      waiter_(info_.size, info_.cpus, info_.yield_for) {}

Channel::~Channel() {
  // Peers that still wait on a step this rank will never publish learn it at once.
  abort();
}

void Channel::watch_peers() {
  for (int p = 0; p < info_.size; ++p) {
    if (p == info_.rank) continue;
    const pid_t pid = control(p).pid;
    os::UniqueFd fd = os::open_pidfd(pid);
    if (fd) {
      pidfds_[static_cast<std::size_t>(p)] = std::move(fd);
      continue;
    }
    // Already gone: it mapped the segment and passed the barrier, so it may have joined and
    // left cleanly (join() is allowed to end a program). That is a failure only if we ever wait
    // for a step it never published, which check_health decides.
    if (errno == ESRCH) {
      pidfds_[static_cast<std::size_t>(p)].reset(kGone);
      continue;
    }
    // No pidfds (old kernel): check_health falls back to kill(pid, 0).
  }
}

void Channel::begin_op(const char* name, std::uint64_t seq, std::chrono::steady_clock::duration timeout,
                       const Fingerprint& fingerprint) {
  op_ = name;
  op_seq_ = seq;
  timeout_ = timeout;
  op_first_ = step_ + 1;  // the op's first next_step()
  slow_wait_began_ = false;
  fingerprints_.leave(op_first_, fingerprint);
}

void Channel::abort() noexcept {
  if (!base_) return;
  RankControl& me = control(info_.rank);
  word(me.aborted).store(1, std::memory_order_seq_cst);
  futex_wake_all(me.step);
}

void Channel::publish(std::uint32_t k) {
  RankControl& me = control(info_.rank);
  // seq_cst store then seq_cst load of `sleepers` pairs with the waiter's increment-then-recheck:
  // either the waiter sees k, or we see its registration and wake it.
  note_cpu(me.cpu);
  word(me.step).store(k, std::memory_order_seq_cst);
  if (word(me.sleepers).load(std::memory_order_seq_cst) != 0) futex_wake_all(me.step);
}

bool Channel::shares_cpu_with(int peer) { return shares_cpu(control(info_.rank).cpu, control(peer).cpu); }

bool Channel::reached(int peer, std::uint32_t k) const {
  const std::uint32_t v = word(control(peer).step).load(std::memory_order_acquire);
  return static_cast<std::int32_t>(v - k) >= 0;
}

void Channel::wait_all(std::uint32_t k) {
  for (int p = 0; p < info_.size; ++p)
    if (p != info_.rank && !reached(p, k)) wait_slow(p, k);
  if (static_cast<std::int32_t>(k - all_reached_) > 0) all_reached_ = k;
  if (all_compared_ != op_first_ && in_op(k)) compare_op_all();
}

void Channel::wait_one(int peer, std::uint32_t k) {
  if (!reached(peer, k)) wait_slow(peer, k);
  if (compared_[static_cast<std::size_t>(peer)] != op_first_ && all_compared_ != op_first_ && in_op(k))
    compare_op(peer);
}

void Channel::wait_slow(int peer, std::uint32_t k) {
  // Spin or yield (wait_policy.h), then sleep on the peer's step word in slices, checking health
  // between slices.
  if (waiter_.wait([&] { return reached(peer, k); }, [&] { return shares_cpu_with(peer); })) return;
  RankControl& c = control(peer);
  // The op's first slow wait: its timeout and the stall clock start here, not in begin_op, so
  // that an op none of whose waits sleeps reads no clock (28 ns a read on this project's VM;
  // the timeout still bounds every wait of the op, from its first that had to sleep).
  if (!slow_wait_began_) {
    slow_wait_began_ = true;
    const auto now = Clock::now();
    deadline_ = now + timeout_;
    if (stall_check_) stall_ = StallSchedule(now);
  }
  for (;;) {
    if (idle_) idle_();
    sleep_slice(c.step, c.sleepers, deadline_, [&] {
      return !reached(peer, k) && word(c.aborted).load(std::memory_order_relaxed) == 0;
    });
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
    check_arrived_ops();  // it may have left on a mismatch this rank has not compared yet
    check_stalled(/*now=*/true);  // or on one in an op that never met the steps
    throw PeerFailure(fmt::format("{}: {} left the group or failed in a collective of its own; see its error",
                                  where(), who(peer)));
  }
  // One poll over every peer's pidfd: a dead rank is reported even if we wait on another one.
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (int p = 0; p < info_.size; ++p) {
    const int fd = pidfds_[static_cast<std::size_t>(p)].get();
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
  check_stalled(/*now=*/false);
  if (Clock::now() >= deadline_) {
    std::vector<std::string> missing;
    for (int p = 0; p < info_.size; ++p)
      if (p != info_.rank && !reached(p, k)) missing.push_back(who(p));
    throw TimeoutError(op_timeout_message(
        {group_label(global_rank_at(info_.rank, info_.global_ranks), info_.group, "shm"), op_label(),
         Duration(timeout_), std::move(missing), fmt::format("they have not reached its step {}", k)}));
  }
}

void Channel::reserve_own_regions() {
  const auto me = static_cast<std::size_t>(info_.rank);
  segment_.reserve(layout_.region_offset(me, 0), layout_.region_offset(me + 1, 0) - layout_.region_offset(me, 0));
  own_reserved_ = true;
}

void Channel::check_stalled(bool now) {
  if (!stall_check_ || (!now && !stall_.due(Clock::now()))) return;
  if (auto mismatch = stall_check_()) throw ConfigError(*mismatch);
}

std::string Channel::who(int rank) const { return rank_name(rank, info_.global_ranks); }

std::string Channel::where() const {
  return fmt::format("shm {} on group '{}' ({} of {})", op_label(), info_.group, who(info_.rank), info_.size);
}

std::string Channel::op_label() const { return op_seq_ == 0 ? std::string(op_) : fastrun::op_label(op_, op_seq_); }

}  // namespace fastrun::shm
