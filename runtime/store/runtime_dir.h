#pragma once
// The private directory for file stores and markers: FASTRUN_RUNTIME_DIR, else
// $XDG_RUNTIME_DIR/fastrun, else /tmp/fastrun-<uid>. Created 0700 when missing; an existing one
// must be a real directory (not a symlink) owned by the caller with no group/other access —
// otherwise another user could read a job's keys or plant files, so it is a StoreError naming
// the directory, its owner/mode and FASTRUN_RUNTIME_DIR.
#include <string>

namespace fastrun {

std::string runtime_dir();

// Checks (and creates when `create`) a directory with the rules above.
void ensure_private_dir(const std::string& path, bool create);

}  // namespace fastrun
