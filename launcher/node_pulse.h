#pragma once
// Elastic membership (--nnodes MIN:MAX, node_attempts.h): which nodes are still there when node 0
// decides the next attempt's members. Every launcher of node k > 0 bumps its counter
// launcher_keys::pulse(k) every kInterval from the node rendezvous until it exits, between
// attempts and while it waits to join a running job included (the attempt's node watch stops its
// heartbeats once a failure is known, so it cannot tell). Node 0 calls lost_among() before it
// publishes the members: a node whose pulse moves is there, one whose pulse stays still for
// NodeWatch::kLostAfter is lost. Two nodes lost at once are then both left out of the next
// attempt, rather than the second one holding its start round until FASTRUN_TIMEOUT.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/os/periodic_thread.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::launcher {

// Node k > 0: the thread that bumps the counter, on a connection of its own. It stops quietly
// when node 0's store goes (whoever waits on the store names that).
class NodePulse {
 public:
  NodePulse(const std::string& address, const std::string& token, int node_rank);
  ~NodePulse();
  NodePulse(const NodePulse&) = delete;
  NodePulse& operator=(const NodePulse&) = delete;

 private:
  std::unique_ptr<Store> client_;
  int me_;
  os::PeriodicThread thread_;  // last: stopped (joined) before client_ goes
};

// Node 0: the one rule for "lost" by pulse, for a caller that looks now and then (the start
// round's poll) and for lost_among(). A node counts from the first look at it.
class PulseWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // Reads the pulse of each of `nodes` (node ranks > 0) at `now`; returns those whose pulse
  // stood still for NodeWatch::kLostAfter, in the order of `nodes`. Throws what the store throws.
  std::vector<int> still(Store& store, const std::vector<int>& nodes, Clock::time_point now);
  // Whether node k's pulse moved since the first look at it.
  bool moved(int k) const;

 private:
  struct Seen {
    std::int64_t pulse;
    Clock::time_point since;  // when it last moved, or the first look
    bool moved;
  };
  std::map<int, Seen> seen_;
};

// Node 0: the nodes among `nodes` (node ranks > 0) whose pulse stays still for
// NodeWatch::kLostAfter; returns as soon as every node's pulse either moved or stayed still that
// long (about one interval when all are there). Throws what the store throws.
std::vector<int> lost_among(Store& store, const std::vector<int>& nodes);

}  // namespace fastrun::launcher
