#pragma once
// This machine's identity: its host name (how ranks and stores name where they run) and its
// boot id (a host name alone cannot tell this boot's /dev/shm and pids from the last one's).
#include <optional>
#include <string>

namespace fastrun::os {

// gethostname(), or nullopt when it fails; each caller keeps its own fallback text.
std::optional<std::string> host_name();

// /proc/sys/kernel/random/boot_id, or "" when unreadable.
std::string boot_id();

}  // namespace fastrun::os
