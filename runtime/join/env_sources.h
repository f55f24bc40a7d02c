#pragma once
// Where a rank learns who it is (docs/runtime.md, "Joining"). Sources, first match wins:
//   fastrun   FASTRUN_RANK + FASTRUN_WORLD_SIZE (+ LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, STORE)
//   torchrun  RANK + WORLD_SIZE (+ LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR/PORT)
//   slurm     SLURM_PROCID + SLURM_NTASKS (+ SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE, SLURM_NODEID)
//   openmpi   OMPI_COMM_WORLD_RANK + OMPI_COMM_WORLD_SIZE (+ _LOCAL_RANK, _LOCAL_SIZE)
//   none      a world of one with an in-process store
// The store: FASTRUN_STORE when set (under a foreign launcher only connected to: a shm:// or
// file:// store that does not exist when a rank joins is a ConfigError at once, since nothing in
// such a job creates one later); else, under a real torchrun whose agent serves its own
// c10d TCPStore on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), every rank connects to
// that store (c10d://MASTER_ADDR:MASTER_PORT) under a key prefix of fastrun's own (when it
// speaks another protocol version, a job on one node falls back to an shm store rank 0 hosts,
// named after the port and restart count); else, with
// MASTER_ADDR and MASTER_PORT, rank 0 hosts a tcp store there and the others connect; else,
// under srun or mpirun, the same at the host and port the engine's variables give
// (cluster/engine_job.h); else (world > 1) a ConfigError.
#include <optional>
#include <string>

namespace fastrun::join_detail {

struct Layout {
  std::string source;  // "fastrun", "torchrun", "slurm", "openmpi", "none"
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;        // unset: computed from host names at join
  std::optional<int> local_world_size;  // idem
  std::optional<int> node_rank;         // idem
  std::string store_address;            // "" = in-process store (world of one)
  std::string store_prefix;             // keys go under this prefix ("" = none): a store others use too
  std::string fallback_store;           // when store_address cannot be used: this one, hosted by rank 0
  bool host_store = false;              // this rank hosts store_address (torchrun-style rank 0)
  bool store_by_hand = false;           // FASTRUN_STORE under torchrun, srun, mpirun: nothing in the job hosts it
  std::string store_token;              // token for a self-hosted tcp store ("" = FASTRUN_STORE_TOKEN)
  std::string run_id;
  std::string store_origin;             // where a derived store address came from ("" = given)
  std::string master_host;              // host:port of a tcp store from MASTER_ADDR/PORT or the engine
  int master_port = 0;                  //   (join binds gloo towards it), else ""
};

// The token of a store whose users share no secret (documented as no protection): derived from
// its address, so that every rank and launcher computes the same one.
std::string address_token(const std::string& host, int port);

// Reads the environment. ConfigError naming the variable for malformed or inconsistent values.
Layout detect_layout();

}  // namespace fastrun::join_detail
