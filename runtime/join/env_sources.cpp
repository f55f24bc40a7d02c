#include "fastrun/runtime/join/env_sources.h"

#include <fmt/format.h>

#include "fastrun/runtime/cluster/engine_job.h"
#include "fastrun/runtime/cluster/foreign_env.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"

namespace fastrun::join_detail {
namespace {

using cluster::foreign_int;
using cluster::getenv_opt;

std::optional<int> fastrun_int(const env::Variable& v) {
  if (!env::raw(v)) return std::nullopt;
  return static_cast<int>(env::get_int(v));
}

void check_rank(const Layout& l, const char* rank_name, const char* size_name) {
  if (l.rank >= l.world_size)
    throw ConfigError(fmt::format("{}={} is not valid with {}={}: a rank must be below the world size", rank_name,
                                  l.rank, size_name, l.world_size));
}

// A foreign launcher's variables (nullptr: it sets no such variable).
struct ForeignSource {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
  const char* node_rank;
};

constexpr ForeignSource kForeignSources[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},  // also PyTorchJob
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_NODEID"},  // srun
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},  // mpirun
};

// torchrun's agent serves its own c10d TCPStore on MASTER_PORT and says so with
// TORCHELASTIC_USE_AGENT_STORE=True (its static rendezvous): the port is taken, by a store
// every rank of every node can reach.
bool torchrun_agent_holds_master_port(const Layout& l) {
  return l.source == "torchrun" && getenv_opt("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
}

// The engine behind a foreign source, when it is one (srun, mpirun).
std::optional<cluster::EngineJob> engine_of(const std::string& source) {
  if (source == "slurm") return cluster::slurm_step();
  if (source == "openmpi") return cluster::openmpi_job();
  return std::nullopt;
}

// The store: FASTRUN_STORE when given (hosted by whoever set it: the fastrun launcher, a test).
// Else under a real torchrun the agent's c10d store, under a prefix of fastrun's own (torch's
// keys live there too) per run and restart. Else rank 0 hosts one at tcp://MASTER_ADDR:MASTER_PORT,
// where under srun or mpirun the engine says where task 0 runs (cluster/engine_job.h) and each
// of MASTER_ADDR and MASTER_PORT wins over the engine's value when set.
void pick_store(Layout& l) {
  if (auto s = env::find_string(env::kStore); s && !s->empty()) {
    l.store_address = *s;
    l.store_by_hand = l.source != "fastrun";  // the fastrun launcher hosts the store it sets; nothing else does
    return;
  }
  auto addr = getenv_opt("MASTER_ADDR");
  auto port = foreign_int("MASTER_PORT", 1, 65535);
  if (port && torchrun_agent_holds_master_port(l)) {
    if (!addr)
      throw ConfigError(fmt::format("rank {} of {} (torchrun environment): TORCHELASTIC_USE_AGENT_STORE=True and "
                                    "MASTER_PORT={} are set but MASTER_ADDR is not: torchrun sets both",
                                    l.rank, l.world_size, *port));
    l.store_address = fmt::format("c10d://{}:{}", *addr, *port);
    l.store_prefix = fmt::format("fastrun/{}/attempt_{}", getenv_opt("TORCHELASTIC_RUN_ID").value_or("none"),
                                 foreign_int("TORCHELASTIC_RESTART_COUNT", 0).value_or(0));
    l.master_host = *addr;
    l.master_port = *port;
    // A torch 2.x agent speaks a newer protocol than fastrun's c10d client: on one node, an shm
    // store (what fastrun used here before it spoke c10d) still works.
    if (l.world_size == 1 || l.local_world_size == l.world_size)
      l.fallback_store = fmt::format("shm://torchrun-{}-{}", *port,
                                     foreign_int("TORCHELASTIC_RESTART_COUNT", 0).value_or(0));
    return;
  }
  const auto engine = addr && port ? std::nullopt : engine_of(l.source);  // only when needed
  if (engine) {
    if (!addr && l.rank == 0 && engine->node && *engine->node != 0)
      throw ConfigError(fmt::format("rank 0 runs on node {} of the srun step, not on its first node {}, where the "
                                    "others look for the store: set MASTER_ADDR to rank 0's host",
                                    *engine->node, engine->master_host));
    l.store_origin = fmt::format("from {}; set MASTER_ADDR and MASTER_PORT to choose another", engine->master_from);
    if (!addr) addr = engine->master_host;
    if (!port) port = engine->master_port;
  }
  if (addr && port) {
    l.store_address = fmt::format("tcp://{}:{}", *addr, *port);
    l.host_store = l.rank == 0;
    // Every rank must present the same secret and none can learn rank 0's random one: derive
    // it from the shared address unless FASTRUN_STORE_TOKEN gives one (documented).
    if (!env::find_string(env::kStoreToken)) l.store_token = address_token(*addr, *port);
    l.master_host = *addr;
    l.master_port = *port;
    return;
  }
  // SLURM_PROCID and SLURM_NTASKS are in an sbatch script's environment too: say so.
  const bool batch_script = l.source == "slurm" && !cluster::first_set({"SLURM_STEP_ID", "SLURM_STEPID"});
  if (l.world_size > 1)
    throw ConfigError(fmt::format("rank {} of {} ({} environment): no rendezvous store: set MASTER_ADDR and "
                                  "MASTER_PORT, the same on every rank (rank 0 then hosts a tcp store there), or "
                                  "FASTRUN_STORE to a store that something else already hosts{}",
                                  l.rank, l.world_size, l.source,
                                  batch_script ? "; SLURM_PROCID without SLURM_STEP_ID is the batch script itself, "
                                                 "not a task of an srun step: start the ranks with srun ./train"
                                               : ""));
}

}  // namespace

