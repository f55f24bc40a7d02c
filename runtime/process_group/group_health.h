#pragma once
// A group's failure state, shared by its backend, its comm thread and its Work handles (part of
// the group runtime, group_runtime.h). One per group, on every backend:
//   - the label every message starts with: "rank R in group 'G' (backend)" (R: global rank);
//   - the first failure of the group (first one wins), after which the group is unusable and
//     every later op is refused with the same BackendError on every backend. It is the group's
//     one failure record: collectives, point-to-point (shm's P2PEngine) and nccl's GroupState
//     all write and read it here, so a failure of either kind refuses the next op of both kinds
//     with the same first message;
//   - the job's failure record (kFailureKey, first writer wins, shared with the launcher and
//     join through store/job_keys.h), read through one FailureWatch at one poll interval;
//   - the peers' liveness (the PeerInfo each rank published at join, checked by pid), to name
//     the rank behind a closed connection.
// Thread-safe. Held by shared_ptr: a comm thread left blocked on a dead peer keeps it alive.
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/failure_watch.h"
#include "fastrun/runtime/process_group/peer_info.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun {

class GroupHealth {
 public:
  // `watch_peers`: read the members' PeerInfo now (dead_peers() needs it; shm watches its
  // peers through the segment's pids instead).
  GroupHealth(const GroupSpec& spec, const std::string& backend, bool watch_peers);

  const std::string& label() const { return label_; }
  int global_rank() const { return global_rank_; }
  Duration op_timeout() const { return op_timeout_; }
  // Null in a world of one without a store.
  const std::shared_ptr<FailureWatch>& watch() const { return watch_; }

  // Marks the group failed with `why` (the first call wins; later ones are ignored). True for
  // the first call: its caller then does what follows a failure (publish it, abort the transport).
  bool fail(const std::string& why);
  // The same with an op's error, as the op's Work reports it (its what(): a translated error
  // names the op and the rank); the error itself is kept for first_error().
  bool fail(const std::exception_ptr& error);
  // The same with the text given apart (nccl: `why` is the error's text with its context).
  bool fail(const std::exception_ptr& error, const std::string& why);
  bool failed() const { return failed_.load(std::memory_order_acquire); }  // lock-free: on every op's path
  std::string failure() const;  // "" while healthy
  // The first failure as the error that caused it, for a backend that fails waits on ops in
  // flight with it (nccl); a BackendError with its text when it came as text; null while healthy.
  std::exception_ptr first_error() const;
  // The error of an op issued after a failure (the same wording on every backend).
  BackendError unusable(std::string_view op) const;
  // Throws unusable(op) once the group failed.
  void check_usable(std::string_view op) const;

  // The job's recorded failure, if any (rate-limited; `force` reads the store now). Never throws.
  std::optional<std::string> recorded_failure(bool force = false) const;
  // Records "rank <global rank>: <reason>" as the job's failure unless one is already recorded.
  void publish(const std::string& reason) const;
  // Records `text` (already "rank N: ...") as the job's failure, first writer wins.
  void publish_as(const std::string& text) const;

  // Group members on this host whose process is gone, waiting up to `grace` for one that is
  // closing its sockets to finish dying (global ranks). Empty without watch_peers.
  std::vector<int> dead_peers(Duration grace) const;

 private:
  std::string label_;
  int global_rank_ = 0;
  Duration op_timeout_{};
  std::shared_ptr<FailureWatch> watch_;
  std::vector<PeerInfo> peers_;
  mutable std::mutex mutex_;
  std::string failure_;         // under mutex_
  std::exception_ptr error_;    // under mutex_; null when the failure came as text
  std::atomic<bool> failed_{false};  // set after failure_, under mutex_
};

// "rank R in group 'G' (backend)", R the global rank of spec.rank.
std::string group_label(const GroupSpec& spec, const std::string& backend);
int global_rank_of(const GroupSpec& spec);

}  // namespace fastrun
