#pragma once
// The two-level all-gather's body (blocking, on the thread that runs the hier op). Each node's
// ranks are one contiguous range of group ranks (node_layout.h), so each node's inputs make one
// contiguous block of the output:
//   1. node: its ranks all-gather their inputs into the node's block (shm), so the leader holds it;
//   2. leaders: every leader's block goes to every other leader round their ring (ring_ops.h;
//      the blocks may differ in size);
//   3. node: the leader broadcasts the other nodes' blocks to its ranks (shm, root 0).
// Each block crosses into each other node once, where gloo's flat all-gather passes every rank's
// input through every rank of the ring over TCP.
#include "fastrun/runtime/backend/hier/chain_all_reduce.h"

namespace fastrun::hier {

// `output` holds group size × input.count elements (the caller checked the shapes).
void two_level_all_gather(const ChainParts& parts, BufferView input, BufferView output, Duration timeout);

}  // namespace fastrun::hier
