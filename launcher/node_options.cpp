#include "fastrun/launcher/node_options.h"

#include <fmt/format.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"

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
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == ':' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

NodePlan plan_nodes(const NodeOptions& flags) {
  std::string nnodes_from, rank_from, addr_from, port_from;
  const auto read_int = [](const env::Variable& v) { return static_cast<int>(env::get_int(v)); };
  const auto read_string = [](const env::Variable& v) { return env::get_string(v); };
  const auto nnodes = either(flags.nnodes, env::kNnodes, read_int, nnodes_from, "--nnodes");
  const auto node_rank = either(flags.node_rank, env::kNodeRank, read_int, rank_from, "--node-rank");
  const auto addr = either(flags.master_addr, env::kMasterAddr, read_string, addr_from, "--master-addr");
  const auto port = either(flags.master_port, env::kMasterPort, read_int, port_from, "--master-port");

  NodePlan plan;
  if (nnodes && (*nnodes < 1 || *nnodes > kMaxNodes))
    throw ConfigError(fmt::format("{} {}: give a number of nodes from 1 to {}", nnodes_from, *nnodes, kMaxNodes));
  const bool multi = (nnodes && *nnodes > 1) || addr || port;
  if (!multi) {
    // One node: a node rank other than 0 is a mistake (a job script for N nodes run with 1).
    if (node_rank && *node_rank != 0)
      throw ConfigError(fmt::format("{} {} needs --nnodes (FASTRUN_NNODES) of at least {}; this job has 1 node",
                                    rank_from, *node_rank, *node_rank + 1));
    return plan;
  }
  if (!nnodes)
    throw ConfigError(fmt::format("{} was given without --nnodes N (FASTRUN_NNODES): say how many nodes the job has",
                                  addr ? addr_from : port_from));
  plan.nnodes = *nnodes;
  if (plan.nnodes > 1) {
    const auto missing = [&](const char* what) {
      return ConfigError(fmt::format("{} {}: a job of several nodes needs {} on every node; see docs/multinode.md",
                                     nnodes_from, plan.nnodes, what));
    };
    if (!node_rank) throw missing("--node-rank K (FASTRUN_NODE_RANK), K from 0 to N-1");
    if (!addr) throw missing("--master-addr HOST (FASTRUN_MASTER_ADDR), the host of node 0");
    if (!port) throw missing("--master-port PORT (FASTRUN_MASTER_PORT), 1-65535");
  }
  plan.node_rank = node_rank.value_or(0);
  if (plan.node_rank < 0 || plan.node_rank >= plan.nnodes)
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
  const int min_port = plan.nnodes > 1 ? 1 : 0;
  if (p < min_port || p > 65535)
    throw ConfigError(fmt::format("{} {}: give a port from {} to 65535{}", port_from, p, min_port,
                                  plan.nnodes > 1 ? " that every node can reach on the master" : ""));
  plan.master_port = static_cast<std::uint16_t>(p);
  return plan;
}

}  // namespace fastrun::launcher
