#pragma once
// The leaders' step of the two-level broadcast and all-gather, over their ring (leader_ring.h).
// Called by leaders only, after LeaderRing::begin of the op.
#include "fastrun/runtime/backend/hier/leader_ring.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::hier {

// From the leader at `root` (ring index) round the ring to every other leader, in chunks of
// kChainChunkBytes that each leader passes on as they arrive (the last before the root keeps
// them).
void ring_broadcast(LeaderRing& ring, BufferView buffer, int root, const Deadline& deadline);

// Every leader's block to every other: `blocks[k]` is leader k's block (this leader's filled in,
// the others are written). In K-1 steps each leader passes on the block it received last (its
// own first), so each block crosses each link once at most.
void ring_all_gather(LeaderRing& ring, const std::vector<BufferView>& blocks, const Deadline& deadline);

}  // namespace fastrun::hier
