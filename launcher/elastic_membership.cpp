// Elastic membership (--nnodes MIN:MAX, node_attempts.h): which nodes run the next attempt —
// lost ones out (with every node whose pulse stood still with them), nodes that came back in —
// and what each member's share of the ranks is. Node 0 decides; every node reads the members.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/launcher/node_attempts_runner.h"
#include "fastrun/launcher/node_pulse.h"
#include "fastrun/launcher/node_records.h"
#include "fastrun/launcher/node_watch.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::launcher::attempts {

std::string NodeAttempts::decide_members(int n, const NodeFailure& failure) {
  std::vector<int> lost;
  if (failure.lost) lost.push_back(members_.at(static_cast<std::size_t>(failure.node)));
  if (!failure.lost && !failure.joining && (failure.final || restarts_ >= so_.job.max_restarts)) return "end";
  // The watch names the first node it found silent; others may have gone with it (two hosts
  // of a rack) or while they waited to join: the pulse tells (node_pulse.h).
  std::vector<int> others, waiting;
  for (int k : members_)
    if (!decides(k) && std::find(lost.begin(), lost.end(), k) == lost.end()) others.push_back(k);
  for (int k = first_losable(); k < max_nodes_; ++k)
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
    stop_job(failure.exit_code,
             fmt::format("{} lost in attempt {} and {} node{} left, fewer than the {} of --nnodes {}:{}",
                         describe_lost(lost), n, next.size(), next.size() == 1 ? " is" : "s are", min_nodes_,
                         min_nodes_, max_nodes_));
    return "end";
  }
  admit(n + 1, next);
  store_.set(key(n + 1, "members"), to_bytes(encode_members(next)));
  return failure.lost || failure.joining || !lost.empty() ? "resize" : "restart";
}

std::string NodeAttempts::describe_lost(const std::vector<int>& lost) const {
  std::vector<std::string> named;
  for (int k : lost) named.push_back(fmt::format("{} (host {})", k, hosts_[static_cast<std::size_t>(k)]));
  if (named.size() == 1) return fmt::format("node {} was", named[0]);
  const std::string last = named.back();
  named.pop_back();
  return fmt::format("nodes {} and {} were", fmt::join(named, ", "), last);
}

void NodeAttempts::admit(int m, std::vector<int>& next) {
  for (int k = first_losable(); k < max_nodes_ && static_cast<int>(next.size()) < max_nodes_; ++k) {
    if (std::find(next.begin(), next.end(), k) != next.end() || !store_.check({launcher_keys::joining(k)})) continue;
    store_.set(launcher_keys::node(k), store_.get(launcher_keys::joining(k), timeout_));
    store_.delete_key(launcher_keys::joining(k));
    store_.set(launcher_keys::joining(k) + "/admitted", to_bytes(std::to_string(m)));
    next.push_back(k);
  }
  std::sort(next.begin(), next.end());
}

NodeWatch::Arrivals NodeAttempts::arrivals() {
  if (!coordinator_ || min_nodes_ == max_nodes_ || static_cast<int>(members_.size()) >= max_nodes_) return {};
  StoreOptions so;
  so.timeout = std::chrono::seconds(5);
  so.token = rv_.token();
  arrivals_client_ = connect_store(rv_.address(), so);
  return [this, members = members_, s = arrivals_client_.get()]() -> std::optional<std::string> {
    for (int k = first_losable(); k < max_nodes_; ++k) {
      if (std::find(members.begin(), members.end(), k) != members.end() || !s->check({launcher_keys::joining(k)}))
        continue;
      const NodeEntry e = decode_node_entry(k, to_string(s->get(launcher_keys::joining(k), std::chrono::seconds(5))));
      return fmt::format("node {} (host {}) is back and joins at the next attempt (--nnodes {}:{})", k, e.host,
                         min_nodes_, max_nodes_);
    }
    return std::nullopt;
  };
}

void NodeAttempts::read_entries(const std::vector<int>& nodes) {
  for (int k : nodes) {
    const NodeEntry e = decode_node_entry(k, to_string(store_.get(launcher_keys::node(k), timeout_)));
    hosts_[static_cast<std::size_t>(k)] = e.host;
    ranks_[static_cast<std::size_t>(k)] = e.ranks;
  }
}

std::vector<int> NodeAttempts::lost_between(const std::vector<int>& before, const std::vector<int>& after) {
  std::vector<int> out;
  for (int k : before)
    if (std::find(after.begin(), after.end(), k) == after.end()) out.push_back(k);
  return out;
}

int NodeAttempts::my_index() const {
  return static_cast<int>(std::find(members_.begin(), members_.end(), me_) - members_.begin());
}

std::vector<std::string> NodeAttempts::watch_hosts() const {
  std::vector<std::string> out = member_hosts();
  if (apart_) out.insert(out.begin(), coordinator_host_);
  return out;
}

std::vector<std::string> NodeAttempts::member_hosts() const {
  std::vector<std::string> out;
  for (int k : members_) out.push_back(hosts_[static_cast<std::size_t>(k)]);
  return out;
}

void NodeAttempts::share_ranks() {
  NodeShare& share = so_.job.node;
  share.nnodes = static_cast<int>(members_.size());
  share.node_rank = my_index();
  share.world_size = 0;
  for (int k : members_) {
    if (k == me_) share.rank_offset = share.world_size;
    share.world_size += ranks_[static_cast<std::size_t>(k)];
  }
  if (apart_) {
    // The job's rank 0 runs on the first member, not on the store-only host: a c10d program's
    // rank 0 hosts its TCPStore at MASTER_ADDR:MASTER_PORT, so both name that member's host.
    const int first = members_.front();
    const NodeEntry e = decode_node_entry(first, to_string(store_.get(launcher_keys::node(first), timeout_)));
    if (e.rank_master_port <= 0)
      throw StoreError(fmt::format("node {}'s entry in the job's store has no rank_master_port: every compute node of a "
                                   "job with --store-only must run the same fastrun version",
                                   first));
    so_.job.rank_master_addr = e.rank_master_addr;
    so_.job.rank_master_port = e.rank_master_port;
  }
}

std::string NodeAttempts::resize_notice(int m) {
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

void NodeAttempts::lost_before_start(int m, PulseWatch& pulses, Clock::time_point& looked,
                                     const std::function<std::vector<int>()>& missing) {
  const auto now = Clock::now();
  if (!coordinator_ || min_nodes_ == max_nodes_ || now - looked < NodeWatch::kInterval) return;
  looked = now;
  std::vector<int> waited_for;
  for (int i : missing()) {
    if (const auto k = node_of_slot(i); k && !decides(*k)) waited_for.push_back(*k);
  }
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
}

}  // namespace fastrun::launcher::attempts
