#pragma once
// Finding and removing stores whose creator died (e.g. SIGKILLed launcher), for
// `fastrun --cleanup` (the launcher wires it in).
//
// What is scanned:
//   - /dev/shm/fastrun-* segments of shm:// stores owned by the calling user; the creator
//     identity in the segment header (owner.h: host, pid, process start time, boot id) says
//     whether the creator still runs.
//   - file:// store directories directly inside the private runtime directory (runtime_dir.h)
//     with an `owner` marker from this host.
// A store is removed only when its creator is provably dead (same host, and another boot, or the
// pid gone, or the pid reused by a process started at another time). Live jobs' stores, other
// users' files, other hosts' file stores and segments that are not fastrun stores (other
// fastrun-* segments without the store header) are never touched.
//
// Threading: call from one thread; races with a job that exits at the same time are harmless.
#include <string>
#include <vector>

namespace fastrun {

struct CleanupOptions {
  bool dry_run = false;               // report what would be removed, remove nothing
  std::string shm_dir = "/dev/shm";   // tests point these elsewhere
  std::string runtime_dir;            // "" = runtime_dir()
};

// Returns what was (or, with dry_run, would be) removed: "/dev/shm/fastrun-job-42",
// "/tmp/fastrun-0/job-42", ... Errors reading one entry skip that entry (logged at info).
std::vector<std::string> cleanup_stale_stores(const CleanupOptions& options = {});
inline std::vector<std::string> cleanup_stale_stores(bool dry_run) {
  CleanupOptions o;
  o.dry_run = dry_run;
  return cleanup_stale_stores(o);
}

}  // namespace fastrun
