#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/common/wait_policy.h"
#include "fastrun/runtime/backend/shm/p2p/p2p_engine_state.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/op_timeout.h"
#include "fastrun/runtime/process_group/stalled_op_check.h"
#include "fastrun/runtime/process_group/rank_name.h"

// Waiting on a batch, and failing: there is no progress thread, so the waiting thread moves
// every op of the engine. It spins or yields while an answer is likely within microseconds
// (wait_policy.h), then sleeps on its doorbell in slices, checking between slices the peers the
// batch still needs and the deadline. A failure fails every pending op and the group.

namespace fastrun::shm {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

using p2p::atomic;

bool P2PEngine::test(const std::shared_ptr<Batch>& batch) {
  std::lock_guard lock(mutex_);
  if (batch->remaining > 0) progress();
  return batch->remaining == 0;
}

void P2PEngine::wait(const std::shared_ptr<Batch>& batch, Duration timeout) {
  // 1. Settled already (an eager send, a message that came first): done, no clock read.
  int awaited = -1;  // the peer of the batch's first pending op: spin or yield depending on its CPU
  if (poll_batch(*batch, awaited)) {
    if (batch->error) std::rethrow_exception(batch->error);
    return;
  }
  // 2. Spin, then yield (once per wait, as the channel does): a peer that runs answers within
  //    microseconds. The batch is settled when none of its ops can touch the caller's buffers
  //    any more (an op that failed alone, e.g. a size mismatch, leaves the others running).
  if (!spin(*batch, awaited)) {
    // 3. The deadline: the caller's timeout, or the group's, counted from here: a wait that the
    //    spin ends reads no clock for it (its start is at most the spin's 50 µs, the yield's
    //    200 µs or the ack time of a send being copied earlier).
    if (timeout <= Duration::zero()) timeout = default_timeout_;
    const auto deadline = Clock::now() + timeout;
    // Steps 4 to 7 repeat until the batch is settled (break) or fails (give_up throws).
    MailboxRank& me = rank_block(rank_);
    StallSchedule stall(Clock::now());
    // The stall check's mismatch, as the error that fails the batch (nothing: no verdict).
    auto mismatch = [&]() -> std::exception_ptr {
      if (auto text = hooks_.stall_check ? hooks_.stall_check() : std::nullopt)
        return std::make_exception_ptr(ConfigError(*text));
      return nullptr;
    };
    for (;;) {
      // 4. Sleep on the doorbell until a peer publishes something for us (or a slice passes).
      sleep_slice(me.doorbell, me.sleepers, deadline, [&] { return !poll_batch(*batch, awaited); });
      // 5. Move every message; settled: done. Else note the peers the batch still needs.
      std::vector<int> waiting_on;
      {
        std::lock_guard lock(mutex_);
        progress();
        if (batch->remaining == 0) break;
        for (const Op& op : batch->ops)
          if (!op.done) waiting_on.push_back(op.peer);
      }
      // 6. Their health: one that died, aborted or recorded a failure fails the batch and the
      //    group, unless what it delivered before it went settled the batch.
      try {
        for (int p : waiting_on) check_peer(p);
      } catch (const std::exception&) {
        {
          std::lock_guard lock(mutex_);
          progress();
          if (batch->remaining == 0) break;
        }
        // A peer that left may have found the ranks out of step: that names the root cause.
        if (auto error = mismatch()) give_up(error);
        give_up(std::current_exception());
      }
      //    Ranks whose ops differ may both wait here for good: compare their last ops.
      if (hooks_.stall_check && stall.due(Clock::now()))
        if (auto error = mismatch()) give_up(error);
      // 7. The deadline: a timeout naming the ops still pending fails them and the group.
      if (Clock::now() >= deadline) give_up(timeout_error(*batch, timeout));
    }
  }
  // 8. Settled: an op that failed alone fails the wait.
  if (batch->error) std::rethrow_exception(batch->error);
}

// Step 2 of wait(): true once the batch is settled, false when the policy says sleep.
bool P2PEngine::spin(Batch& batch, int& awaited) {
  MailboxRank& me = rank_block(rank_);
  auto ready = [&] { return poll_batch(batch, awaited); };
  auto shares_cpu_with_awaited = [&] { return awaited >= 0 && shares_cpu(me.cpu, rank_block(awaited).cpu); };
  if (waiter_.wait(ready, shares_cpu_with_awaited)) return true;
  // The peer is copying our data: keep to the spin-then-yield policy for as long as that may
  // take instead of sleeping, so the ack is seen at once, not after a futex wake-up (on this VM
  // tens of microseconds, and a cold cache after whatever ran meanwhile).
  for (const auto until = Clock::now() + ack_time(batch); Clock::now() < until;)
    if (waiter_.wait(ready, shares_cpu_with_awaited)) return true;
  return false;
}

// Progresses (unless settled); true once `batch` is settled. Notes the peer of its first pending
// op in `awaited` (once), whose CPU decides between spinning and yielding.
bool P2PEngine::poll_batch(Batch& batch, int& awaited) {
  std::lock_guard lock(mutex_);
  if (batch.remaining != 0) progress();
  if (batch.remaining == 0) return true;
  if (awaited < 0)
    for (const Op& op : batch.ops)
      if (!op.done) {
        awaited = op.peer;
        break;
      }
  return false;
}

// How long the acks may take when every pending op is a send whose receiver has taken its
// header (so it is copying the payload now, or will as soon as its recv is posted): the payload
// at 1 GB/s, at most a sleep slice; zero otherwise, and with more ranks than CPUs.
Clock::duration P2PEngine::ack_time(Batch& batch) {
  if (size_ > cpus_) return Clock::duration::zero();  // ranks share cores: sleep as the policy says
  std::lock_guard lock(mutex_);
  std::size_t bytes = 0;
  for (const Op& op : batch.ops) {
    if (op.done) continue;
    if (op.kind != P2POp::Kind::send || op.header_end == 0 ||
        atomic(tail(rank_, op.peer)).load(std::memory_order_acquire) < op.header_end)
      return Clock::duration::zero();
    bytes += op.bytes;
  }
  return std::min<Clock::duration>(std::chrono::nanoseconds(bytes), kSleepSlice);
}

// The op timeout of `batch` (op_timeout.h), naming its pending ops.
std::exception_ptr P2PEngine::timeout_error(Batch& batch, Duration timeout) {
  std::vector<std::string> pending;
  {
    std::lock_guard lock(mutex_);
    for (const Op& op : batch.ops)
      if (!op.done) pending.push_back(describe(op));
  }
  return std::make_exception_ptr(TimeoutError(
      op_timeout_message({group_label(global_rank_at(rank_, global_ranks_), group_, "shm"),
                          batch.seq != 0 ? fmt::format("{} #{}", batch.what, batch.seq) : std::string(batch.what),
                          timeout,
                          std::move(pending), "the peer has not posted the matching send/recv"})));
}

// Records the failure in the group's health (first one wins: ops posted from here on are refused
// with it), fails every pending op with `error` and tells the group; throws it.
void P2PEngine::give_up(const std::exception_ptr& error) {
  health_->fail(error);
  {
    std::lock_guard lock(mutex_);
    fail_all(error);
  }
  report_failure();
  std::rethrow_exception(error);
}

void P2PEngine::fail_all(const std::exception_ptr& error) {
  for (Peer& peer : peers_) {
    for (Out& o : peer.out) {
      if (o.send) finish(o.send, error);
      if (o.completes) finish(o.completes, error);
    }
    for (auto& [id, op] : peer.awaiting_ack) finish(op, error);
    for (auto& op : peer.recvs) finish(op, error);
    for (auto& u : peer.unexpected)
      if (u.claimed) finish(u.claimed, error);
    if (peer.target) finish(peer.target, error);
    // A helping sender may still be writing its last chunk: the group is unusable from here.
    if (peer.coop.op) finish(peer.coop.op, error);
    peer.coop = CoopIn{};
    if (peer.reading) {  // the rest of the message is skipped, never written anywhere
      peer.discard = true;
      peer.spill = nullptr;
      for (auto& u : peer.unexpected) u.claimed = nullptr;
    }
    peer.out.clear();
    peer.awaiting_ack.clear();
    peer.recvs.clear();
    peer.target = nullptr;
  }
}

}  // namespace fastrun::shm
