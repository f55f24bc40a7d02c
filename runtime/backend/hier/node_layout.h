#pragma once
// Where a group's ranks sit, as the hier backend needs it: the nodes in group rank order, each a
// contiguous range of group ranks. A pure function of each member's node identity (PeerInfo::node,
// the launcher's FASTRUN_NODE_RANK), never of LOCAL_WORLD_SIZE: a sub-group may hold 3 ranks of
// one node and 1 of another.
//
// Rules (node_layout_test.cpp):
// - usable (two levels pay) when every node is known (>= 0), the ranks of each node form one
//   contiguous range of group ranks (then a chain in node order folds in rank order), there are
//   at least 2 nodes and some node holds 2 or more ranks;
// - otherwise `why_flat` says why, and the backend runs every op on flat gloo.
#include <string>
#include <vector>

namespace fastrun::hier {

struct NodeLayout {
  bool usable = false;
  std::string why_flat;          // when !usable: "one node", "node 1's ranks are not contiguous", ...
  std::vector<int> first;        // first group rank of each node, in node order
  std::vector<int> count;        // ranks of each node
  int my_node = 0;               // index into first/count of the node holding `rank`
  int local_rank() const { return rank_ - first[static_cast<std::size_t>(my_node)]; }
  bool leader() const { return local_rank() == 0; }
  int nodes() const { return static_cast<int>(first.size()); }
  int rank_ = 0;
};

// `node_of[r]`: the node identity of group rank r (-1: unknown).
NodeLayout plan_node_layout(const std::vector<int>& node_of, int rank);

}  // namespace fastrun::hier
