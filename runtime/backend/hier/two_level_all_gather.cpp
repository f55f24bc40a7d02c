#include "fastrun/runtime/backend/hier/two_level_all_gather.h"

#include <vector>

#include "fastrun/runtime/backend/hier/ring_ops.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/process_group/copy_bytes.h"

namespace fastrun::hier {

void two_level_all_gather(const ChainParts& p, BufferView input, BufferView output, Duration timeout) {
  const Deadline deadline(timeout);
  const NodeLayout& l = *p.layout;
  const std::size_t n = input.count;
  auto first_of = [&](int node) { return static_cast<std::size_t>(l.first[static_cast<std::size_t>(node)]) * n; };
  auto block = [&](int node) {
    return slice(output, first_of(node), static_cast<std::size_t>(l.count[static_cast<std::size_t>(node)]) * n);
  };
  const BufferView mine = block(l.my_node);
  // 1. This node's inputs into its block.
  if (p.node) p.node->all_gather(input, mine, AllGatherOptions{})->wait(deadline.left());
  else copy_bytes(mine.data, input.data, input.bytes());
  // 2. Between the leaders, round their ring.
  if (l.leader()) {
    std::vector<BufferView> blocks;
    for (int k = 0; k < l.nodes(); ++k) blocks.push_back(block(k));
    ring_all_gather(*p.ring, blocks, deadline);
  }
  // 3. The other nodes' blocks to this node's ranks: what lies before and after its own block.
  if (p.node) {
    const std::size_t before = first_of(l.my_node), after = before + mine.count;
    if (before > 0) p.node->broadcast(slice(output, 0, before), BroadcastOptions{0})->wait(deadline.left());
    if (after < output.count)
      p.node->broadcast(slice(output, after, output.count - after), BroadcastOptions{0})->wait(deadline.left());
  }
}

}  // namespace fastrun::hier
