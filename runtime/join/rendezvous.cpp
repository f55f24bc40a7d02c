#include "fastrun/runtime/join/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/failure_watch.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/store/gather.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::join_detail {

std::vector<PeerInfo> exchange_peer_infos(const std::shared_ptr<Store>& job_store, const PeerInfo& self,
                                          int world_size, int generation, Duration timeout) {
  Store& store = *job_store;
  FailureWatch failure(job_store);
  // peer_key first: the launcher reads it to tell a rank that joined and left from one that
  // never joined (launcher/supervisor.cpp).
  store.set(peer_key(self.rank), to_bytes(self.encode()));

  // One all-gather round under "fastrun/join/<generation>" (runtime/store/gather.h): each rank
  // sets its arrival key (join_arrival_key) and counts itself in; the last arriver of each group
  // of ~sqrt(N) ranks aggregates the group, the last group publishes every rank's info in one
  // key that all wait on. O(N) requests in all; it was N checks, waits and gets per rank (N^2).
  // The wait is cut into slices so that a failure the job records meanwhile (a rank that ended
  // before it joined: its launcher records it) is seen within one, and at the deadline the
  // arrival keys are read once to name the ranks that never arrived.
  RoundOptions round;
  round.prefix = join_round_prefix(generation);
  round.rank = self.rank;
  round.size = world_size;
  round.timeout = timeout;
  round.poll = [&](const std::function<std::vector<int>()>& missing) {
    if (auto why = failure.poll()) {
      const std::vector<int> who = missing();
      throw PeerFailure(fmt::format("rank {}: joining failed: the job recorded a failure ('{}' = \"{}\"); {} of {} "
                                    "ranks had not arrived: [{}]",
                                    self.rank, kFailureKey, *why, who.size(), world_size, fmt::join(who, ", ")));
    }
  };
  round.on_timeout = [&](const std::vector<int>& missing) {
    if (missing.empty()) return;  // every rank arrived, none released: the round's own message says so
    throw TimeoutError(fmt::format(
        "rank {}: joining timed out after {:.3g} s: {} of {} ranks never arrived: [{}] (store {}; raise "
        "FASTRUN_TIMEOUT to wait longer, or check that those ranks started and use the same FASTRUN_STORE)",
        self.rank, std::chrono::duration<double>(timeout).count(), missing.size(), world_size,
        fmt::join(missing, ", "), store.describe()));
  };
  const std::vector<Bytes> values = store_all_gather(store, round, to_bytes(self.encode()));

  std::vector<PeerInfo> peers;
  peers.reserve(values.size());
  for (int r = 0; r < world_size; ++r)
    peers.push_back(r == self.rank ? self : PeerInfo::decode(r, to_string(values[static_cast<std::size_t>(r)])));
  return peers;
}

void check_distinct_devices(const std::vector<PeerInfo>& peers) {
  std::map<std::pair<std::string, std::string>, int> owner;
  for (const auto& p : peers) {
    if (p.device == "cpu") continue;
    auto [it, fresh] = owner.emplace(std::make_pair(p.host, p.device), p.rank);
    if (!fresh)
      throw ConfigError(fmt::format("ranks {} and {} are both on GPU {} of host {}: each rank needs its own device "
                                    "(check --devices / CUDA_VISIBLE_DEVICES)",
                                    it->second, p.rank, p.device, p.host));
  }
}

}  // namespace fastrun::join_detail
