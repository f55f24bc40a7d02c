#include "fastrun/launcher/job_config.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "fastrun/launcher/free_port.h"
#include "fastrun/launcher/child_env.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/safe_name.h"

namespace fastrun::launcher {
namespace {

std::uint64_t random_u64() {
  std::uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    // No entropy source: time and pid still make the value unique enough for a run id.
    v = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<std::uint64_t>(getpid()) << 32);
  }
  return v;
}

}  // namespace

OutputMode parse_output_mode(const std::string& value) {
  if (value == "all") return OutputMode::all;
  if (value == "only_error") return OutputMode::only_error;
  if (value == "ignore") return OutputMode::ignore;
  throw ConfigError(fmt::format("--output '{}': accepted values are all, only_error, ignore", value));
}

std::string generate_run_id() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("{}-{:06d}-p{}-{:08x}", stamp, micros, getpid(),
                     static_cast<std::uint32_t>(random_u64()));
}

void check_run_id(const std::string& id) {
  const bool ok = !id.empty() && id.size() <= 64 && id.front() != '.' && id.front() != '-' && os::all_name_chars(id);
  if (!ok) {
    throw ConfigError(fmt::format("--run-id '{}': a run id is 1-64 characters of A-Z a-z 0-9 . _ - and does not "
                                  "start with '.' or '-' (it names files and /dev/shm segments)",
                                  id));
  }
}

JobConfig prepare_job(const JobOptions& options) {
  JobConfig job;
  // 1. Ranks and devices.
  if (options.nproc != 0 && options.devices) {
    throw ConfigError(fmt::format("--nproc {} and --devices {} were both given; use one of them", options.nproc,
                                  *options.devices));
  }
  if (options.devices) {
    std::optional<std::string> cvd;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) cvd = v;
    // Count GPUs only when CUDA_VISIBLE_DEVICES does not already say which are visible.
    job.devices = plan_devices(*options.devices, cvd, cvd ? 0 : count_physical_gpus());
    job.world_size = static_cast<int>(job.devices->rank_devices.size());
  } else {
    if (options.nproc < 0 || options.nproc > kMaxRanks) {
      throw ConfigError(fmt::format("--nproc {}: give a number of ranks from 1 to {}", options.nproc, kMaxRanks));
    }
    job.world_size = options.nproc == 0 ? 1 : options.nproc;
    // Read now: rank 0 of a self-launch hides the GPUs from itself before its children start.
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) job.user_visible_devices = v;
  }
  if (job.world_size > kMaxRanks) {
    throw ConfigError(fmt::format("{} ranks: at most {} ranks per node", job.world_size, kMaxRanks));
  }
  // 2. The rest of the options.
  if (!(options.kill_timeout >= 0) || !std::isfinite(options.kill_timeout) || options.kill_timeout > 86400) {
    throw ConfigError(fmt::format("--kill-timeout {}: give seconds from 0 to 86400", options.kill_timeout));
  }
  job.kill_timeout = options.kill_timeout;
  if (options.stall_report && (*options.stall_report < 0 || *options.stall_report > kMaxStallReport))
    throw ConfigError(fmt::format("--stall-report {}: give whole seconds from 1 to {}, or 0 for no stall report",
                                  *options.stall_report, kMaxStallReport));
  job.stall_report_s = options.stall_report ? *options.stall_report
                                            : static_cast<int>(env::get_int(env::kStallReport));
  job.output = options.output;
  job.tag_output = options.tag_output;
  job.keep_background = options.keep_background;
  if (options.max_restarts) {
    if (*options.max_restarts < 0)
      throw ConfigError(fmt::format("--max-restarts {}: give a whole number of restarts from 0", *options.max_restarts));
    job.max_restarts = *options.max_restarts;
  } else {
    job.max_restarts = static_cast<int>(env::get_int(env::kMaxRestarts));  // the registry names a bad value
  }
  job.run_id = options.run_id.empty() ? generate_run_id() : options.run_id;
  check_run_id(job.run_id);
  job.store_address = "shm://" + job.run_id;  // segment /dev/shm/fastrun-<run-id>
  if (!options.log_dir.empty()) job.log_dir = options.log_dir + "/" + job.run_id;
  // 3. The seed: the user's (validated by the registry), else one chosen here for every rank.
  if (auto seed = env::find_int(env::kGlobalSeed)) {
    job.seed = std::to_string(*seed);
  } else {
    job.seed = std::to_string(random_u64() >> 33);  // 31 bits: fits every seed type users have
  }
  // 4. A port for the ranks' own c10d-style rendezvous (MASTER_PORT); node 0 of a multi-node
  //    job picks it on the master host instead.
  job.rank_master_port = pick_free_port(job.rank_master_addr);
  // 5. CPU and memory binding: every rank's GPU located and the plan made now, so that a GPU
  //    without a PCI device is a usage error before anything starts (docs/binding.md).
  job.binding = plan_job_binding(options.bind, options.report_bindings, job.devices, job.world_size);
  // 6. Every other FASTRUN_* variable the ranks will read: a bad one is refused now, not by
  //    each rank after it started (those the launcher sets for the ranks are not the user's).
  std::vector<std::string> overwritten;
  for (const auto& [name, value] : rank_variables(job, 0)) overwritten.push_back(name);
  env::check_environment(overwritten);
  return job;
}

}  // namespace fastrun::launcher
