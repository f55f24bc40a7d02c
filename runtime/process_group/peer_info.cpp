#include "fastrun/runtime/process_group/peer_info.h"

#include <unistd.h>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/host.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/store/record.h"

namespace fastrun {

// The record's one encoding and one decoding (runtime/store/record.h): a JSON object, so that a
// host or device name with a tab in it reads back whole.
std::string PeerInfo::place() const { return fmt::format("{}#{}", host, node); }

std::string PeerInfo::encode() const {
  return record::Json{{"host", host}, {"pid", pid}, {"device", device}, {"node", node}}.dump();
}

PeerInfo PeerInfo::decode(int rank, const std::string& text) {
  const std::string key = peer_key(rank);
  const record::Json r = record::parse(key, text);
  PeerInfo info;
  info.rank = rank;
  info.host = record::text(r, key, "host");
  info.pid = static_cast<long>(record::integer(r, key, "pid"));
  info.device = record::text(r, key, "device");
  const std::int64_t node = record::integer(r, key, "node");
  if (node < -1 || node > INT32_MAX)
    throw StoreError(fmt::format("{}: field 'node' of the record is {}; accepted: -1 (unknown) to {}", key, node, INT32_MAX));
  info.node = static_cast<int>(node);
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
