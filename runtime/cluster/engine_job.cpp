#include "fastrun/runtime/cluster/engine_job.h"

namespace fastrun::cluster {

std::uint16_t derived_port(std::uint64_t job_id, std::uint64_t step) {
  return static_cast<std::uint16_t>(kDerivedPortBase + (job_id % kDerivedPortSpan * 97 + step) % kDerivedPortSpan);
}

std::optional<EngineJob> engine_job() {
  if (auto s = slurm_step()) return s;
  return openmpi_job();
}

}  // namespace fastrun::cluster
