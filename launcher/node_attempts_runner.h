#pragma once
// Internal to the launcher: the class that runs a multi-node job's attempts on this node
// (node_attempts.h says what it does). Its work is in two files, each with one job:
//   node_attempts.cpp       the attempts: each one's rank store and node watch, the verdict,
//                           the back-off and start round between two, restarts, the job's end;
//   elastic_membership.cpp  --nnodes MIN:MAX: who is in the next attempt (lost nodes out, nodes
//                           that came back in), the members' share of ranks, the notices.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/node_records.h"
#include "fastrun/launcher/node_rendezvous.h"
#include "fastrun/launcher/node_watch.h"
#include "fastrun/launcher/supervisor.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::launcher {

class PulseWatch;

namespace attempts {

using Clock = std::chrono::steady_clock;

// Attempt n's key `what` in the launcher store (node_attempts.h lists them).
inline std::string key(int attempt, const std::string& what) { return launcher_keys::attempt(attempt) + "/" + what; }

// The job ends between two attempts (a signal to a launcher, recorded under kJobStopped): the
// code every launcher exits with.
struct JobStopped {
  int exit_code;
};

// Node 0 of an elastic job gave up on an attempt's start round: a member was lost before it
// started (key "skip"); the next attempt runs on the nodes left.
struct SkipAttempt {};

class NodeAttempts {
 public:
  NodeAttempts(NodeRendezvous& rendezvous, const NodePlan& plan, SupervisorOptions options);
  int run();

 private:
  // Attempts and restarts (node_attempts.cpp).
  // Node 0 hosts attempt n's rank store (dropping attempt n-1's: every node passed the start
  // round, so none of its ranks or launchers uses it) and publishes where; the others read it.
  void open_rank_store(int n);
  // What attempt n came to on every node; nullopt: another attempt follows, else the exit code.
  std::optional<int> verdict(int n, NodeWatch& watch, const JobResult& local);
  // Node 0: "restart" (a failure --max-restarts allows), "resize" (--nnodes MIN:MAX lost a node
  // and at least MIN are left, or a node came back) or "end" (recorded as the job's stop when too
  // few nodes are left, so that every node says why). An elastic job publishes attempt n+1's
  // members first, under its key "members", with the waiting nodes taken in (admit()).
  std::string decide(int n, const std::optional<NodeFailure>& failure);
  // Node k > 0: node 0's "restart" or "end" for attempt n, waited for in slices, so that a
  // signal to this launcher (which stops the job) is seen meanwhile.
  std::string wait_for_verdict(int n);
  // Between attempt n and n+1: the back-off (the same on every node), the segments this node's
  // ranks left, and the start round, which no node passes before every node reaped attempt n.
  int between(int n);
  // Attempt m's start round; when node 0 skips it (a member lost before it started), the next
  // one's on the nodes left, and so on. Returns the attempt that starts.
  int enter(int m);
  // No node passes attempt m's start round before every member reaped attempt m-1 (and a node
  // that joins, before it is there).
  void start_round(int m);
  // Records that the job ends (the first such record wins).
  void stop_job(int exit_code, const std::string& why);
  std::optional<NodeFailure> stopped();
  // The job ends after attempt n. Node k > 0 says it has read the end; node 0, which hosts the
  // store, keeps it up until every other node did (or kLeaveWithin passed: a lost node cannot).
  int leave(int n, int code);

