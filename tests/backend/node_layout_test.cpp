// plan_node_layout (runtime/backend/hier/node_layout.h): when the hier backend runs two levels,
// and the ranges it folds in node order.
#include <catch2/catch.hpp>

#include "fastrun/runtime/backend/hier/node_layout.h"

using fastrun::hier::plan_node_layout;

TEST_CASE("node layout: contiguous nodes are usable, in node order", "[hier][layout]") {
  const auto l = plan_node_layout({0, 0, 1, 1, 1}, 3);
  REQUIRE(l.usable);
  CHECK(l.first == std::vector<int>{0, 2});
  CHECK(l.count == std::vector<int>{2, 3});
  CHECK(l.my_node == 1);
  CHECK(l.local_rank() == 1);
  CHECK_FALSE(l.leader());
  CHECK(plan_node_layout({0, 0, 1, 1, 1}, 2).leader());
}

TEST_CASE("node layout: node identities need not be 0..K-1 or sorted", "[hier][layout]") {
  const auto l = plan_node_layout({5, 2, 2}, 0);  // a sub-group: node 5's rank, then node 2's
  REQUIRE(l.usable);
  CHECK(l.first == std::vector<int>{0, 1});
  CHECK(l.count == std::vector<int>{1, 2});
  CHECK(l.leader());
}

TEST_CASE("node layout: flat where two levels do not apply", "[hier][layout]") {
  CHECK(plan_node_layout({0, 0, 0}, 0).why_flat == "one node");
  CHECK(plan_node_layout({0, 1, 2}, 0).why_flat == "one rank per node");
  const auto split = plan_node_layout({0, 1, 0, 1}, 0);  // round-robin placement: not in rank order
  CHECK_FALSE(split.usable);
  CHECK(split.why_flat == "the ranks of node 0 are not one contiguous range (group rank 2)");
  const auto unknown = plan_node_layout({0, -1, 1, 1}, 0);
  CHECK_FALSE(unknown.usable);
  CHECK(unknown.why_flat == "the node of group rank 1 is unknown");
}
