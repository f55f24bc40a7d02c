#pragma once
// The two-level all-reduce's body (blocking, on the thread that runs the hier op), in chunks
// of kChainChunkBytes, the three steps pipelined so that they overlap:
//   1. node: every rank's chunk is gathered at its node's leader (shm gather, root 0);
//   2. leaders, a chain in node order over their ring (leader_ring.h): node 0's leader folds its
//      ranks' values (x0 OP x1 ...) into an accumulator chunk and sends it on; node k's leader
//      receives it and folds its own ranks' values onto it, left to right; the last node's
//      leader finishes the chunk (avg: divide by the group size) and sends the result chunk back
//      round the ring (last -> node 0 -> node 1 ... -> node K-2), so the chain and the return
//      keep both directions of every link busy at once;
//   3. node: each leader broadcasts the result chunk to its ranks (shm broadcast, root 0),
//      kBroadcastLag chunks behind the gathers: after gathering and passing on chunk c, a node
//      broadcasts chunk c-2, so a chunk's result has two chunks' time to come back round.
//      Until 2026-12-05 each step ran over the whole buffer before the next began (16 MiB on 2
//      namespace hosts x 2 ranks: gather 8-10 ms, chain 20-22 ms, broadcast 11-12 ms, one
//      after the other); until 2026-12-06 chunks were 1 MiB.
// Rails (ChainParts::rails: every node holds n >= 2 ranks; ops of kRailsFromBytes or more):
// every local rank q carries slice q of each chunk round the ring of the local ranks q of all
// nodes, so that all ranks share the folds and the TCP transfers (a leader alone did all of its
// node's, and on the 2-core VM the CPUs were the limit); step 1 is then an all-to-all inside
// the node (rank q gets slice q of every rank's chunk) and step 3 an all-gather of the result
// slices. Each element still folds in group rank order, so the bits are the same.
// The fold is kernels::reduce over [accumulator, x_first .. x_last], so element i is
// x0 OP x1 OP ... OP x(n-1) in group rank order with the accumulator in the storage type: the
// one-kernel rule's bits for float32, float64, int32, int64 (16-bit floats are not taken here).
#include "fastrun/runtime/backend/hier/node_layout.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::hier {

class LeaderRing;

struct ChainParts {
  Backend* node = nullptr;     // shm over this node's ranks (null when the node has one rank)
  // This rank's ring (leader_ring.h), begun for the op: the leaders', or with rails the one of
  // this local rank across the nodes; null on a rank without one.
  LeaderRing* ring = nullptr;
  const NodeLayout* layout = nullptr;
  int group_size = 0;
  // Every node holds the same number n >= 2 of ranks, and each local rank has its ring: the
  // all-reduce's chunks go in n slices, each round its own ring (see above).
  bool rails = false;
};

// Elements [first, first + count) of `b`, a view of the same memory (the two-level ops' blocks).
BufferView slice(const BufferView& b, std::size_t first, std::size_t count);

// A buffer of `count` elements of `dtype` in pipelined chunks of kChainChunkBytes (the last one
// shorter): the all-reduce's and the ring broadcast's unit.
struct Chunks {
  Chunks(std::size_t count, DType dtype);
  std::size_t first(std::size_t c) const { return c * chunk; }
  std::size_t size(std::size_t c) const;
  // Chunk c of `b` (a buffer of `count` elements).
  BufferView part(const BufferView& b, std::size_t c) const { return slice(b, first(c), size(c)); }
  std::size_t count, chunk, n;  // elements, elements per chunk, chunks
};

// Bytes of one pipelined chunk. Measured on 2 namespace hosts x 2 ranks (2-core VM, 60 ops back
// to back per size, two rounds alternating): 128 KiB chunks took 0.68-1.07 ms at 1 MiB and
// 4.1-4.5 ms at 4 MiB, against 1.22-1.42 and 5.1-5.3 ms with 1 MiB chunks (a 1 MiB op was one
// chunk: gather, the chain's two hops and the broadcast one after the other); 64 and 192 KiB
// were no better, and a lag of 4 or 8 chunks was slower than 2. With gloo between the leaders
// (80 us a message) small chunks were 1.4-1.5x slower.
constexpr std::size_t kChainChunkBytes = 128 * 1024;
// Rails from this many bytes (where the layout allows them): below, the leaders alone are faster
// (one shm step less per node: 22-37 us against 33-49 at 4-32 KiB on 2 namespace hosts x 2
// ranks, 1,000 ops back to back, three rounds alternating), from 64 KiB the rails are (40-46
// against 47-70 us; 512 KiB-2 MiB 1.2-1.6x, 16 MiB 1.2-1.3x, 60 ops).
constexpr std::size_t kRailsFromBytes = 64 * 1024;
// How many chunks the node's broadcasts run behind its gathers: the time a chunk takes round
// the nodes, so that a leader rarely waits for a result it is about to broadcast.
constexpr std::size_t kBroadcastLag = 2;

void chain_all_reduce(const ChainParts& parts, BufferView buffer, ReduceOp op, Duration timeout);

}  // namespace fastrun::hier
