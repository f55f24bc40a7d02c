#pragma once
// Who created a store, recorded where the store lives (the shm segment header, the file store's
// "owner" marker), so that `fastrun --cleanup` (store/cleanup/cleanup.h) can tell a stale store — whose
// creator died, e.g. by SIGKILL — from a live job's. A pid alone is not enough (pids are
// reused): the creator is identified by pid + process start time (clock ticks since boot, field
// 22 of /proc/PID/stat) + boot id + host name.
#include <cstdint>
#include <string>

namespace fastrun::store_owner {

struct Identity {
  std::int64_t pid = 0;
  std::uint64_t start_time = 0;  // /proc/PID/stat field 22
  std::string boot_id;           // /proc/sys/kernel/random/boot_id
  std::string host;              // gethostname()
};

// The calling process.
Identity self();
// Start time of `pid`, or 0 when the process does not exist (or /proc is unreadable).
std::uint64_t start_time_of(std::int64_t pid);
std::string boot_id();
std::string host_name();

enum class Liveness { alive, dead, unknown };
// dead: same host and (another boot, or the pid is gone, or the pid now belongs to a process
// started at another time). unknown: another host (cannot tell from here). alive otherwise.
Liveness liveness(const Identity& creator);

// "host pid start_time boot_id" one line, and back (false on malformed text).
std::string serialize(const Identity& id);
bool parse(const std::string& text, Identity& out);

}  // namespace fastrun::store_owner
