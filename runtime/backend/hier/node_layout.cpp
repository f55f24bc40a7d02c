#include "fastrun/runtime/backend/hier/node_layout.h"

#include <set>

#include <fmt/format.h>

namespace fastrun::hier {

NodeLayout plan_node_layout(const std::vector<int>& node_of, int rank) {
  NodeLayout l;
  l.rank_ = rank;
  std::set<int> seen;
  for (std::size_t r = 0; r < node_of.size(); ++r) {
    const int node = node_of[r];
    if (node < 0) {
      l.why_flat = fmt::format("the node of group rank {} is unknown", r);
      return l;
    }
    if (r > 0 && node == node_of[r - 1]) {
      ++l.count.back();
      continue;
    }
    if (!seen.insert(node).second) {
      l.why_flat = fmt::format("the ranks of node {} are not one contiguous range (group rank {})", node, r);
      return l;
    }
    l.first.push_back(static_cast<int>(r));
    l.count.push_back(1);
  }
  for (std::size_t k = 0; k < l.first.size(); ++k)
    if (rank >= l.first[k] && rank < l.first[k] + l.count[k]) l.my_node = static_cast<int>(k);
  if (l.first.size() < 2) {
    l.why_flat = "one node";
    return l;
  }
  bool some_shared = false;
  for (int c : l.count) some_shared = some_shared || c > 1;
  if (!some_shared) {
    l.why_flat = "one rank per node";
    return l;
  }
  l.usable = true;
  return l;
}

}  // namespace fastrun::hier
