#pragma once
// Step 3 of join(): every rank publishes its PeerInfo and waits for everyone else's.
#include <memory>
#include <vector>

#include "fastrun/runtime/process_group/peer_info.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::join_detail {

// Publishes `self` (under peer_key and "fastrun/join/<generation>/<rank>") and returns every
// rank's info in rank order. TimeoutError after `timeout` listing the ranks that never arrived;
// PeerFailure as soon as the job's failure key (kFailureKey) is set, e.g. by the launcher when a
// rank ended before it joined.
std::vector<PeerInfo> exchange_peer_infos(const std::shared_ptr<Store>& job_store, const PeerInfo& self,
                                          int world_size, int generation, Duration timeout);

// ConfigError naming both ranks when two ranks on one host report the same device (not "cpu").
void check_distinct_devices(const std::vector<PeerInfo>& peers);

}  // namespace fastrun::join_detail
