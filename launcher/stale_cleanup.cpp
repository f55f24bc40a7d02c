#include "fastrun/launcher/stale_cleanup.h"

#include <exception>
#include <string>

#include "fastrun/launcher/job_resources.h"
#include "fastrun/runtime/store/cleanup/cleanup.h"

namespace fastrun::launcher {

int run_stale_cleanup(std::FILE* out, std::FILE* err) {
  try {
    // The stores engineer's scan decides what is provably dead (creator identity in the segment).
    const std::vector<std::string> removed = cleanup_stale_stores();
    int extra = 0;
    for (const std::string& path : removed) {
      std::fprintf(out, "removed %s\n", path.c_str());
      // A dead job's store also dooms the segments its ranks named after it (fastrun-<run-id>@*).
      const std::string prefix = "/dev/shm/fastrun-";
      if (path.compare(0, prefix.size(), prefix) == 0) {
        const std::string run_id = path.substr(prefix.size());
        const int n = remove_job_segments(run_id);
        if (n > 0) std::fprintf(out, "removed %d segment(s) /dev/shm/fastrun-%s@*\n", n, run_id.c_str());
        extra += n;
      }
    }
    std::fprintf(out, "fastrun --cleanup: %zu stale store(s) removed\n", removed.size());
    (void)extra;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(err, "fastrun --cleanup: %s\n", e.what());
    return 1;
  }
}

}  // namespace fastrun::launcher
