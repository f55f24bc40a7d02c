#include "fastrun/launcher/node_options.h"

#include <cmath>

#include <fmt/format.h>

#include "fastrun/runtime/cluster/engine_job.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/safe_name.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun::launcher {
namespace {

// The flag's value, else the variable's; `from` says which, for error messages.
template <typename T, typename Read>
std::optional<T> either(const std::optional<T>& flag, const env::Variable& var, Read read, std::string& from,
                        const char* flag_name) {
  if (flag) {
    from = flag_name;
    return flag;
  }
  from = std::string(var.name);
  if (!env::raw(var)) return std::nullopt;
  return read(var);
}

// Letters, digits, '.', '-', ':' (IPv6) and '_' (some cluster host names): enough to reject a
// pasted URL, a space or a stray "tcp://" before anything starts.
bool plausible_host(const std::string& h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    if (!os::is_name_char(c) && c != ':') return false;
  }
  return true;
}

// Under srun or mpirun (cluster/engine_job.h), each launcher is one of the engine's tasks: one
// node each. Fills --nnodes and --node-rank from it, refusing flags that contradict it; nullopt
// when there is no engine or it started one launcher (a job on this node only).
std::optional<cluster::EngineJob> engine_nodes(std::optional<int>& nnodes, std::string& nnodes_from,
                                               std::optional<int>& node_rank, std::string& rank_from) {
  auto job = cluster::engine_job();
  if (!job || job->ntasks == 1) return std::nullopt;
  // Open MPI exports no node id: each launcher is a node of its own (two on one host count as
  // two nodes, as with --nnodes by hand). Slurm: one launcher per node, its node id.
  int engine_nnodes = job->ntasks, engine_rank = job->task;
  std::string engine_nnodes_from = job->ntasks_from, engine_rank_from = "OMPI_COMM_WORLD_RANK";
  if (job->engine == "slurm") {
    if (job->ntasks != job->nnodes)
      throw ConfigError(fmt::format(
          "srun started {} tasks on {} nodes ({}={}, {}={}), but fastrun runs one launcher per node: use srun "
          "--ntasks-per-node=1 fastrun ..., or start the ranks without fastrun: srun ./train (one task per rank)",
          job->ntasks, job->nnodes, job->ntasks_from, job->ntasks, job->nnodes_from, job->nnodes));
    engine_nnodes = job->nnodes;
    engine_rank = job->node.value_or(0);
    engine_nnodes_from = job->nnodes_from;
    engine_rank_from = job->node_from;
  }
  if (nnodes && *nnodes != engine_nnodes)
    throw ConfigError(fmt::format("{} {} contradicts {}={} of the {} job this launcher runs in; leave it out",
                                  nnodes_from, *nnodes, engine_nnodes_from, engine_nnodes, job->engine));
  if (node_rank && *node_rank != engine_rank)
    throw ConfigError(fmt::format("{} {} contradicts {}={} of the {} job this launcher runs in; leave it out",
                                  rank_from, *node_rank, engine_rank_from, engine_rank, job->engine));
  nnodes = engine_nnodes;
  nnodes_from = engine_nnodes_from;
  node_rank = engine_rank;
  rank_from = engine_rank_from;
  return job;
}

