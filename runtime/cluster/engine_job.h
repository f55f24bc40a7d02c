#pragma once
// What a cluster's own engine (Slurm's srun, Open MPI's mpirun) tells a process about the job
// it started, so that neither `fastrun` under it nor a bare `srun ./train` / `mpirun ./train`
// needs a hand-set MASTER_ADDR/MASTER_PORT (docs/multinode.md, "Under Slurm", "Under mpirun").
//
// Where the job's store lives (task 0 hosts it, every other task connects, retrying until the
// join timeout):
//   slurm    host: the first node of SLURM_STEP_NODELIST (task 0 runs there: srun gives node 0
//            the first tasks); port: derived_port(SLURM_JOB_ID, SLURM_STEP_ID).
//   openmpi  host: 127.0.0.1 when the job has one node (OMPI_MCA_orte_num_nodes=1), else the
//            first address mpirun itself listens on (OMPI_MCA_orte_hnp_uri), so task 0 must run
//            on mpirun's host (the default mapping puts it there when mpirun runs inside the
//            allocation); port: derived_port(OMPI_MCA_ess_base_jobid, 0).
#include <cstdint>
#include <optional>
#include <string>

namespace fastrun::cluster {

struct EngineJob {
  std::string engine;       // "slurm" or "openmpi"
  int task = 0;             // SLURM_PROCID / OMPI_COMM_WORLD_RANK
  int ntasks = 1;           // tasks of the step / job
  int local_task = 0;       // index among the tasks on this node
  int local_tasks = 1;      // tasks on this node
  int nnodes = 1;           // nodes of the step / job
  std::optional<int> node;  // this task's node index (Slurm only: Open MPI exports none)
  std::string master_host;  // where task 0 runs and hosts the store
  std::uint16_t master_port = 0;
  // For messages: the variables the values came from.
  std::string ntasks_from, nnodes_from, node_from, master_from;
};

// First port and size of the range derived ports fall in: below Linux's ephemeral ports
// (32768 and up), so no client socket of the job's own hosts takes it first.
constexpr std::uint16_t kDerivedPortBase = 20000;
constexpr std::uint16_t kDerivedPortSpan = 10000;

// kDerivedPortBase + (job_id * 97 + step) mod kDerivedPortSpan: the same on every node;
// consecutive steps of a job, and the first 97 steps of consecutive jobs, get different ports.
std::uint16_t derived_port(std::uint64_t job_id, std::uint64_t step);

// Inside an srun step (SLURM_JOB_ID, SLURM_STEP_ID and SLURM_PROCID set): the step. nullopt
// outside one (also in an sbatch script or an salloc shell, which are not steps).
// ConfigError naming the variable for a malformed or inconsistent value.
std::optional<EngineJob> slurm_step();

// Under mpirun (OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE set): the job; else nullopt.
std::optional<EngineJob> openmpi_job();

// slurm_step(), else openmpi_job().
std::optional<EngineJob> engine_job();

}  // namespace fastrun::cluster
