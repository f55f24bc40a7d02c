#include "fastrun/launcher/job_resources.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/store/shm/segment_names.h"

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
  int removed = 0;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  while (const dirent* e = ::readdir(dir)) {
    if (shm_store::is_job_segment(e->d_name, run_id) && ::unlinkat(::dirfd(dir), e->d_name, 0) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

JobResources::JobResources(const JobConfig& job, Store* shared_store) : run_id_(job.run_id), shared_(shared_store) {
  // 1. The log directory: DIR/<run-id> must be new (on one node).
  if (!job.log_dir.empty()) {
    const std::size_t slash = job.log_dir.rfind('/');
    try {
      if (slash != std::string::npos && slash > 0) make_directories(job.log_dir.substr(0, slash));
    } catch (const Error& e) {
      // A file in the way, no permission, a read-only filesystem: the user's --log-dir is wrong.
      throw ConfigError(fmt::format("--log-dir: {}; give a directory you can create and write", e.what()));
    }
    // Several nodes of one job share a run directory on a shared filesystem: another node may
    // have made it. Each rank's files are still created exclusively (output_relay.h).
    if (::mkdir(job.log_dir.c_str(), 0755) != 0 && !(errno == EEXIST && shared_)) {
      if (errno == EEXIST) {
        throw ConfigError(fmt::format("--log-dir: {} already exists (run id '{}' was used before); give a new "
                                      "--run-id so that this run does not mix into the old one",
                                      job.log_dir, job.run_id));
      }
      throw ConfigError(fmt::format("--log-dir: creating log directory {}: {}; give a directory you can create and "
                                    "write",
                                    job.log_dir, std::strerror(errno)));
    }
  }
  // 2. The janitor, before there is anything to clean up (it also removes the shm segments of
  //    this node's ranks when the job's store is hosted by another node); then the store, before
  //    the first rank starts, with key slots for the whole job: a segment sized for the default
  //    alone holds 12,288 keys, which a few thousand ranks exceed.
  janitor_ = std::make_unique<Janitor>(job.run_id, job.world_size);
  if (shared_) return;
  store_address_ = job.store_address;
  host(static_cast<std::size_t>(job.world_size));
}

void JobResources::host(std::size_t world_size) {
  StoreOptions options;
  options.shm_min_keys = world_size * kStoreKeysPerRank;
  world_size_ = world_size;
  hosted_ = host_store(store_address_, options);
  client_ = hosted_->connect();
}

Store* JobResources::renew_store() {
  if (shared_) throw Error("a store hosted by another node cannot be renewed");  // the CLI refuses it first
  client_.reset();
  hosted_.reset();
  remove_job_segments(run_id_);
  host(world_size_);
  return store();
}

JobResources::~JobResources() { release(); }

void JobResources::release() noexcept {
  if (released_) return;
  released_ = true;
  try {
    client_.reset();
    hosted_.reset();
  } catch (...) {
    // Destructors do not throw; the sweep below removes the segment anyway.
  }
  remove_job_segments(run_id_);
  if (janitor_) janitor_->dismiss();
}

}  // namespace fastrun::launcher
