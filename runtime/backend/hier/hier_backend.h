#pragma once
// The `hier` backend: CPU buffers on groups that span nodes, two levels (docs/backend-hier.md).
// all_reduce of float32, float64, int32 and int64 goes shm inside each node, one leader per node
// over TCP between nodes (the leaders' ring, leader_ring.h), shm again inside each node
// (chain_all_reduce.h), with the bits of the one-kernel rule (rank order), so one node and
// several give the same result. broadcast and all_gather take the same three steps
// (two_level_broadcast.h, two_level_all_gather.h), any dtype. Every other op (and all_reduce of
// 16-bit floats, and groups the layout rules leave flat: node_layout.h) is delegated to a flat
// gloo backend over the whole group, so it behaves exactly as on `gloo`.
//
// Made of `flat` (gloo, every rank), `node` (shm, this node's ranks, its own runtime, store
// prefix and failure watch) and, on leaders, the ring. A two-level op runs as one op of this
// backend's own runtime (its number, label, timeout; on the caller's thread as shm's ops do)
// whose body waits on the node's shm ops and the ring. Failures: an inner error (PeerFailure
// naming the dead rank, TimeoutError) is the op's error, and the group is unusable after it;
// the inner waits watch the job's failure key, so a death on one node fails the ranks of the
// others promptly.
#include <memory>

#include "fastrun/runtime/backend/factory.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::hier {

// `gloo`: the factory of the gloo groups it is made of. The registry passes it: the registry sits
// above the backends (it names them), so a backend never looks itself up there.
std::unique_ptr<Backend> make_hier_backend(const GroupSpec& spec, backend::Factory gloo);

}  // namespace fastrun::hier
