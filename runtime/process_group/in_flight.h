#pragma once
// The one registry of a group's ops in flight, whichever way they run (docs/runtime.md, "Who
// keeps the ops in flight"): the group runtime's ops on the comm thread (AsyncWork), gloo's
// point-to-point Works (GlooP2PWork) and nccl's operations on the stream (WorkRecord) all
// register here, in their group runtime's InFlightOps. A failure learnt outside any op (gloo's
// transport thread, a stalled-op check, nccl's watchdog or a waiter's timeout) fails every one of
// them through fail_all, and nccl's watchdog walks them for their events and deadlines.
// shm's point-to-point engine is not here: what it keeps in flight is its protocol state (p2p_engine.h).
//
// Entries are held weakly (an op whose Work nobody holds any more is nobody's concern: the
// comm thread's and gloo's ops) or strongly until they ended (nccl: an operation on the device
// keeps its deadline after the caller dropped its Work). Ended and expired entries are pruned
// when an op is added, so the list stays as long as the ops in flight.
//
// Threading: every call may come from any thread. One mutex, held only to add, prune or copy
// the list, never while an op is failed or asked whether it ended.
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

namespace fastrun {

// What the registry can do to an op in flight.
class InFlightOp {
 public:
  virtual ~InFlightOp() = default;
  // Fails the op from outside the thread that runs it with `error` (the first outcome stands):
  // its waits return `error`, once the op let go of the caller's buffers.
  virtual void fail_from_outside(std::exception_ptr error) = 0;
  // The op ended (completed or failed): pruned. Never blocks.
  virtual bool ended() = 0;
};

class InFlightOps {
 public:
  enum class Hold { weak, strong };

  // Registers `op` (and prunes what ended or expired).
  void add(const std::shared_ptr<InFlightOp>& op, Hold hold = Hold::weak);
  // Fails every live op with `error` (outside the lock), each once; ops added meanwhile are not
  // reached. Ops that had ended ignore it (their first outcome stands) and are pruned later.
  void fail_all(const std::exception_ptr& error);
  // The live ops, for a watchdog that polls them.
  std::vector<std::shared_ptr<InFlightOp>> snapshot();
  // Drops the entries that ended or expired.
  void prune();
  // The number of entries (live or not yet pruned): for tests.
  std::size_t size();

 private:
  void prune_locked();

  std::mutex mutex_;
  std::vector<std::weak_ptr<InFlightOp>> weak_;
  std::vector<std::shared_ptr<InFlightOp>> strong_;
};

}  // namespace fastrun
