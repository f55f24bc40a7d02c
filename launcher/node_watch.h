#pragma once
// Multi-node failure spreading (docs/multinode.md): a failure anywhere stops every node.
//
// Keys under "fastrun/launcher/": failure = a NodeFailure record (node_records.h; the first one
// wins: compare_set), heartbeat/<k> (a counter node k > 0 bumps every 100 ms), done/<k> (node k's
// ranks all succeeded), ack/<k> (node k saw the failure).
//
// A thread with its own store connection checks, every 100 ms, for another node's failure, and
// on node 0 for a node whose heartbeat stopped for kLostAfter (its launcher died, even by
// SIGKILL; kFirstBeatWithin before its first beat) — node 0 records that as the failure. On the other nodes a broken store connection
// means node 0's launcher is gone. Either way fd() becomes readable and remote() says why.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/node_records.h"
#include "fastrun/runtime/os/periodic_thread.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::launcher {

class NodeWatch {
 public:
  static constexpr std::chrono::milliseconds kInterval{100};
  static constexpr std::chrono::milliseconds kLostAfter{1500};
  static constexpr std::chrono::milliseconds kFirstBeatWithin{10000};  // after the node rendezvous

  // `hosts`: every node's host name, in node-rank order. Opens two connections to the store at
  // `address` (one for the thread, one for publish/finish) and starts the thread. `prefix`: where
  // its keys go ("": as above); a job with restarts watches each attempt under its own
  // (node_attempts.h), so that no attempt sees the last one's failure, heartbeats or acks.
  // `arrivals` (node 0, --nnodes MIN:MAX): called by the thread each round while this node's
  // ranks run; a text (which node is back) stops the attempt on every node as a "joining" record.
  using Arrivals = std::function<std::optional<std::string>()>;
  // `coordinator_apart` (--store-only, node_options.h): slot 0 (`node_rank` 0, hosts[0]) is the
  // store-only launcher, which runs no ranks, and the nodes are slots 1..: records and messages
  // name slot k as node k-1 (the node rank its ranks see), the store-only launcher as node -1.
  NodeWatch(const std::string& address, const std::string& token, int node_rank, std::vector<std::string> hosts,
            const std::string& prefix = "", Arrivals arrivals = {}, bool coordinator_apart = false);
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

  // An eventfd, readable once another node's failure (or the loss of node 0) is known.
  int fd() const { return event_.get(); }
  std::optional<NodeFailure> remote() const;

  // Records this node's failure unless one is recorded already; returns the recorded failure
  // when it is another node's (the job's first failure, which every launcher exits with).
  // `final`: no restart may follow (a signal to the launcher).
  std::optional<NodeFailure> publish(int exit_code, const std::string& why, bool final = false) noexcept;

  // The failure recorded for every node, if any (reads the store; throws what it throws).
  std::optional<NodeFailure> recorded();

  // After this node's ranks all succeeded: marks the node done. Node 0, which hosts the store,
  // then waits until every node is done or one fails (returned).
  std::optional<NodeFailure> finish_success();
  // After a failure, node 0 keeps the store up until every other node saw it (or 2 s passed),
  // so that they exit with the failure's code rather than "lost node 0".
  void finish_failure() noexcept;

 private:
  bool step();  // one round; false when the thread is done
  int shown(int slot) const { return slot - shift_; }
  std::string coordinator_name() const;  // "node 0 (host h)" or "the store-only launcher (host h)"
  void raise(NodeFailure f);

  int me_;
  int shift_;  // 1 when slot 0 is the store-only launcher
  std::vector<std::string> hosts_;
  std::string address_;
  std::unique_ptr<Store> watch_client_;  // the thread's
  std::unique_ptr<Store> main_client_;   // publish/finish (the supervisor's thread)
  os::UniqueFd event_;
  mutable std::mutex mutex_;  // remote_
  std::optional<NodeFailure> remote_;
  std::vector<std::int64_t> beats_;
  std::vector<std::chrono::steady_clock::time_point> beat_seen_;
  std::vector<bool> done_;
  Arrivals arrivals_;
  std::atomic<bool> finishing_{false};  // node 0's ranks are done: an arrival waits for the next job
  os::PeriodicThread thread_;  // last: stopped (joined) before the members it reads go
};

}  // namespace fastrun::launcher
