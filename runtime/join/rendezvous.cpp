#include "fastrun/runtime/join/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/failure_watch.h"
#include "fastrun/runtime/process_group/process_group.h"

namespace fastrun::join_detail {

std::vector<PeerInfo> exchange_peer_infos(const std::shared_ptr<Store>& job_store, const PeerInfo& self,
                                          int world_size, int generation, Duration timeout) {
  Store& store = *job_store;
  FailureWatch failure(job_store);
  auto arrival_key = [&](int r) { return join_arrival_key(generation, r); };
  store.set(peer_key(self.rank), to_bytes(self.encode()));
  store.set(arrival_key(self.rank), to_bytes(self.encode()));

  // Block on the missing arrival keys: the store wakes a waiter as soon as a key is set (a
  // futex in shm, the server in tcp), so the last rank's arrival is seen at once. (This was a
  // sleep-poll from 2 ms doubling to 100 ms: with 32 ranks the early ones slept through the
  // last arrival for up to as long again as the launch took.) The wait is cut into slices so
  // that a failure the job records meanwhile is seen within one, and at the deadline we know
  // exactly which ranks are missing (and can say so).
  constexpr Duration kSlice = std::chrono::milliseconds(50);
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r)
    if (r != self.rank) missing.push_back(r);
  for (;;) {
    std::erase_if(missing, [&](int r) { return store.check({arrival_key(r)}); });
    if (missing.empty()) break;
    // A rank that ended before joining (its launcher records it), or failed: fail now, not at
    // the deadline.
    if (auto why = failure.poll()) {
      throw PeerFailure(fmt::format("rank {}: joining failed: the job recorded a failure ('{}' = \"{}\"); {} of {} "
                                    "ranks had not arrived: [{}]",
                                    self.rank, kFailureKey, *why, missing.size(), world_size, fmt::join(missing, ", ")));
    }
    const auto now = clock::now();
    if (now >= deadline) {
      throw TimeoutError(fmt::format(
          "rank {}: joining timed out after {:.3g} s: {} of {} ranks never arrived: [{}] (store {}; raise "
          "FASTRUN_TIMEOUT to wait longer, or check that those ranks started and use the same FASTRUN_STORE)",
          self.rank, std::chrono::duration<double>(timeout).count(), missing.size(), world_size,
          fmt::join(missing, ", "), store.describe()));
    }
    std::vector<std::string> keys;
    for (int r : missing) keys.push_back(arrival_key(r));
    try {
      store.wait(keys, std::min<Duration>(kSlice, Duration(deadline - now)));
    } catch (const TimeoutError&) {
      // The slice ended: check for a failure and the deadline, then wait again.
    }
  }

  std::vector<PeerInfo> peers;
  for (int r = 0; r < world_size; ++r)
    peers.push_back(r == self.rank ? self : PeerInfo::decode(r, to_string(store.get(arrival_key(r), timeout))));
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
