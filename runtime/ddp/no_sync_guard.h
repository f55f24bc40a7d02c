#pragma once
// The one "no sync in this scope" guard, in two strengths:
//   { fastrun::NoSyncGuard g(2); ... }   // the process-wide FASTRUN_NO_SYNC level (no_sync.h):
//                                        // 1 = barriers are no-ops, 2 = every collective is local
//   { auto g = ddp.no_sync(); ... }      // one DDP skips its gradient averaging (ddp/ddp.h),
//                                        // the same as NoSyncGuard g(ddp); other collectives run
// Either way the previous state comes back on every exit path, exceptions included. Guards
// nest; destroy them in reverse order of creation (scopes do). Not copyable or movable: it
// lives in the scope it guards (ddp.no_sync() returns it by guaranteed copy elision).
namespace fastrun {

class DistributedDataParallel;

class NoSyncGuard {
 public:
  // ConfigError unless level is 0, 1 or 2.
  explicit NoSyncGuard(int level);
  // Error when entered in the middle of a synced step (after mark_ready, before finish).
  // `ddp` must outlive the guard.
  explicit NoSyncGuard(DistributedDataParallel& ddp);
  ~NoSyncGuard();
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  DistributedDataParallel* ddp_ = nullptr;  // set: a DDP guard; null: a level guard
  int previous_level_ = -1;                 // a level guard's previous override (-1: none)
  bool previous_sync_ = true;               // a DDP guard's previous syncing()
};

}  // namespace fastrun
