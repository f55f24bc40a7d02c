// What a tcp store server pays for its clients: an idle connection that never authenticates
// costs next to nothing (no per-connection read buffer), and no socket of the server leaks
// into the processes the host starts (close-on-exec), so a finished job never keeps its port.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/tcp/hosted.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<tcp_store::HostedTcpStore> host() {
  StoreOptions o;
  o.token = "cost-test-token";
  auto h = host_store("tcp://127.0.0.1:0", o);
  return std::unique_ptr<tcp_store::HostedTcpStore>(static_cast<tcp_store::HostedTcpStore*>(h.release()));
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void wait_for_connections(const tcp_store::HostedTcpStore& h, std::uint64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (h.stats().connections < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
}

}  // namespace

TEST_CASE("tcp store: an idle unauthenticated connection costs the server almost nothing", "[store][tcp][cost]") {
  auto h = host();
  {
    StoreOptions o;
    o.token = "cost-test-token";
    auto warm = connect_store(h->address(), o);
    warm->set("k", to_bytes("v"));
  }
  constexpr int kIdle = 2000;
  const long before = rss_kib();
  std::vector<int> fds;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = raw_connect(h->port());
    if (fd >= 0) fds.push_back(fd);
  }
  REQUIRE(fds.size() == static_cast<std::size_t>(kIdle));
  wait_for_connections(*h, kIdle);
  REQUIRE(h->stats().connections >= kIdle);
  const long after = rss_kib();
  const double per_connection = static_cast<double>(after - before) / kIdle;
  INFO("RSS " << before << " KiB -> " << after << " KiB: " << per_connection << " KiB per idle connection");
  CHECK(per_connection < 4.0);  // was 64 KiB: a read buffer per connection, never given back
  for (int fd : fds) ::close(fd);
}

TEST_CASE("tcp store: the server's sockets are close-on-exec", "[store][tcp][cloexec]") {
  auto h = host();
  StoreOptions o;
  o.token = "cost-test-token";
  auto client = connect_store(h->address(), o);
  client->set("k", to_bytes("v"));  // the server has accepted this connection
  int sockets = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  REQUIRE(dir);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char target[256] = {};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    if (::readlink(path.c_str(), target, sizeof target - 1) <= 0) continue;
    if (std::string(target).rfind("socket:", 0) != 0) continue;
    const int fd = std::atoi(e->d_name);
    ++sockets;
    INFO("fd " << fd << " " << target);
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  }
  ::closedir(dir);
  CHECK(sockets >= 3);  // the listener, the accepted connection, the client
}