std::string address_token(const std::string& host, int port) { return fmt::format("fastrun-master:{}:{}", host, port); }

Layout detect_layout() {
  Layout l;
  l.run_id = env::find_string(env::kRunId).value_or("");
  // 1. fastrun's own variables.
  if (auto rank = fastrun_int(env::kRank)) {
    l.source = "fastrun";
    l.rank = *rank;
    auto size = fastrun_int(env::kWorldSize);
    if (!size) throw ConfigError(fmt::format("FASTRUN_RANK={} is set but FASTRUN_WORLD_SIZE is not", *rank));
    l.world_size = *size;
    check_rank(l, "FASTRUN_RANK", "FASTRUN_WORLD_SIZE");
    l.local_rank = fastrun_int(env::kLocalRank);
    l.local_world_size = fastrun_int(env::kLocalWorldSize);
    l.node_rank = fastrun_int(env::kNodeRank);
    pick_store(l);
    return l;
  }
  // 2-4. Foreign launchers, in order of precedence.
  for (const auto& f : kForeignSources) {
    auto rank = foreign_int(f.rank, 0);
    if (!rank) continue;
    l.source = f.source;
    l.rank = *rank;
    auto size = foreign_int(f.world_size, 1);
    if (!size) throw ConfigError(fmt::format("{}={} is set but {} is not", f.rank, *rank, f.world_size));
    l.world_size = *size;
    check_rank(l, f.rank, f.world_size);
    if (f.local_rank) l.local_rank = foreign_int(f.local_rank, 0);
    if (f.local_world_size) l.local_world_size = foreign_int(f.local_world_size, 1);
    if (f.node_rank) l.node_rank = foreign_int(f.node_rank, 0);
    if (l.source == "slurm")
      if (const auto step = cluster::slurm_step()) l.local_world_size = step->local_tasks;  // no count of its own
    pick_store(l);
    return l;
  }
  // 5. Nothing: a world of one.
  l.source = "none";
  if (auto s = env::find_string(env::kStore); s && !s->empty()) l.store_address = *s;
  return l;
}

}  // namespace fastrun::join_detail