  // Elastic membership (elastic_membership.cpp).
  // Node 0 of an elastic job (decide()): who is in attempt n+1 after `failure` — the failed or lost
  // nodes out, the nodes whose pulse stood still with them out, the waiting nodes in (admit()).
  std::string decide_members(int n, const NodeFailure& failure);
  // "node 2 (host h2) was", "nodes 2 (host h2) and 3 (host h3) were".
  std::string describe_lost(const std::vector<int>& lost) const;
  // Node 0: the nodes that came back and wait (launcher_keys::joining), into attempt m's members
  // up to MAX: each one's entry becomes its node/<k> (what every node reads), and its "admitted"
  // key tells it which attempt to start with.
  void admit(int m, std::vector<int>& next);
  // Node 0, while attempt n runs (its node watch's thread, on a connection of its own): the
  // first node not in the attempt that asks to join, as the reason to stop the attempt.
  NodeWatch::Arrivals arrivals();
  // Every node, after a change of members: the entries (host, ranks) of the nodes that joined.
  void read_entries(const std::vector<int>& nodes);
  static std::vector<int> lost_between(const std::vector<int>& before, const std::vector<int>& after);
  // This launcher's node rank in the current attempt: its place among the members (node 0 stays 0).
  int my_index() const;
  std::vector<std::string> member_hosts() const;
  // The attempt's share of this node: node rank and count, its first global rank and the world
  // size over the members, which the ranks see as FASTRUN_NODE_RANK, RANK, WORLD_SIZE, ...
  void share_ranks();
  // "fastrun: starting attempt m of the job on K nodes (--nnodes MIN:MAX) without lost node [2] ..."
  std::string resize_notice(int m);
  // Node 0 of an elastic job: a member whose pulse stands still before it reached the round
  // (lost after node 0 named the members: during a back-off) ends the job at once, naming it,
  // rather than after FASTRUN_TIMEOUT.
  // Called from attempt m's start round with its own `pulses` and time of the last look.
  void lost_before_start(int m, PulseWatch& pulses, Clock::time_point& looked,
                         const std::function<std::vector<int>()>& missing);

  // Where node 0 and the store-only launcher differ (node_options.h, --store-only): the one that
  // decides is either node 0, a member, or a launcher apart from the members that runs no ranks
  // and takes slot 0 of the watch and start rounds (the members then take slots 1..K).
  int slot() const { return coordinator_ && apart_ ? 0 : my_index() + (apart_ ? 1 : 0); }
  int slots() const { return static_cast<int>(members_.size()) + (apart_ ? 1 : 0); }
  std::vector<std::string> watch_hosts() const;
  // The node rank in slot i of those rounds; nullopt for the store-only launcher's slot 0.
  std::optional<int> node_of_slot(int i) const {
    if (apart_ && i == 0) return std::nullopt;
    return members_.at(static_cast<std::size_t>(i - (apart_ ? 1 : 0)));
  }
  // Whether node k is the one that decides (node 0 without a store-only launcher): never lost.
  bool decides(int k) const { return !apart_ && k == 0; }
  // The first node rank that can be lost, or asks to join.
  int first_losable() const { return apart_ ? 0 : 1; }
  // "node 0" or "the store-only launcher", in messages.
  const char* coordinator_name() const { return apart_ ? "the store-only launcher" : "node 0"; }

  NodeRendezvous& rv_;
  Store& store_;  // node 0's launcher store (the rendezvous's client)
  const bool coordinator_;  // this launcher decides (NodePlan::coordinates())
  const bool apart_;        // the one that decides is a store-only launcher (NodePlan::coordinator_apart())
  const bool store_only_;   // this launcher is it: no ranks, in no attempt's members
  const std::string coordinator_host_;  // --master-addr: where the store-only launcher runs
  const int me_;         // --node-rank: who this node is for the whole job (-1: the store-only launcher)
  const int min_nodes_;  // --nnodes MIN:MAX (MIN = MAX: a fixed set of nodes)
  const int max_nodes_;
  std::vector<int> members_;  // the current attempt's nodes (--node-rank of each, ascending: node 0 first)
  std::vector<int> lost_;     // the nodes the last change left out (for the notice)
  std::vector<int> joined_;   // the nodes the last change took in
  std::vector<int> gone_;     // node 0: the nodes lost when too few were left (the job ends without them)
  bool resizing_ = false;     // the next attempt follows a change of nodes
  std::vector<std::string> hosts_;  // every node's host and ranks by --node-rank (those of members)
  std::vector<int> ranks_;
  std::unique_ptr<Store> arrivals_client_;  // node 0's watch thread's, for arrivals()
  int restarts_ = 0;          // attempts that followed a failure: these count against --max-restarts
  int resized_ = 0;           // attempts that followed a change of nodes
  int first_ = 0;             // this node's first attempt (> 0: it joined a running job)
  const Duration timeout_;
  SupervisorOptions so_;
  std::unique_ptr<HostedStore> rank_hosted_;  // node 0: the ranks' store of the current attempt
  std::unique_ptr<Store> rank_client_;        // this launcher's handle on it (the failure key)
};

}  // namespace attempts
}  // namespace fastrun::launcher
