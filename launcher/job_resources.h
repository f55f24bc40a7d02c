#pragma once
// What a job owns outside its processes, with RAII: the log directory (created, never removed),
// the shm store (created before the first rank, removed after the last), and the /dev/shm
// segments ranks leave under the job's name ("fastrun-<run-id>@*", segment_names.h; e.g. a collective's segment
// of a SIGKILLed rank), removed at the end whatever the outcome.
#include <memory>
#include <string>

#include "fastrun/launcher/janitor.h"
#include "fastrun/launcher/job_config.h"
#include "fastrun/runtime/store/factory.h"

namespace fastrun::launcher {

class JobResources {
 public:
  // Creates DIR/<run-id> (parents as needed; the run directory itself must be new, so that a
  // run never mixes into an old one) and hosts the job's store. Throws ConfigError / Error.
  // `shared_store`: a multi-node job's store, hosted by node 0 and held by the node rendezvous;
  // then nothing is hosted here and store() returns it.
  explicit JobResources(const JobConfig& job, Store* shared_store = nullptr);
  ~JobResources();  // release()
  JobResources(const JobResources&) = delete;
  JobResources& operator=(const JobResources&) = delete;

  // A client handle for the launcher's own use (the failure key).
  Store* store() { return shared_ ? shared_ : client_.get(); }
  // Removes the job's segments if this process dies without release() (janitor.h).
  Janitor* janitor() { return janitor_.get(); }
  // Removes the store and every /dev/shm/fastrun-<run-id>@* now (never throws). Once: a second
  // call (the destructor after the launcher's own) does nothing.
  void release() noexcept;
  // Between two attempts of a job on one node (every rank of the last one reaped): removes the
  // store and the segments the ranks made, and hosts a new, empty store at the same address, so
  // that the next attempt sees no key of the last one. Returns store(). Throws Error when the
  // store cannot be hosted.
  Store* renew_store();

 private:
  void host(std::size_t world_size);

  std::string run_id_;
  std::string store_address_;
  std::size_t world_size_ = 0;
  std::unique_ptr<Janitor> janitor_;
  std::unique_ptr<HostedStore> hosted_;
  std::unique_ptr<Store> client_;
  Store* shared_ = nullptr;
  bool released_ = false;
};

// Keys a job's store makes room for per rank. The runtime sets about 4 per rank per process
// group (join's peer and arrival keys, a barrier's, gloo's address); 32 leaves room for several
// groups and the program's own keys. 4,096 ranks: 131,072 keys, 4 MiB of slot tables.
inline constexpr std::size_t kStoreKeysPerRank = 32;

// Removes /dev/shm/fastrun-<run_id> and /dev/shm/fastrun-<run_id>@* (never another job's); returns how many.
int remove_job_segments(const std::string& run_id) noexcept;

// Creates `path` and its missing parents (mkdir -p). Throws Error naming the path.
void make_directories(const std::string& path);

}  // namespace fastrun::launcher
