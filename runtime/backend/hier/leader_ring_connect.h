#pragma once
// The leaders' ring of TCP connections (leader_ring.h), set up through the group's store: each
// leader listens on its host's address, publishes "ring/<index>" = host, port and a random
// token, connects to the next leader and sends it that leader's token and its own index, and
// accepts from the previous leader (a connection that does not present this leader's token and
// the previous index is closed and the wait goes on). Connecting before accepting cannot
// deadlock: a connection completes in the listener's backlog.
#include <string>
#include <vector>

#include "fastrun/runtime/duration.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::hier {

struct RingPeers {
  int index = 0;                 // this leader's place in the ring (its node's index)
  std::vector<int> global_rank;  // of each leader, in ring order, for messages
  std::string label;             // the group's label, "rank R in group 'G' (hier)", for messages
  int rail = 0;                  // the members' local rank: 0 for the leaders (chain_all_reduce.h)
  int count() const { return static_cast<int>(global_rank.size()); }
  int next() const { return (index + 1) % count(); }
  int prev() const { return (index + count() - 1) % count(); }
  // "rank 2 (node 1's leader)", or on rail 1 "rank 3 (node 1's local rank 1)"
  std::string name(int leader) const;
};

struct RingSockets {
  os::UniqueFd to_next, from_prev;  // connected, non-blocking, TCP_NODELAY
};

// `host`: the numeric address this leader listens on (the one its gloo binds). TimeoutError
// naming the leader that did not publish or connect within `timeout`.
RingSockets connect_ring(Store& store, const std::string& host, const RingPeers& peers, Duration timeout);

}  // namespace fastrun::hier
