#include "bench_nodes.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/tools/flags/number_flags.h"

namespace fastrun::bench {

std::vector<std::string> Nodes::on(int k) const {
  return prefix.empty() ? std::vector<std::string>{} : prefix[static_cast<std::size_t>(k)];
}

std::string Nodes::where() const {
  return prefix.empty() ? "note: no --on-node: every launcher runs on this host, master 127.0.0.1 (no separate hosts)"
                        : fmt::format("note: each node on its own host, master {}", master);
}

void add_node_flags(CLI::App& app, Nodes& nodes, int min_nodes, const std::string& nodes_help) {
  flags::integer(app, "--nodes", nodes.count, nodes_help, min_nodes, 64);
  app.add_option_function<std::string>(
         "--on-node",
         [&nodes](const std::string& v) {
           std::istringstream words(v);
           nodes.prefix.emplace_back();
           for (std::string w; words >> w;) nodes.prefix.back().push_back(w);
         },
         "the words that start a command on node k's host, once per node in order (bench/on_hosts.sh); "
         "default: every launcher on this host")
      ->type_name("PREFIX")
      ->trigger_on_parse();  // once per --on-node
  app.add_option("--master-addr", nodes.master, "node 0's address as the other nodes reach it")->capture_default_str();
}

void check_nodes(const Nodes& nodes, const std::string& subject) {
  if (!nodes.prefix.empty() && static_cast<int>(nodes.prefix.size()) != nodes.count)
    throw ConfigError(fmt::format("{}: {} --on-node prefixes for --nodes {}; accepted: none, or one per node", subject,
                                  nodes.prefix.size(), nodes.count));
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("socket", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    ::close(fd);
    throw_errno("bind 127.0.0.1:0", e);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace fastrun::bench
