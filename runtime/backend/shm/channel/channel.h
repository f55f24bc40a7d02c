#pragma once
// The step protocol every shm algorithm is written in (one Channel per group).
//
// Each rank publishes a 32-bit step counter in its RankControl. An algorithm is a fixed sequence
// of steps, identical on every rank; at step k a rank may (a) read what peers wrote at earlier
// steps, (b) write into its own region k%R (R = the ring, layout.h), (c) publish k, (d) wait
// until the peers it needs reached some step. A reader is done with the data of step k before it
// publishes k + kMaxReadLag (most algorithms read one step later; the large all-reduce two, so
// that a rank can run a step ahead of a briefly slower peer instead of meeting it at every step).
// So before writing region k%R again at step k, before_write(k) waits until every peer reached
// k - R + kMaxReadLag. That holds across operations of any shape (an op's trailing reads count
// against the next op's steps), so no trailing barrier is needed.
//
// Waiting spins with pause while the peer runs on another CPU (each rank notes its CPU in its
// RankControl); when the peer is queued on our own CPU, where spinning would only keep it off,
// it yields for a bounded time instead (unless a yield recently ran some other task for a whole
// slice); then it sleeps on the peer's step word with FUTEX_WAIT (a
// bounded slice), and between slices checks that the awaited peers are alive (pidfd), have not aborted, that no
// failure was recorded under kFailureKey, and the op deadline. Publishers call FUTEX_WAKE only
// when a sleeper registered on their word.
//
// Threading: one thread at a time drives a Channel: the group's issuing thread, or its comm
// thread (ShmBackend hands the channel over through the comm thread's queue). abort() and
// cancel() may be called from any thread.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastrun/runtime/backend/shm/channel/layout.h"
#include "fastrun/runtime/backend/shm/channel/op_fingerprint.h"
#include "fastrun/runtime/backend/shm/common/segment.h"
#include "fastrun/runtime/backend/shm/common/wait_policy.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/process_group/failure_watch.h"
#include "fastrun/runtime/process_group/stalled_op_check.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::shm {

struct ChannelInfo {
  int rank = 0;
  int size = 1;
  std::vector<int> global_ranks;  // for messages
  std::string group;              // group name, for messages
  int cpus = 1;                   // CPUs this rank may run on: fewer than `size` means ranks share cores
  std::chrono::microseconds yield_for{};  // SpinThenYield's: waits that span a network round trip
};

class Channel {
 public:
  // `segment` is mapped and initialised (header checked, own pid written by the caller).
  Channel(Segment segment, Layout layout, ChannelInfo info, std::shared_ptr<FailureWatch> watch);
  ~Channel();  // marks this rank aborted if an op failed or the group goes away with peers waiting
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Opens pidfds on every peer (their pids must be in the segment). Call once after set-up.
  void watch_peers();

  int rank() const { return info_.rank; }
  int size() const { return info_.size; }
  int cpus() const { return info_.cpus; }
  std::chrono::microseconds yield_for() const { return info_.yield_for; }
  std::size_t region_bytes() const { return layout_.region_bytes; }
  // More ranks than CPUs: ranks share cores, so every step may cost a context switch.
  bool oversubscribed() const { return info_.size > info_.cpus; }

  // The next step number (identical on every rank as long as they run the same ops).
  std::uint32_t next_step() { return ++step_; }
  // Region k%R of `rank`.
  std::byte* region(int rank, std::uint32_t step) const {
    return base_ + layout_.region_offset(static_cast<std::size_t>(rank), step % layout_.ring);
  }

  // Before writing into region k%R: every peer must be done reading step k-R, which it is once it
  // reached k-R+kMaxReadLag.
  // The first write also reserves this rank's regions in /dev/shm (Segment::reserve): the
  // segment is created with only its control blocks reserved, so a job that never moves data
  // through the channel (a join and barriers) never allocates them.
  void before_write(std::uint32_t k) {
    if (!own_reserved_) reserve_own_regions();
    const std::uint32_t need = k - static_cast<std::uint32_t>(layout_.ring) + kMaxReadLag;
    if (static_cast<std::int32_t>(all_reached_ - need) < 0) wait_all(need);
  }
  void publish(std::uint32_t k);
  // Waits until every peer reached k (and records it for before_write).
  void wait_all(std::uint32_t k);
  // Waits until `peer` reached k.
  void wait_one(int peer, std::uint32_t k);

  // For waits outside the step protocol (the mailboxes, p2p_engine.h): throws PeerFailure when
  // `peer` died, left the group (aborted), or the job recorded a failure; `what` starts the
  // message. Thread-safe (it reads only what watch_peers() set up, atomics and the watch), so
  // it may run while another thread drives the channel. Defined in channel_peer_check.cpp.
  void check_peer(int peer, const std::string& what);

