// openmpi_job(): the mpirun job this process belongs to (engine_job.h). Open MPI 4.1 exports
// no node index and no host list to its processes; what it does export is the node count
// (OMPI_MCA_orte_num_nodes) and the URI of mpirun itself (OMPI_MCA_orte_hnp_uri,
// "<jobid>.<vpid>;tcp://ADDR[,ADDR...]:PORT;tcp6://[ADDR]:PORT").
#include <fmt/format.h>

#include "fastrun/runtime/cluster/engine_job.h"
#include "fastrun/runtime/cluster/foreign_env.h"
#include "fastrun/runtime/error.h"

namespace fastrun::cluster {
namespace {

// The first IPv4 address mpirun listens on.
std::string mpirun_host(const std::string& uri) {
  const std::string tag = "tcp://";
  const std::size_t at = uri.find(tag);
  const std::size_t begin = at + tag.size();
  const std::size_t end = at == std::string::npos ? at : uri.find_first_of(",:;", begin);
  if (at == std::string::npos || end == std::string::npos || end == begin)
    throw ConfigError(fmt::format("OMPI_MCA_orte_hnp_uri='{}' names no tcp:// address of mpirun's host; set "
                                  "MASTER_ADDR to the host of rank 0",
                                  uri));
  return uri.substr(begin, end - begin);
}

}  // namespace

std::optional<EngineJob> openmpi_job() {
  const auto rank = foreign_int("OMPI_COMM_WORLD_RANK", 0);
  if (!rank) return std::nullopt;
  EngineJob j;
  j.engine = "openmpi";
  j.task = *rank;
  j.ntasks_from = "OMPI_COMM_WORLD_SIZE";
  const auto size = foreign_int("OMPI_COMM_WORLD_SIZE", 1);
  if (!size) throw ConfigError(fmt::format("OMPI_COMM_WORLD_RANK={} is set but OMPI_COMM_WORLD_SIZE is not", *rank));
  j.ntasks = *size;
  if (j.task >= j.ntasks)
    throw ConfigError(fmt::format("OMPI_COMM_WORLD_RANK={} is not valid with OMPI_COMM_WORLD_SIZE={}", j.task,
                                  j.ntasks));
  j.local_task = foreign_int("OMPI_COMM_WORLD_LOCAL_RANK", 0).value_or(0);
  j.local_tasks = foreign_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(j.ntasks);
  j.nnodes_from = "OMPI_MCA_orte_num_nodes";
  j.nnodes = foreign_int("OMPI_MCA_orte_num_nodes", 1).value_or(j.local_tasks == j.ntasks ? 1 : 2);
  const auto job_id = foreign_int64("OMPI_MCA_ess_base_jobid", 0);
  if (!job_id)
    throw ConfigError("under mpirun (OMPI_COMM_WORLD_RANK is set) but OMPI_MCA_ess_base_jobid is not: set "
                      "MASTER_ADDR and MASTER_PORT");
  j.master_port = derived_port(static_cast<std::uint64_t>(*job_id), 0);
  if (j.nnodes == 1) {
    j.master_host = "127.0.0.1";  // the whole job is on this host
    j.master_from = "the loopback address (OMPI_MCA_orte_num_nodes=1) and a port derived from "
                    "OMPI_MCA_ess_base_jobid";
  } else {
    const auto uri = getenv_opt("OMPI_MCA_orte_hnp_uri");
    if (!uri)
      throw ConfigError("under mpirun on several nodes but OMPI_MCA_orte_hnp_uri is unset: set MASTER_ADDR to the "
                        "host of rank 0");
    j.master_host = mpirun_host(*uri);
    j.master_from = "mpirun's host (OMPI_MCA_orte_hnp_uri; rank 0 must run there) and a port derived from "
                    "OMPI_MCA_ess_base_jobid";
  }
  return j;
}

}  // namespace fastrun::cluster
