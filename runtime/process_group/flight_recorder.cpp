#include "fastrun/runtime/process_group/flight_recorder.h"

#include <time.h>

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/process_group/flight_answer.h"
#include "fastrun/runtime/process_group/flight_monitor.h"
#include "fastrun/runtime/process_group/stall_board.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun {
namespace {
using Clock = std::chrono::steady_clock;

std::int64_t board_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// The record's start and end times: CLOCK_MONOTONIC_COARSE is steady_clock's clock
// (CLOCK_MONOTONIC) read at the kernel tick's resolution (1-4 ms), at most a tick behind it. The
// record says "in op #k for 12.3 s" and the stall board counts seconds; a precise read costs
// ~50 ns on a VM without a usable TSC, twice for every op a user issues.
Clock::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                        std::chrono::nanoseconds(ts.tv_nsec)));
}

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

FlightRecorder::FlightRecorder(std::string group_name, std::vector<int> global_ranks, int rank,
                               std::shared_ptr<Store> job_store)
    : name_(std::move(group_name)), global_ranks_(std::move(global_ranks)), rank_(rank), job_store_(std::move(job_store)) {
  ring_.reserve(kCapacity);
  if (job_store_ && global_ranks_.size() > 1) {
    monitor_ = FlightMonitor::acquire(job_store_, global_ranks_.at(static_cast<std::size_t>(rank_)));
    monitor_->add(this);
  }
  if (global_ranks_.size() > 1)
    board_slot_ = stall::RankSlot::claim(name_, static_cast<int>(global_ranks_.size()),
                                         global_ranks_.at(static_cast<std::size_t>(rank_)));
}

FlightRecorder::~FlightRecorder() {
  if (monitor_) monitor_->remove(this);
}

std::uint64_t FlightRecorder::begin(const OpDesc& op) {
  const auto start = coarse_now();
  std::lock_guard lock(lock_);
  if (board_slot_ && !op.point_to_point) board_slot_->begun(op, board_ns(start));
  const std::uint64_t slot = next_slot_++;
  // Written in place, lap after lap: an entry holds no string (the op's name is a view), so
  // recording allocates nothing.
  FlightEntry& e = ring_.size() < kCapacity ? ring_.emplace_back() : ring_[slot % kCapacity];
  e.op = op;
  e.start = start;
  e.end = {};
  e.state = FlightEntry::State::issued;
  e.work.reset();
  e.waited_on = false;
  return slot;
}

void FlightRecorder::attach(std::uint64_t slot, const WorkHandle& work) {
  std::lock_guard lock(lock_);
  if (slot + kCapacity < next_slot_) return;  // overwritten already
  ring_[slot % kCapacity].work = work;
}

void FlightRecorder::waiting(std::uint64_t slot) {
  std::lock_guard lock(lock_);
  if (slot + kCapacity < next_slot_) return;
  ring_[slot % kCapacity].waited_on = true;
}

void FlightRecorder::end(std::uint64_t slot, bool ok) {
  const auto now = coarse_now();
  std::lock_guard lock(lock_);
  if (slot + kCapacity < next_slot_) return;
  FlightEntry& e = ring_[slot % kCapacity];
  if (e.state != FlightEntry::State::issued) return;
  e.state = ok ? FlightEntry::State::completed : FlightEntry::State::failed;
  e.end = now;
  if (board_slot_ && !e.op.point_to_point) board_slot_->ended(e.op, board_ns(now), ok);
  e.work.reset();
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::vector<FlightEntry> out;
  {
    std::lock_guard lock(lock_);
    const std::size_t n = ring_.size();
    const std::uint64_t first = next_slot_ - n;
    for (std::uint64_t s = first; s < next_slot_; ++s) out.push_back(ring_[s % kCapacity]);
  }
  // An op may be complete without anyone having waited on it yet: ask its handle.
  for (auto& e : out) {
    if (e.state != FlightEntry::State::issued || e.waited_on) continue;
    auto w = e.work.lock();
    if (w && w->completed()) {
      e.state = FlightEntry::State::completed;
      e.end = Clock::now();
    }
  }
  return out;
}

std::int64_t FlightRecorder::last_collective_seq() const {
  std::lock_guard lock(lock_);
  for (std::uint64_t s = next_slot_; s > next_slot_ - ring_.size(); --s) {
    const FlightEntry& e = ring_[(s - 1) % kCapacity];
    if (!e.op.point_to_point) return e.op.seq;
  }
  return 0;
}

bool FlightRecorder::busy() const {
  const auto all = entries();
  return !all.empty() && all.back().state == FlightEntry::State::issued;
}

std::string FlightRecorder::state_line() const {
  const auto all = entries();
  if (all.empty()) return "no op yet";
  const FlightEntry& last = all.back();
  const auto now = Clock::now();
  switch (last.state) {
    case FlightEntry::State::issued:
      return fmt::format("in {} for {:.1f} s", describe_numbered(last.op), seconds_between(last.start, now));
    case FlightEntry::State::failed:
      return fmt::format("in {} for {:.1f} s, failed {:.1f} s ago", describe_numbered(last.op),
                         seconds_between(last.start, last.end), seconds_between(last.end, now));
    case FlightEntry::State::completed:
      break;
  }
  return fmt::format("last {} completed {:.1f} s ago, no op on this group since", describe_numbered(last.op),
                     seconds_between(last.end, now));
}

