#pragma once
// One launcher per node (docs/multinode.md): which node this launcher is, and where node 0 hosts
// the job's TCP store. From the flags --nnodes, --node-rank, --master-addr, --master-port, each
// falling back to its FASTRUN_* variable. Pure and tested; plan_nodes() is the only check.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace fastrun::launcher {

// As typed (CLI flags); nullopt = not given.
struct NodeOptions {
  std::optional<int> nnodes;      // --nnodes N, or MAX of --nnodes MIN:MAX
  std::optional<int> min_nnodes;  // MIN of --nnodes MIN:MAX (elastic membership); nullopt: = nnodes
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::optional<double> last_call;  // --last-call SECS (elastic membership); nullopt = FASTRUN_LAST_CALL
  bool store_only = false;      // --store-only: this launcher hosts the store and coordinates, runs no ranks
  bool external_store = false;  // --external-store: a `fastrun --store-only` hosts the store, not node 0
  // How each was given, for messages: the flag, or its variable (store_apart_from_env).
  std::string store_only_from = "--store-only";
  std::string external_store_from = "--external-store";
};

// Checked. multi_node() is false for the ordinary one-launcher job (shm store, nothing shared).
struct NodePlan {
  int nnodes = 1;                  // the most nodes the job runs on (MAX of --nnodes MIN:MAX)
  int min_nnodes = 1;              // the fewest it goes on with after losing nodes (= nnodes: fixed)
  int node_rank = 0;
  std::string master_addr;         // host of node 0 (multi_node only)
  std::uint16_t master_port = 0;   // port of the job's store there (0: one node, pick one)
  std::string master_from;         // where srun/mpirun's variables gave them ("" = flags or FASTRUN_*)
  // Elastic jobs: once MIN nodes are there, node 0 starts the job on those present this long after
  // the MIN-th arrived (at once when all MAX are there): torchrun's last call (node_rendezvous.h).
  std::chrono::milliseconds last_call{30000};
  // --store-only / --external-store (docs/multinode.md, "A store outside the job"): the job's
  // store and its coordinator (what node 0's launcher otherwise does: the node rendezvous, the
  // verdicts, the members of each attempt) live in a launcher that runs no ranks, so that every
  // compute node, node 0 included, can be lost. node_rank is -1 in the store-only launcher.
  bool store_only = false;
  bool external_store = false;
  bool multi_node() const { return !master_addr.empty(); }
  // Whether this launcher hosts the job's store and decides for the job (node_attempts.h).
  bool coordinates() const { return store_only || (node_rank == 0 && !external_store); }
  // Whether the coordinator runs no ranks (it is not one of the job's nodes).
  bool coordinator_apart() const { return store_only || external_store; }
  // --nnodes MIN:MAX with MIN < MAX: a lost node shrinks the job instead of ending it (node_attempts.h).
  bool elastic() const { return min_nnodes < nnodes; }
};

constexpr int kMaxNodes = 65536;

// --nnodes's value: "N" (a fixed set of N nodes, N:N) or "MIN:MAX" (elastic membership, as
// torchrun's --nnodes MIN:MAX), 1 <= MIN <= MAX <= kMaxNodes. Fills flags.nnodes (N or MAX) and
// flags.min_nnodes (MIN; only for the colon form). ConfigError naming the value and what is accepted.
void parse_nnodes(const std::string& text, NodeOptions& flags);

// Sets store_only and external_store from FASTRUN_STORE_ONLY and FASTRUN_EXTERNAL_STORE where
// their flags were not given (a flag wins), naming the variable in *_from. Before the other
// checks: --store-only changes what the command line must hold (no PROGRAM).
void store_apart_from_env(NodeOptions& flags);

// Fills what the flags leave unset from FASTRUN_NNODES, FASTRUN_NODE_RANK, FASTRUN_MASTER_ADDR
// and FASTRUN_MASTER_PORT, then checks the combination. The job is multi-node when more than one
// node is asked for or a master address/port is given; then --nnodes and (for more than one
// node) --node-rank, --master-addr and --master-port are all required. Throws ConfigError naming
// the flag or variable, its value and what is accepted.
NodePlan plan_nodes(const NodeOptions& flags);

}  // namespace fastrun::launcher
