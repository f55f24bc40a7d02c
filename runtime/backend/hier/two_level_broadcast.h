#pragma once
// The two-level broadcast's body (blocking, on the thread that runs the hier op):
//   1. the root's node: the root broadcasts to its node's ranks (shm, from its local rank), so
//      that node's leader holds the data too;
//   2. leaders: the root node's leader sends it round the leaders' ring (ring_ops.h);
//   3. every other node: its leader broadcasts to its ranks (shm, root 0).
// One copy of the buffer crosses into each other node, where gloo's flat broadcast sends the
// root's buffer to every rank of the job over TCP.
#include "fastrun/runtime/backend/hier/chain_all_reduce.h"

namespace fastrun::hier {

// The node (index into layout.first) holding group rank `rank`.
int node_of_rank(const NodeLayout& layout, int rank);

void two_level_broadcast(const ChainParts& parts, BufferView buffer, int root, Duration timeout);

}  // namespace fastrun::hier