// --store-only and --external-store (node_options.h): the combinations that cannot work, each
// named, before anything starts. The store-only launcher is no node: a node rank is a mistake.
void check_store_apart(const NodeOptions& flags, const std::optional<int>& nnodes, const std::optional<int>& node_rank,
                       const std::string& rank_from, const std::optional<std::string>& addr,
                       const std::optional<int>& port) {
  const std::string& flag = flags.store_only ? flags.store_only_from : flags.external_store_from;
  if (flags.store_only && flags.external_store)
    throw ConfigError(fmt::format("{} and {} were both given: --store-only runs the job's store (and no ranks), "
                                  "--external-store is for the compute nodes that connect to it; give one",
                                  flags.store_only_from, flags.external_store_from));
  if (flags.store_only && node_rank)
    throw ConfigError(fmt::format("{} with {} {}: the store-only launcher is none of the job's nodes; "
                                  "leave the node rank out (compute nodes take 0 to MAX-1)",
                                  flag, rank_from, *node_rank));
  if (const auto engine = cluster::engine_job(); flags.store_only && engine && engine->ntasks > 1)
    throw ConfigError(fmt::format("{} under srun or mpirun: the engine starts one launcher per node, all compute "
                                  "nodes; start the store-only launcher on its own host by hand (docs/multinode.md)",
                                  flag));
  if (!nnodes)
    throw ConfigError(fmt::format("{} needs --nnodes N or MIN:MAX (FASTRUN_NNODES): the compute nodes of the job",
                                  flag));
  if (!addr) throw ConfigError(fmt::format("{} needs --master-addr HOST (FASTRUN_MASTER_ADDR): the store-only "
                                           "launcher's host, as every compute node reaches it", flag));
  if (!port || *port == 0)
    throw ConfigError(fmt::format("{} needs --master-port PORT (FASTRUN_MASTER_PORT), 1-65535: the port the "
                                  "store-only launcher listens on, the same on every node", flag));
}

}  // namespace

void store_apart_from_env(NodeOptions& flags) {
  if (!flags.store_only && env::get_int(env::kStoreOnly) == 1) {
    flags.store_only = true;
    flags.store_only_from = "FASTRUN_STORE_ONLY=1";
  }
  if (!flags.external_store && env::get_int(env::kExternalStore) == 1) {
    flags.external_store = true;
    flags.external_store_from = "FASTRUN_EXTERNAL_STORE=1";
  }
}

void parse_nnodes(const std::string& text, NodeOptions& flags) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    flags.nnodes =
        text::parse_flag_int("--nnodes", text, fmt::format("give a number of nodes from 1 to {}", kMaxNodes));
    flags.min_nnodes.reset();
    return;
  }
  const auto min = text::to_integer(std::string_view(text).substr(0, colon), 1, kMaxNodes);
  const auto max = text::to_integer(std::string_view(text).substr(colon + 1), 1, kMaxNodes);
  if (!min || !max || *min > *max)
    throw ConfigError(fmt::format("--nnodes '{}': give N or MIN:MAX, whole numbers with 1 <= MIN <= MAX <= {} "
                                  "(e.g. 2, or 2:4 for a job that goes on with 2 to 4 nodes)",
                                  text, kMaxNodes));
  flags.min_nnodes = static_cast<int>(*min);
  flags.nnodes = static_cast<int>(*max);
}