  // Runs between sleep slices of a slow wait (never while spinning): shm's point-to-point
  // engines move their pending messages there, so a rank blocked in a collective still feeds a
  // peer that receives before it joins (p2p_progress.h). Set once, before the first op; must
  // not throw.
  void set_idle_hook(std::function<void()> hook) { idle_ = std::move(hook); }

  // The group's stalled-op check (stalled_op_check.h): ranks whose ops never meet on the steps
  // (a collective against an op made of point-to-point messages) would wait for the op timeout.
  // A slow wait runs it on StallSchedule's times, and once before it reports a peer that left
  // (that peer may have found the mismatch first); a message fails the op with ConfigError.
  // Set once, before the first op.
  void set_stall_check(std::function<std::optional<std::string>()> check) { stall_check_ = std::move(check); }

  // Names the operation in wait errors ("all_reduce #7", ...), sets its deadline and leaves its
  // fingerprint for the peers (op_fingerprint.h): the waits of the op compare each peer's with
  // it once and throw ConfigError, naming every rank's op, when they differ.
  // `name` ("all_reduce") outlives the op; the label is formatted only for a message.
  void begin_op(const char* name, std::uint64_t seq, std::chrono::steady_clock::duration timeout,
                const Fingerprint& fingerprint);
  // Marks this rank aborted so peers waiting on it fail at once instead of timing out.
  void abort() noexcept;
  // Makes the wait in progress (and every later one) fail at its next health check, within
  // kSleepSlice: the caller stopped waiting for the op and the group is given up.
  void cancel() noexcept { cancelled_.store(true, std::memory_order_release); }

 private:
  RankControl& control(int rank) const {
    return *reinterpret_cast<RankControl*>(base_ + layout_.control_offset(static_cast<std::size_t>(rank)));
  }
  bool reached(int peer, std::uint32_t k) const;
  // Whether step k is past the current op's start (peers that reached it left their fingerprint).
  bool in_op(std::uint32_t k) const { return static_cast<std::int32_t>(k - op_first_) >= 0; }
  // Compares `peer`'s op (or every peer's) with this rank's, once per op (channel_op_check.cpp).
  void compare_op(int peer);
  void compare_op_all();
  // Throws the mismatch error if a peer that reached the op's first step began another op.
  void check_arrived_ops();
  [[noreturn]] void throw_mismatch();
  // Whether `peer` last ran on the CPU this rank runs on now.
  bool shares_cpu_with(int peer);
  void wait_slow(int peer, std::uint32_t k);
  // Throws PeerFailure / TimeoutError when `peer` cannot arrive at k.
  void check_health(int peer, std::uint32_t k);
  std::string who(int rank) const;
  std::function<void()> idle_;  // set_idle_hook
  void reserve_own_regions();
  // Runs the stall check when due (or `now`), throwing its mismatch as ConfigError.
  void check_stalled(bool now);
  std::string where() const;

  Segment segment_;
  std::byte* base_;
  Layout layout_;
  ChannelInfo info_;
  std::shared_ptr<FailureWatch> watch_;
  // Per rank: a pidfd; kNoPidfd for self or when pidfd_open is unavailable; kGone for a peer
  // that had already exited when watch_peers() ran (a UniqueFd closes only fds >= 0).
  static constexpr int kNoPidfd = -1, kGone = -2;
  std::vector<os::UniqueFd> pidfds_;
  std::uint32_t step_ = 0;
  std::uint32_t all_reached_ = 0;
  OpFingerprints fingerprints_;
  std::uint32_t op_first_ = 0;              // the current op's first step (0: no op yet)
  std::uint32_t all_compared_ = 0;          // op_first_ once every peer's op was compared
  std::vector<std::uint32_t> compared_;     // per peer: op_first_ once its op was compared
  const char* op_ = "set-up";  // the op's name, and its number (0: none yet)
  std::uint64_t op_seq_ = 0;
  std::string op_label() const;  // "all_reduce #7", or "set-up"
  std::chrono::steady_clock::time_point deadline_{};  // set at the op's first slow wait
  std::chrono::steady_clock::duration timeout_{};
  SpinThenYield waiter_;  // the channel has one driving thread at a time
  std::atomic<bool> cancelled_{false};
  bool own_reserved_ = false;  // this rank's regions are reserved (before_write)
  std::function<std::optional<std::string>()> stall_check_;  // set_stall_check
  bool slow_wait_began_ = true;  // the current op's first slow wait set deadline_ and stall_ (begin_op clears it)
  StallSchedule stall_{std::chrono::steady_clock::time_point{}};
};

}  // namespace fastrun::shm
