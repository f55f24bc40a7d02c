#include "fastrun/launcher/node_attempts.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/launcher/job_resources.h"
#include "fastrun/launcher/node_pulse.h"
#include "fastrun/launcher/node_records.h"
#include "fastrun/launcher/node_watch.h"
#include "fastrun/launcher/restarts.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/gather.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr os::Backoff kEvery100ms{std::chrono::milliseconds(100), std::chrono::milliseconds(100)};
constexpr auto kVerdictSlice = std::chrono::milliseconds(100);
constexpr auto kLeaveWithin = std::chrono::seconds(5);

std::string key(int attempt, const std::string& what) { return launcher_keys::attempt(attempt) + "/" + what; }

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
  NodeAttempts(NodeRendezvous& rendezvous, const NodePlan& plan, SupervisorOptions options)
      : rv_(rendezvous),
        store_(*rendezvous.store()),
        me_(plan.node_rank),
        min_nodes_(plan.min_nnodes),
        max_nodes_(plan.nnodes),
        timeout_(env::get_timeout(env::kTimeout)),
        so_(std::move(options)) {
    so_.restarts_by_caller = true;
    hosts_ = rv_.hosts();
    ranks_ = rv_.ranks();
    hosts_.resize(static_cast<std::size_t>(max_nodes_));
    ranks_.resize(static_cast<std::size_t>(max_nodes_));
    first_ = rv_.first_attempt();
    if (first_ == 0) {
      members_ = rv_.members();  // all nodes, or those there at the end of the last call
    } else {
      // A node that came back (node_rendezvous.h): node 0 took it into attempt first_.
      const std::string k = key(first_, "members");
      members_ = decode_members(k, to_string(store_.get(k, timeout_)));
      read_entries(members_);
    }
  }

  int run() {
    int start = first_;
    if (first_ > 0) {
      try {
        start = enter(first_);
      } catch (const JobStopped& stopped) {
        return leave(first_ - 1, stopped.exit_code);
      }
    }
    for (int n = start;; ++n) {
      // 1. The attempt: a fresh store for its ranks, its own node watch, its ranks.
      open_rank_store(n);
      std::optional<int> code;
      {
        NodeWatch watch(rv_.address(), rv_.token(), my_index(), member_hosts(), key(n, "watch"), arrivals());
        so_.job.attempt = n;
        so_.job.resized_attempts = resized_;
        share_ranks();
        so_.nodes = &watch;
        const JobResult local = Supervisor(so_).run();
        so_.nodes = nullptr;
        so_.failure_store = nullptr;
        rank_client_.reset();  // before node 0 takes the store down (after the next start round)
        // 2. The job's verdict on it.
        code = verdict(n, watch, local);
      }
      if (code) return *code;
      // 3. Every node between the attempts: the back-off, this node's segments, the start round.
      try {
        n = between(n) - 1;  // the attempt that starts (later than n + 1 when one was skipped)
      } catch (const JobStopped& stopped) {
        return leave(n, stopped.exit_code);
      }
    }
  }

 private:
  // Node 0 hosts attempt n's rank store (dropping attempt n-1's: every node passed the start
  // round, so none of its ranks or launchers uses it) and publishes where; the others read it.
  void open_rank_store(int n) {
    StoreOptions so;
    so.timeout = timeout_;
    so.token = rv_.token();
    std::string address;
    if (me_ == 0) {
      rank_hosted_.reset();
      const std::string& a = rv_.address();  // tcp://HOST:PORT: the same host, a port of its own
      rank_hosted_ = host_store(a.substr(0, a.rfind(':')) + ":0", so);
      address = rank_hosted_->address();
      store_.set(key(n, "store"), to_bytes(address));
    } else {
      try {
        address = to_string(store_.get(key(n, "store"), timeout_));
      } catch (const TimeoutError&) {
        throw TimeoutError(fmt::format("node {}: node 0 did not publish the store of attempt {} within {:.3g} s "
                                       "(FASTRUN_TIMEOUT)",
                                       me_, n, std::chrono::duration<double>(timeout_).count()));
      }
    }
    rank_client_ = connect_store(address, so);
    so_.job.store_address = address;
    so_.failure_store = rank_client_.get();
  }

  // What attempt n came to on every node; nullopt: another attempt follows, else the exit code.
  std::optional<int> verdict(int n, NodeWatch& watch, const JobResult& local) {
    // 1. This node's part: done (node 0: and every other node done, or a failure), or failed.
    std::optional<NodeFailure> failure;
    try {
      failure = local.exit_code == 0 ? watch.finish_success() : watch.recorded();
    } catch (const Error& e) {
      log::warn("attempt {}: lost node 0's store: {}", n, e.what());
      return local.exit_code != 0 ? local.exit_code : 1;
    }
    if (local.exit_code != 0 && !failure) failure = NodeFailure{local.exit_code, me_, "this node's attempt failed"};
    // A signal to this launcher ends the job even when another node's failure came first.
    if (local.stop_signal != 0) stop_job(local.exit_code, fmt::format("the launcher on node {} got {}", me_,
                                                                      signal_name(local.stop_signal)));
    // 2. Node 0 decides, the others wait for its decision.
    std::string said;
    if (me_ == 0) {
      said = decide(n, failure);
      store_.set(key(n, "verdict"), to_bytes(said));
    } else {
      try {
        said = wait_for_verdict(n);
      } catch (const JobStopped& s) {
        return leave(n, local.stop_signal ? local.exit_code : s.exit_code);
      } catch (const Error& e) {
        std::fprintf(stderr, "fastrun: lost node 0 (its store) while waiting for its verdict on attempt %d: %s\n", n,
                     e.what());
        return failure ? failure->exit_code : 1;
      }
    }
    if (said == "restart" || said == "resize") {
      if (said == "restart") ++restarts_;
      else ++resized_;
      resizing_ = said == "resize";
      // The next attempt's nodes (elastic jobs); a node left out of them (lost, and back before it
      // knew) ends.
      const std::string k = key(n + 1, "members");
      if (!store_.check({k})) return std::nullopt;
      std::vector<int> next = decode_members(k, to_string(store_.get(k, timeout_)));
      if (std::find(next.begin(), next.end(), me_) == next.end()) {
        std::fprintf(stderr, "fastrun: node %d was lost to the job in attempt %d; it goes on without this node\n",
                     me_, n);
        return leave(n, failure ? failure->exit_code : 1);
      }
      lost_ = lost_between(members_, next);
      joined_ = lost_between(next, members_);
      members_ = std::move(next);
      read_entries(joined_);
      return std::nullopt;
    }
    // 3. The end: this job's code, the same on every node.
    int code = 0;
    if (local.stop_signal != 0) {
      code = local.exit_code;
    } else if (auto s = stopped()) {
      code = s->exit_code;
      std::fprintf(stderr, "fastrun: the job was stopped: %s\n", s->why.c_str());
    } else if (failure) {
      code = failure->exit_code;
      if (local.exit_code == 0)
        std::fprintf(stderr, "fastrun: the job failed on node %d: %s\n", failure->node, failure->why.c_str());
    }
    return leave(n, code);
  }

  // Node 0: "restart" (a failure --max-restarts allows), "resize" (--nnodes MIN:MAX lost a node
  // and at least MIN are left, or a node came back) or "end" (recorded as the job's stop when too
  // few nodes are left, so that every node says why). An elastic job publishes attempt n+1's
  // members first, under its key "members", with the waiting nodes taken in (admit()).
  std::string decide(int n, const std::optional<NodeFailure>& failure) {
    if (!failure || stopped()) return "end";
    if (min_nodes_ < max_nodes_) {
      std::vector<int> lost;
      if (failure->lost) lost.push_back(members_.at(static_cast<std::size_t>(failure->node)));
      if (!failure->lost && !failure->joining && (failure->final || restarts_ >= so_.job.max_restarts)) return "end";
      // The watch names the first node it found silent; others may have gone with it (two hosts
      // of a rack) or while they waited to join: the pulse tells (node_pulse.h).
      std::vector<int> others, waiting;
      for (int k : members_)
        if (k != 0 && std::find(lost.begin(), lost.end(), k) == lost.end()) others.push_back(k);
      for (int k = 1; k < max_nodes_; ++k)
        if (std::find(members_.begin(), members_.end(), k) == members_.end() && store_.check({launcher_keys::joining(k)}))
          waiting.push_back(k);
      std::vector<int> asked = others;
      asked.insert(asked.end(), waiting.begin(), waiting.end());
      const std::vector<int> silent = lost_among(store_, asked);
      for (int k : silent) {
        if (std::find(waiting.begin(), waiting.end(), k) != waiting.end()) {
          store_.delete_key(launcher_keys::joining(k));  // it asked, then went: not taken in
          std::fprintf(stderr, "fastrun: node %d asked to join, then stopped answering; the job goes on without it\n",
                       k);
        } else {
          lost.push_back(k);
        }
      }
      std::sort(lost.begin(), lost.end());
      std::vector<int> next;
      for (int k : members_)
        if (std::find(lost.begin(), lost.end(), k) == lost.end()) next.push_back(k);
      if (!lost.empty() && static_cast<int>(next.size()) < min_nodes_) {
        gone_ = lost;  // leave() does not wait for them to read the end
        stop_job(failure->exit_code,
                 fmt::format("{} lost in attempt {} and {} node{} left, fewer than the {} of --nnodes {}:{}",
                             describe_lost(lost), n, next.size(), next.size() == 1 ? " is" : "s are", min_nodes_,
                             min_nodes_, max_nodes_));
        return "end";
      }
      admit(n + 1, next);
      store_.set(key(n + 1, "members"), to_bytes(encode_members(next)));
      return failure->lost || failure->joining || !lost.empty() ? "resize" : "restart";
    }
    return !failure->final && restarts_ < so_.job.max_restarts ? "restart" : "end";
  }

  // "node 2 (host h2) was", "nodes 2 (host h2) and 3 (host h3) were".
  std::string describe_lost(const std::vector<int>& lost) const {
    std::vector<std::string> named;
    for (int k : lost) named.push_back(fmt::format("{} (host {})", k, hosts_[static_cast<std::size_t>(k)]));
    if (named.size() == 1) return fmt::format("node {} was", named[0]);
    const std::string last = named.back();
    named.pop_back();
    return fmt::format("nodes {} and {} were", fmt::join(named, ", "), last);
  }

  // Node 0: the nodes that came back and wait (launcher_keys::joining), into attempt m's members
  // up to MAX: each one's entry becomes its node/<k> (what every node reads), and its "admitted"
  // key tells it which attempt to start with.
  void admit(int m, std::vector<int>& next) {
    for (int k = 1; k < max_nodes_ && static_cast<int>(next.size()) < max_nodes_; ++k) {
      if (std::find(next.begin(), next.end(), k) != next.end() || !store_.check({launcher_keys::joining(k)})) continue;
      store_.set(launcher_keys::node(k), store_.get(launcher_keys::joining(k), timeout_));
      store_.delete_key(launcher_keys::joining(k));
      store_.set(launcher_keys::joining(k) + "/admitted", to_bytes(std::to_string(m)));
      next.push_back(k);
    }
    std::sort(next.begin(), next.end());
  }

  // Node 0, while attempt n runs (its node watch's thread, on a connection of its own): the
  // first node not in the attempt that asks to join, as the reason to stop the attempt.
  NodeWatch::Arrivals arrivals() {
    if (me_ != 0 || min_nodes_ == max_nodes_ || static_cast<int>(members_.size()) >= max_nodes_) return {};
    StoreOptions so;
    so.timeout = std::chrono::seconds(5);
    so.token = rv_.token();
    arrivals_client_ = connect_store(rv_.address(), so);
    return [this, members = members_, s = arrivals_client_.get()]() -> std::optional<std::string> {
      for (int k = 1; k < max_nodes_; ++k) {
        if (std::find(members.begin(), members.end(), k) != members.end() || !s->check({launcher_keys::joining(k)}))
          continue;
        const NodeEntry e = decode_node_entry(k, to_string(s->get(launcher_keys::joining(k), std::chrono::seconds(5))));
        return fmt::format("node {} (host {}) is back and joins at the next attempt (--nnodes {}:{})", k, e.host,
                           min_nodes_, max_nodes_);
      }
      return std::nullopt;
    };
  }

  // Every node, after a change of members: the entries (host, ranks) of the nodes that joined.
  void read_entries(const std::vector<int>& nodes) {
    for (int k : nodes) {
      const NodeEntry e = decode_node_entry(k, to_string(store_.get(launcher_keys::node(k), timeout_)));
      hosts_[static_cast<std::size_t>(k)] = e.host;
      ranks_[static_cast<std::size_t>(k)] = e.ranks;
    }
  }

  static std::vector<int> lost_between(const std::vector<int>& before, const std::vector<int>& after) {
    std::vector<int> out;
    for (int k : before)
      if (std::find(after.begin(), after.end(), k) == after.end()) out.push_back(k);
    return out;
  }

  // This launcher's node rank in the current attempt: its place among the members (node 0 stays 0).
  int my_index() const {
    return static_cast<int>(std::find(members_.begin(), members_.end(), me_) - members_.begin());
  }
  std::vector<std::string> member_hosts() const {
    std::vector<std::string> out;
    for (int k : members_) out.push_back(hosts_[static_cast<std::size_t>(k)]);
    return out;
  }
  // The attempt's share of this node: node rank and count, its first global rank and the world
  // size over the members, which the ranks see as FASTRUN_NODE_RANK, RANK, WORLD_SIZE, ...
  void share_ranks() {
    NodeShare& share = so_.job.node;
    share.nnodes = static_cast<int>(members_.size());
    share.node_rank = my_index();
    share.world_size = 0;
    for (int k : members_) {
      if (k == me_) share.rank_offset = share.world_size;
      share.world_size += ranks_[static_cast<std::size_t>(k)];
    }
  }

  // Node k > 0: node 0's "restart" or "end" for attempt n, waited for in slices, so that a
  // signal to this launcher (which stops the job) is seen meanwhile.
  std::string wait_for_verdict(int n) {
    // A store wait wakes as soon as node 0 sets the verdict (polling it every 100 ms cost the
    // restart 50 ms on average); its slice is how often a signal to this launcher is looked at.
    for (;;) {
      if (const int sig = pending_stop_signal()) {
        stop_job(128 + sig, fmt::format("the launcher on node {} got {}", me_, signal_name(sig)));
        throw JobStopped{128 + sig};
      }
      try {
        store_.wait({key(n, "verdict")}, kVerdictSlice);
        break;
      } catch (const TimeoutError&) {
      }
    }
    return to_string(store_.get(key(n, "verdict"), timeout_));
  }

  // Between attempt n and n+1: the back-off (the same on every node), the segments this node's
  // ranks left, and the start round, which no node passes before every node reaped attempt n.
  int between(int n) {
    // A change of nodes starts at once: the failure was a node, not the program.
    const auto delay = resizing_ ? std::chrono::milliseconds(0) : restart_backoff(restarts_);
    std::string notice = resizing_ ? resize_notice(n + 1) : restart_notice(n + 1, restarts_, so_.job.max_restarts, delay);
    std::fputs(notice.c_str(), stderr);
    if (const int sig = wait_before_restart(delay, so_.handle_signals)) {
      stop_job(128 + sig, fmt::format("the launcher on node {} got {} before attempt {} started", me_,
                                      signal_name(sig), n + 1));
      throw JobStopped{128 + sig};
    }
    remove_job_segments(so_.job.run_id);
    return enter(n + 1);
  }

  // "fastrun: starting attempt m of the job on K nodes (--nnodes MIN:MAX) without lost node [2] ..."
  std::string resize_notice(int m) {
    std::string notice;
    {
      std::string change;
      if (!lost_.empty()) change += fmt::format(" without lost node{} [{}]", lost_.size() == 1 ? "" : "s", fmt::join(lost_, ", "));
      if (!joined_.empty()) change += fmt::format("{} with node{} [{}] back", lost_.empty() ? "" : " and",
                                                  joined_.size() == 1 ? "" : "s", fmt::join(joined_, ", "));
      notice = fmt::format("fastrun: starting attempt {} of the job on {} node{} (--nnodes {}:{}){}; a change of "
                           "nodes does not count against --max-restarts\n",
                           m, members_.size(), members_.size() == 1 ? "" : "s", min_nodes_, max_nodes_, change);
    }
    lost_.clear();
    joined_.clear();
    return notice;
  }

  // Attempt m's start round; when node 0 skips it (a member lost before it started), the next
  // one's on the nodes left, and so on. Returns the attempt that starts.
  int enter(int m) {
    for (;;) {
      try {
        start_round(m);
        // A member lost at the very end of the round (node 0 skipped it as the others passed).
        if (min_nodes_ < max_nodes_ && store_.check({key(m, "skip")})) throw SkipAttempt{};
        return m;
      } catch (const SkipAttempt&) {
        const std::string k = key(m + 1, "members");
        std::vector<int> next = decode_members(k, to_string(store_.get(k, timeout_)));
        if (std::find(next.begin(), next.end(), me_) == next.end()) {
          std::fprintf(stderr, "fastrun: node %d was lost to the job before attempt %d started; it goes on without "
                               "this node\n", me_, m);
          throw JobStopped{1};
        }
        lost_ = lost_between(members_, next);
        joined_.clear();
        members_ = std::move(next);
        ++resized_;
        const std::string notice = resize_notice(m + 1);
        std::fputs(notice.c_str(), stderr);
        ++m;
      }
    }
  }

  // No node passes attempt m's start round before every member reaped attempt m-1 (and a node
  // that joins, before it is there).
  void start_round(int m) {
    const int n = m - 1;
    // Node 0 of an elastic job: a member whose pulse stands still before it reached the round
    // (lost after node 0 named the members: during a back-off) ends the job at once, naming it,
    // rather than after FASTRUN_TIMEOUT.
    PulseWatch pulses;
    Clock::time_point looked{};
    const auto lost_before_start = [&](const std::function<std::vector<int>()>& missing) {
      const auto now = Clock::now();
      if (me_ != 0 || min_nodes_ == max_nodes_ || now - looked < NodeWatch::kInterval) return;
      looked = now;
      std::vector<int> waited_for;
      for (int i : missing())
        if (const int k = members_.at(static_cast<std::size_t>(i)); k != 0) waited_for.push_back(k);
      const std::vector<int> stale = pulses.still(store_, waited_for, now);
      if (stale.empty()) return;
      const int k = stale.front();  // one lost with it is found in the next attempt's round
      std::vector<int> next;
      for (int j : members_)
        if (j != k) next.push_back(j);
      if (static_cast<int>(next.size()) < min_nodes_) {
        gone_ = {k};
        stop_job(1, fmt::format("{} lost before attempt {} started and {} node{} left, fewer than the {} of "
                                "--nnodes {}:{}",
                                describe_lost({k}), m, next.size(), next.size() == 1 ? " is" : "s are",
                                min_nodes_, min_nodes_, max_nodes_));
        std::fprintf(stderr, "fastrun: the job was stopped: %s\n", stopped()->why.c_str());
        throw JobStopped{1};
      }
      // Attempt m never starts: the members of m+1 first, then the mark every node polls.
      std::fprintf(stderr, "fastrun: %s lost before attempt %d started; the job goes on without it\n",
                   describe_lost({k}).c_str(), m);
      store_.set(key(m + 1, "members"), to_bytes(encode_members(next)));
      store_.set(key(m, "skip"), to_bytes("1"));
      throw SkipAttempt{};
    };
    RoundOptions round;
    round.prefix = key(n + 1, "start");
    round.rank = my_index();
    round.size = static_cast<int>(members_.size());
    round.timeout = timeout_;
    round.poll = [&](const std::function<std::vector<int>()>& missing) {
      if (const int sig = pending_stop_signal()) {
        stop_job(128 + sig, fmt::format("the launcher on node {} got {} before attempt {} started", me_,
                                        signal_name(sig), n + 1));
        throw JobStopped{128 + sig};
      }
      if (auto s = stopped()) {
        std::fprintf(stderr, "fastrun: the job was stopped: %s\n", s->why.c_str());
        throw JobStopped{s->exit_code};
      }
      lost_before_start(missing);
      if (min_nodes_ < max_nodes_ && store_.check({key(m, "skip")})) throw SkipAttempt{};
    };
    round.on_timeout = [&](const std::vector<int>& who) {
      throw TimeoutError(fmt::format("node {}: attempt {} could not start: node{} [{}] did not come back within "
                                     "{:.3g} s (FASTRUN_TIMEOUT)",
                                     me_, n + 1, who.size() == 1 ? "" : "s", fmt::join(who, ", "),
                                     std::chrono::duration<double>(timeout_).count()));
    };
    store_round_barrier(store_, round);
  }

  // Records that the job ends (the first such record wins).
  void stop_job(int exit_code, const std::string& why) {
    try {
      set_if_absent(store_, launcher_keys::kJobStopped, encode(NodeFailure{exit_code, me_, why, false, true}));
    } catch (const std::exception& e) {
      log::warn("could not record in node 0's store that the job stops: {}", e.what());
    }
  }

  std::optional<NodeFailure> stopped() {
    if (!store_.check({launcher_keys::kJobStopped})) return std::nullopt;
    return decode_node_failure(to_string(store_.get(launcher_keys::kJobStopped, timeout_)));
  }

  // The job ends after attempt n. Node k > 0 says it has read the end; node 0, which hosts the
  // store, keeps it up until every other node did (or kLeaveWithin passed: a lost node cannot).
  int leave(int n, int code) {
    try {
      if (me_ != 0) {
        store_.set(key(n, "left/" + std::to_string(me_)), to_bytes("1"));
        return code;
      }
      os::poll_until(Clock::now() + kLeaveWithin, kEvery100ms, [&] {
        for (int k : members_)
          if (k != 0 && std::find(gone_.begin(), gone_.end(), k) == gone_.end() &&
              !store_.check({key(n, "left/" + std::to_string(k))}))
            return false;
        return true;
      });
    } catch (const std::exception& e) {
      log::warn("leaving the job after attempt {}: {}", n, e.what());
    }
    return code;
  }

  NodeRendezvous& rv_;
  Store& store_;  // node 0's launcher store (the rendezvous's client)
  const int me_;         // --node-rank: who this node is for the whole job
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

}  // namespace

int run_node_attempts(NodeRendezvous& rendezvous, const NodePlan& plan, SupervisorOptions options) {
  return NodeAttempts(rendezvous, plan, std::move(options)).run();
}

}  // namespace fastrun::launcher
