#include "fastrun/runtime/join/peer_info.h"

#include <unistd.h>

#include <sstream>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/host.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/os/process.h"

namespace fastrun {

std::string PeerInfo::encode() const { return fmt::format("{}\t{}\t{}\t{}", host, pid, device, node); }

PeerInfo PeerInfo::decode(int rank, const std::string& text) {
  PeerInfo info;
  info.rank = rank;
  std::istringstream in(text);
  std::string pid, node;
  if (!std::getline(in, info.host, '\t') || !std::getline(in, pid, '\t') || !std::getline(in, info.device, '\t'))
    throw StoreError(fmt::format("{}: malformed value '{}' (expected 'host<TAB>pid<TAB>device[<TAB>node]')",
                                 peer_key(rank), text));
  try {
    info.pid = std::stol(pid);
    if (std::getline(in, node)) info.node = std::stoi(node);
  } catch (const std::exception&) {
    throw StoreError(fmt::format("{}: malformed pid '{}' in '{}'", peer_key(rank), pid, text));
  }
  return info;
}

std::string this_host_name() { return os::host_name().value_or("localhost"); }

PeerInfo local_peer_info(int rank, const std::string& device_identity) {
  return PeerInfo{rank, this_host_name(), static_cast<long>(getpid()), device_identity};
}

std::vector<PeerInfo> read_peer_infos(Store& store, const std::vector<int>& ranks) {
  std::vector<PeerInfo> out;
  for (int r : ranks) {
    try {
      if (store.check({peer_key(r)})) out.push_back(PeerInfo::decode(r, to_string(store.get(peer_key(r)))));
    } catch (const std::exception&) {
    }
  }
  return out;
}

namespace {

// Gone, or a zombie / dead entry in /proc (a killed child stays a zombie until its parent reaps it).
bool process_dead(long pid) {
  const auto stat = os::proc_stat(pid);
  return !stat || stat->state == 'Z' || stat->state == 'X';
}

}  // namespace

std::vector<int> dead_local_peers(const std::vector<PeerInfo>& peers, Duration grace) {
  const std::string host = this_host_name();
  constexpr os::Backoff kEvery20ms{std::chrono::milliseconds(20), std::chrono::milliseconds(20)};
  std::vector<int> dead;
  os::poll_until(std::chrono::steady_clock::now() + grace, kEvery20ms, [&] {
    dead.clear();
    for (const auto& p : peers)
      if (p.host == host && p.pid != getpid() && process_dead(p.pid)) dead.push_back(p.rank);
    return !dead.empty();
  });
  return dead;
}

}  // namespace fastrun
