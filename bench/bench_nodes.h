#pragma once
// What the subjects that time multi-node jobs share (launch, restart): K launchers, each started
// on its node's host through a prefix (`nsenter -t PID -n -u -m --`, given by bench/on_hosts.sh),
// or all on this host with master 127.0.0.1.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace fastrun::bench {

struct Nodes {
  int count = 0;                                  // 0: the one-node modes only
  std::vector<std::vector<std::string>> prefix;  // per node, the words that start a command on its host
  std::string master = "127.0.0.1";

  // Node k's prefix; empty when every launcher runs here.
  std::vector<std::string> on(int k) const;
  // The table's note on where the nodes run.
  std::string where() const;
};

// --nodes K (at least `min_nodes`), --on-node PREFIX (once per node), --master-addr ADDR.
void add_node_flags(CLI::App& app, Nodes& nodes, int min_nodes, const std::string& nodes_help);
// A ConfigError naming `subject` when --on-node is given, but not once per node.
void check_nodes(const Nodes& nodes, const std::string& subject);

// A port nothing listens on now (the kernel's pick on 127.0.0.1; a fresh namespace has every
// port free), so that each run's store binds anew.
int free_port();

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b);

}  // namespace fastrun::bench
