#include "fastrun/runtime/backend/hier/two_level_broadcast.h"

#include "fastrun/runtime/backend/hier/ring_ops.h"
#include "fastrun/runtime/deadline.h"

namespace fastrun::hier {

int node_of_rank(const NodeLayout& layout, int rank) {
  for (int k = 0; k < layout.nodes(); ++k) {
    const auto i = static_cast<std::size_t>(k);
    if (rank >= layout.first[i] && rank < layout.first[i] + layout.count[i]) return k;
  }
  return -1;  // not a member: the caller checked the root
}

void two_level_broadcast(const ChainParts& p, BufferView buffer, int root, Duration timeout) {
  const Deadline deadline(timeout);
  const NodeLayout& l = *p.layout;
  const int root_node = node_of_rank(l, root);
  const bool on_root_node = l.my_node == root_node;
  // 1. Inside the root's node, from the root (its leader then holds the data).
  if (on_root_node && p.node)
    p.node->broadcast(buffer, BroadcastOptions{root - l.first[static_cast<std::size_t>(root_node)]})
        ->wait(deadline.left());
  // 2. Across nodes, leaders only, from the root node's leader round their ring.
  if (l.leader()) ring_broadcast(*p.ring, buffer, root_node, deadline);
  // 3. Inside every other node, from its leader.
  if (!on_root_node && p.node) p.node->broadcast(buffer, BroadcastOptions{0})->wait(deadline.left());
}

}  // namespace fastrun::hier