std::string FlightRecorder::explain_timeout(const OpDesc& op) {
  {
    std::lock_guard lock(lock_);
    if (!explanation_.empty()) return explanation_;
  }
  const int me = global_ranks_.at(static_cast<std::size_t>(rank_));
  std::string text;
  std::unique_ptr<Store> store;
  try {
    // A clone: this may run on whichever thread waited, while others use the group's store.
    if (job_store_) store = job_store_->clone();
    text = ask_peers(op, store.get());
  } catch (const std::exception& e) {
    text = fmt::format("{} on group '{}' timed out on rank {}; the other ranks' flight records could not be read: {}",
                       describe_numbered(op), name_, me, e.what());
  }
  {
    std::lock_guard lock(lock_);
    if (!explanation_.empty()) return explanation_;
    explanation_ = text;
  }
  try {
    if (store) record_failure(*store, fmt::format("rank {}: {}", me, text));
  } catch (const std::exception& e) {
    log::warn("cannot record the timeout of {} in the job store: {}", describe_numbered(op), e.what());
  }
  return text;
}

TimeoutError FlightRecorder::explained(const TimeoutError& e, const OpDesc& op) {
  return TimeoutError(fmt::format("{}\nflight record: {}", e.what(), explain_timeout(op)));
}

std::string FlightRecorder::ask_peers(const OpDesc& op, Store* store) {
  const int me = global_ranks_.at(static_cast<std::size_t>(rank_));
  std::map<int, std::map<std::string, flight::GroupState>> answers;
  answers[me] = flight::parse_answer(monitor_ ? monitor_->dump()
                                      : flight::answer_line(name_, op.seq, busy(), state_line()));
  std::vector<int> silent;
  if (store && monitor_) {
    const std::int64_t n = store->add(kFlightRequestKey, 1);
    std::vector<int> missing;
    for (int g : global_ranks_)
      if (g != me) missing.push_back(g);
    constexpr os::Backoff kEvery20ms{std::chrono::milliseconds(20), std::chrono::milliseconds(20)};
    os::poll_until(Clock::now() + kAnswerWait, kEvery20ms, [&] {
      std::vector<int> still;
      for (int g : missing) {
        const std::string key = flight_answer_key(n, g);
        if (store->check({key})) answers[g] = flight::parse_answer(to_string(store->get(key, std::chrono::seconds(1))));
        else still.push_back(g);
      }
      missing = std::move(still);
      return missing.empty();
    });
    silent = missing;
  }

  std::vector<int> not_reached;
  std::string doing;
  for (int g : global_ranks_) {
    std::string what;
    const auto it = answers.find(g);
    if (it == answers.end()) {
      what = fmt::format("no answer within {:.1f} s (its process may be gone or stopped)",
                         std::chrono::duration<double>(kAnswerWait).count());
    } else {
      const auto self = it->second.find(name_);
      // Point-to-point ops are numbered apart on each rank: a peer's collective number says nothing
      // about whether it posted the matching send/recv.
      if (!op.point_to_point && (self == it->second.end() || self->second.last_seq < op.seq)) not_reached.push_back(g);
      what = self == it->second.end() ? std::string("no op on this group yet") : self->second.line;
      for (const auto& [group, state] : it->second)
        if (group != name_ && state.busy) what += fmt::format("; on group '{}': {}", group, state.line);
    }
    doing += fmt::format("{}rank {}: {}", doing.empty() ? "" : "; ", g, what);
  }
  std::string verdict;
  if (op.point_to_point && op.root >= 0 && op.root < static_cast<int>(global_ranks_.size()))
    verdict = fmt::format("the matching {} of rank {} did not come (a rank numbers its point-to-point ops on its own, "
                          "so the record cannot say whether it was issued)",
                          op.op == "send" ? "recv" : "send", global_ranks_[static_cast<std::size_t>(op.root)]);
  else if (!not_reached.empty())
    verdict = fmt::format("rank{} {} did not reach op #{}", not_reached.size() == 1 ? "" : "s",
                          fmt::join(not_reached, ","), op.seq);
  else if (silent.empty())
    verdict = fmt::format("every rank reached op #{} (a slow op, or ranks that called different ops: "
                          "FASTRUN_DEBUG=sequence checks that)", op.seq);
  else
    verdict = fmt::format("rank{} {} did not answer", silent.size() == 1 ? "" : "s", fmt::join(silent, ","));
  if (!silent.empty() && !not_reached.empty())
    verdict += fmt::format(", rank{} {} did not answer", silent.size() == 1 ? "" : "s", fmt::join(silent, ","));
  return fmt::format("{} on group '{}' timed out on rank {}: {}. What each rank was doing: {}", describe_numbered(op),
                     name_, me, verdict, doing);
}

}  // namespace fastrun