NodePlan plan_nodes(const NodeOptions& flags) {
  std::string nnodes_from, rank_from, addr_from, port_from;
  const auto read_int = [](const env::Variable& v) { return static_cast<int>(env::get_int(v)); };
  const auto read_string = [](const env::Variable& v) { return env::get_string(v); };
  auto nnodes = either(flags.nnodes, env::kNnodes, read_int, nnodes_from, "--nnodes");
  auto node_rank = either(flags.node_rank, env::kNodeRank, read_int, rank_from, "--node-rank");
  auto addr = either(flags.master_addr, env::kMasterAddr, read_string, addr_from, "--master-addr");
  auto port = either(flags.master_port, env::kMasterPort, read_int, port_from, "--master-port");

  const bool addr_given = addr.has_value(), port_given = port.has_value();
  if (flags.store_only || flags.external_store) check_store_apart(flags, nnodes, node_rank, rank_from, addr, port);
  const auto engine = flags.store_only ? std::nullopt : engine_nodes(nnodes, nnodes_from, node_rank, rank_from);
  if (engine) {
    if (!addr) {
      addr = engine->master_host;
      addr_from = engine->master_from;
    }
    if (!port) {
      port = engine->master_port;
      port_from = engine->master_from;
    }
  }

  NodePlan plan;
  // --last-call does nothing unless nodes may be missing at the start: given anyway, it is a
  // mistake about the job (MIN:MAX meant), not a flag to ignore. FASTRUN_LAST_CALL may stay set.
  const auto check_last_call = [&](const NodePlan& p) {
    if (flags.last_call && !p.elastic())
      throw ConfigError(fmt::format("--last-call {:g}: only a job of --nnodes MIN:MAX (MIN < MAX) waits for late "
                                    "nodes; this job has {} node{}",
                                    *flags.last_call, p.nnodes, p.nnodes == 1 ? "" : "s"));
  };
  if (nnodes && (*nnodes < 1 || *nnodes > kMaxNodes))
    throw ConfigError(fmt::format("{} {}: give a number of nodes from 1 to {}", nnodes_from, *nnodes, kMaxNodes));
  const bool multi = (nnodes && *nnodes > 1) || addr || port;
  if (!multi) {
    // One node: a node rank other than 0 is a mistake (a job script for N nodes run with 1).
    if (node_rank && *node_rank != 0)
      throw ConfigError(fmt::format("{} {} needs --nnodes (FASTRUN_NNODES) of at least {}; this job has 1 node",
                                    rank_from, *node_rank, *node_rank + 1));
    check_last_call(plan);
    return plan;
  }
  if (!nnodes)
    throw ConfigError(fmt::format("{} was given without --nnodes N (FASTRUN_NNODES): say how many nodes the job has",
                                  addr ? addr_from : port_from));
  plan.nnodes = *nnodes;
  plan.min_nnodes = flags.min_nnodes.value_or(plan.nnodes);
  check_last_call(plan);
  // srun and mpirun start a fixed set of launchers and end the step when one is lost.
  if (engine && plan.elastic())
    throw ConfigError(fmt::format("--nnodes {}:{}: under {} the engine fixes the nodes ({}={}); elastic membership "
                                  "needs launchers started by hand, or give --nnodes {}",
                                  plan.min_nnodes, plan.nnodes, engine->engine, nnodes_from, plan.nnodes, plan.nnodes));
  if (plan.nnodes > 1 && !flags.store_only) {
    const auto missing = [&](const char* what) {
      return ConfigError(fmt::format("{} {}: a job of several nodes needs {} on every node; see docs/multinode.md",
                                     nnodes_from, plan.nnodes, what));
    };
    if (!node_rank) throw missing("--node-rank K (FASTRUN_NODE_RANK), K from 0 to N-1");
    if (!addr) throw missing("--master-addr HOST (FASTRUN_MASTER_ADDR), the host of node 0");
    if (!port) throw missing("--master-port PORT (FASTRUN_MASTER_PORT), 1-65535");
  }
  plan.store_only = flags.store_only;
  plan.external_store = flags.external_store;
  plan.node_rank = flags.store_only ? -1 : node_rank.value_or(0);
  if (!flags.store_only && (plan.node_rank < 0 || plan.node_rank >= plan.nnodes))
    throw ConfigError(fmt::format("{} {}: give a node rank from 0 to {} ({} {})", rank_from, plan.node_rank,
                                  plan.nnodes - 1, nnodes_from, plan.nnodes));
  plan.master_addr = addr.value_or("127.0.0.1");
  if (!plausible_host(plan.master_addr))
    throw ConfigError(fmt::format("{} '{}': give a host name or an IP address (letters, digits, '.', '-', ':')",
                                  addr_from, plan.master_addr));
  if (plan.master_addr == "0.0.0.0" || plan.master_addr == "::")
    throw ConfigError(fmt::format("{} '{}': give node 0's address as the other nodes reach it, not a wildcard (it "
                                  "is also the MASTER_ADDR every rank gets)",
                                  addr_from, plan.master_addr));
  const int p = port.value_or(0);
  const int min_port = plan.nnodes > 1 || plan.coordinator_apart() ? 1 : 0;
  if (p < min_port || p > 65535)
    throw ConfigError(fmt::format("{} {}: give a port from {} to 65535{}", port_from, p, min_port,
                                  plan.nnodes > 1 ? " that every node can reach on the master" : ""));
  plan.master_port = static_cast<std::uint16_t>(p);
  const double last_call = flags.last_call ? *flags.last_call : env::get_seconds(env::kLastCall);
  plan.last_call = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(last_call * 1000)));
  if (engine && (!addr_given || !port_given)) plan.master_from = engine->master_from;
  return plan;
}

}  // namespace fastrun::launcher
