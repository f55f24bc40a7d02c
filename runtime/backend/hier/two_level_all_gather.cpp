#include "fastrun/runtime/backend/hier/two_level_all_gather.h"

#include <algorithm>
#include <cstring>
#include <vector>

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
  // 2. Between the leaders.
  if (l.leader()) {
    const bool even = std::all_of(l.count.begin(), l.count.end(), [&](int c) { return c == l.count.front(); });
    if (even) {
      // In place: this leader's block is its slot of the output (leader rank = node index).
      p.leaders->all_gather(mine, output, AllGatherOptions{})->wait(deadline.left());
    } else {
      std::vector<WorkHandle> sent;  // queued back to back on the leaders' comm thread
      for (int k = 0; k < l.nodes(); ++k) sent.push_back(p.leaders->broadcast(block(k), BroadcastOptions{k}));
      for (WorkHandle& w : sent) w->wait(deadline.left());
    }
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
