#include "fastrun/launcher/job_resources.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log.h"

namespace fastrun::launcher {

void make_directories(const std::string& path) {
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    const std::string part = path.substr(0, pos);
    if (part.empty()) continue;
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("creating directory " + part, errno);
  }
}

int remove_job_segments(const std::string& run_id) noexcept {
  if (run_id.empty()) return 0;
  const std::string exact = "fastrun-" + run_id;
  const std::string prefix = exact + "-";
  int removed = 0;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == exact || name.compare(0, prefix.size(), prefix) == 0) {
      if (::unlink(("/dev/shm/" + name).c_str()) == 0) ++removed;
    }
  }
  ::closedir(dir);
  return removed;
}

JobResources::JobResources(const JobConfig& job, Store* shared_store) : run_id_(job.run_id), shared_(shared_store) {
  // 1. The log directory: DIR/<run-id> must be new (on one node).
  if (!job.log_dir.empty()) {
    const std::size_t slash = job.log_dir.rfind('/');
    if (slash != std::string::npos && slash > 0) make_directories(job.log_dir.substr(0, slash));
    // Several nodes of one job share a run directory on a shared filesystem: another node may
    // have made it. Each rank's files are still created exclusively (output_relay.h).
    if (::mkdir(job.log_dir.c_str(), 0755) != 0 && !(errno == EEXIST && shared_)) {
      if (errno == EEXIST) {
        throw ConfigError(fmt::format("--log-dir: {} already exists (run id '{}' was used before); give a new "
                                      "--run-id so that this run does not mix into the old one",
                                      job.log_dir, job.run_id));
      }
      throw_errno("creating log directory " + job.log_dir, errno);
    }
  }
  // 2. The store, before the first rank starts.
  if (shared_) return;
  hosted_ = host_store(job.store_address);
  client_ = hosted_->connect();
}

JobResources::~JobResources() { release(); }

void JobResources::release() noexcept {
  try {
    client_.reset();
    hosted_.reset();
  } catch (...) {
    // Destructors do not throw; the sweep below removes the segment anyway.
  }
  remove_job_segments(run_id_);
}

}  // namespace fastrun::launcher
