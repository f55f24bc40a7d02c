// The single declaration of every FASTRUN_* variable. Add new ones here (and to the extern
// list in registry.h and to all()); nothing else in fastrun may call getenv on a FASTRUN_ name.
#include "fastrun/runtime/env/registry.h"

namespace fastrun::env {

// clang-format off
const Variable kRank           {"FASTRUN_RANK", Type::integer, "", "Global rank of this process (set by the launcher).", {}, 0, INT32_MAX};
const Variable kWorldSize      {"FASTRUN_WORLD_SIZE", Type::integer, "", "Number of ranks in the job.", {}, 1, INT32_MAX};
const Variable kLocalRank      {"FASTRUN_LOCAL_RANK", Type::integer, "", "Rank of this process on its node.", {}, 0, INT32_MAX};
const Variable kLocalWorldSize {"FASTRUN_LOCAL_WORLD_SIZE", Type::integer, "", "Number of ranks on this node.", {}, 1, INT32_MAX};
const Variable kNodeRank       {"FASTRUN_NODE_RANK", Type::integer, "0", "Index of this node (the launcher reads it like --node-rank).", {}, 0, INT32_MAX};
const Variable kNnodes         {"FASTRUN_NNODES", Type::integer, "1", "Number of nodes in the job (the launcher reads it like --nnodes).", {}, 1, INT32_MAX};
const Variable kMasterAddr     {"FASTRUN_MASTER_ADDR", Type::string, "", "Host of node 0, where its launcher hosts the job's TCP store (like --master-addr)."};
const Variable kMasterPort     {"FASTRUN_MASTER_PORT", Type::integer, "", "Port of the job's TCP store on node 0 (like --master-port).", {}, 0, 65535};
const Variable kRunId          {"FASTRUN_RUN_ID", Type::string, "", "Id shared by all ranks of one job; names its store and logs."};
const Variable kStore          {"FASTRUN_STORE", Type::string, "", "Rendezvous store address: shm://NAME, file://PATH or tcp://HOST:PORT."};
const Variable kStoreToken     {"FASTRUN_STORE_TOKEN", Type::string, "", "Secret every client presents to the job's TCP store (set by the launcher)."};
const Variable kGlobalSeed     {"FASTRUN_GLOBAL_SEED", Type::integer, "", "Base seed, equal on every rank; samplers and per-rank seeds derive from it.", {}, 0, INT64_MAX};
const Variable kTimeout        {"FASTRUN_TIMEOUT", Type::seconds, "300", "Seconds to wait for all ranks to join (store waits, process-group set-up)."};
const Variable kOpTimeout      {"FASTRUN_OP_TIMEOUT", Type::seconds, "600", "Seconds a single collective may take before it fails."};
const Variable kLogLevel       {"FASTRUN_LOG_LEVEL", Type::choice, "warn", "Verbosity of fastrun's own log lines.", "error|warn|info|debug"};
const Variable kNoSync         {"FASTRUN_NO_SYNC", Type::integer, "0", "0: normal; 1: barriers are no-ops; 2: every collective is local.", {}, 0, 2};
const Variable kBackend        {"FASTRUN_BACKEND", Type::choice, "auto", "Collective backend of the default process group.", "auto|shm|gloo|nccl"};
const Variable kGlooHost       {"FASTRUN_GLOO_HOST", Type::string, "127.0.0.1", "Interface name, address or host name of this machine that Gloo binds and advertises (multi-node, or a tcp store at MASTER_ADDR or from srun/mpirun: default is the address that routes to the store's host)."};
const Variable kShmStoreBytes  {"FASTRUN_SHM_STORE_BYTES", Type::integer, "67108864", "Size of a shm:// store segment in bytes.", {}, 65536, INT64_MAX};
const Variable kRuntimeDir     {"FASTRUN_RUNTIME_DIR", Type::string, "", "Private (0700) directory for file stores and markers; default $XDG_RUNTIME_DIR or /tmp/fastrun-<uid>."};
const Variable kNcclOnError    {"FASTRUN_NCCL_ON_ERROR", Type::choice, "exit", "After an NCCL error or op timeout (failure published, communicator aborted): exit ends the rank 5 s later unless it ended itself; raise only fails the waits.", "exit|raise"};
const Variable kDebug          {"FASTRUN_DEBUG", Type::choice, "off", "sequence: before each collective the ranks compare the op (number, name, dtype, count, root, reduce op) and the first mismatch fails on every rank naming what each called; off: no check.", "off|sequence"};
// clang-format on

const std::vector<const Variable*>& all() {
  static const std::vector<const Variable*> vars = {
      &kRank,      &kWorldSize, &kLocalRank, &kLocalWorldSize, &kNodeRank,     &kNnodes,
      &kMasterAddr, &kMasterPort,
      &kRunId,     &kStore,     &kStoreToken, &kGlobalSeed,    &kTimeout,      &kOpTimeout,
      &kLogLevel,  &kNoSync,    &kBackend,   &kGlooHost,       &kShmStoreBytes, &kRuntimeDir,
      &kNcclOnError, &kDebug,
  };
  return vars;
}

}  // namespace fastrun::env
