#pragma once
// Names of one job's /dev/shm segments. The job's store is "fastrun-<run-id>" (shm://<run-id>);
// every segment a rank creates for the job is "fastrun-<run-id>@<what>". A run id (and a shm://
// store name) is made of [A-Za-z0-9._-] only, so '@' ends the id unambiguously: job "pre" owns
// "fastrun-pre" and "fastrun-pre@*", never "fastrun-pre-x" or "fastrun-pre-x@*" of job "pre-x".
#include <string>
#include <string_view>

#include "fastrun/runtime/store/shm/segment_layout.h"

namespace fastrun::shm_store {

inline constexpr char kJobSeparator = '@';

// "fastrun-<run-id>": the store segment of a job whose store is shm://<run-id>.
inline std::string job_store_segment(std::string_view run_id) {
  return std::string(kSegmentPrefix).append(run_id);
}
// "fastrun-<run-id>@": what every other segment of the job starts with.
inline std::string job_segment_prefix(std::string_view run_id) {
  return job_store_segment(run_id) + kJobSeparator;
}
// True when /dev/shm entry `name` belongs to the job `run_id` (exactly, see above).
inline bool is_job_segment(std::string_view name, std::string_view run_id) {
  const std::string prefix = job_segment_prefix(run_id);
  return name == job_store_segment(run_id) || name.substr(0, prefix.size()) == prefix;
}

}  // namespace fastrun::shm_store
