#pragma once
// Multi-node set-up (docs/multinode.md), before any rank starts: node 0's launcher hosts the
// job's TCP store on master-addr:master-port; every launcher connects (retrying until the join
// timeout), announces how many ranks it runs, and all agree through the store on each node's
// rank offset (node-rank order), the run id and the ranks' MASTER_ADDR/MASTER_PORT.
//
// Keys (all under "fastrun/launcher/"): node/<k> = "<ranks>\t<host>\t<pid>" (claimed with
// compare_set, so two launchers with one node rank are refused), run-id, rank-master, and the
// nodes' round under nodes/ (runtime/store/gather.h: one all-gather of the node entries, O(nodes)).
// With --nnodes MIN:MAX the nodes do not meet in that round: node 0 starts the job on the nodes
// there once all MAX are, or --last-call seconds after the MIN-th arrived (torchrun's last call),
// and publishes attempt 0's members; a launcher left out, or whose node/<k> is taken (a lost node
// started again), asks node 0 to take it into the running job (node_attempts.h).
#include <memory>
#include <string>
#include <vector>

#include "fastrun/launcher/job_config.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"

namespace fastrun::launcher {

class NodePulse;

class NodeRendezvous {
 public:
  // Node 0 (or, with --store-only, the store-only launcher, which runs no ranks and is none of
  // the job's nodes: node_options.h): hosts the store (StoreError naming the address when it
  // cannot listen). Others:
  // connect within `timeout` (StoreError naming node 0's address when it never answers).
  // The token: FASTRUN_STORE_TOKEN, else one derived from the address, with a warning.
  NodeRendezvous(const NodePlan& plan, Duration timeout);
  ~NodeRendezvous();
  NodeRendezvous(const NodeRendezvous&) = delete;
  NodeRendezvous& operator=(const NodeRendezvous&) = delete;

  // Announces job.world_size ranks on this node and waits for every node (TimeoutError naming
  // the nodes that never arrived). Then fixes job.node, job.run_id (node 0's; a different
  // --run-id on another node is a ConfigError), job.log_dir (log_root/<run-id>),
  // job.store_address and the ranks' MASTER_ADDR/MASTER_PORT.
  void agree(JobConfig& job, const JobOptions& options);

  Store* store() { return client_.get(); }
  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  // Host names of the nodes, in node-rank order (after agree()).
  const std::vector<std::string>& hosts() const { return hosts_; }
  // How many ranks each node runs, in node-rank order (after agree()).
  const std::vector<int>& ranks() const { return ranks_; }
  // The attempt this node starts with: 0, or, for a node that came back to a running job with
  // --nnodes MIN:MAX, the one node 0 took it into (node_attempts.h; hosts() and ranks() are then
  // empty: the attempt's members say who runs).
  int first_attempt() const { return first_attempt_; }
  // The nodes of the first attempt (--node-rank, ascending; after agree(), when first_attempt()
  // is 0): all of them, or with --nnodes MIN:MAX those present at the end of the last call.
  const std::vector<int>& members() const { return members_; }

 private:
  NodePlan plan_;
  Duration timeout_;
  std::string address_;  // tcp://master-addr:master-port
  std::string token_;
  std::unique_ptr<HostedStore> hosted_;  // node 0 only
  std::unique_ptr<Store> client_;
  std::vector<std::string> hosts_;
  std::vector<int> ranks_;
  int first_attempt_ = 0;
  std::vector<int> members_;
  std::unique_ptr<NodePulse> pulse_;  // node k > 0 of an elastic job, for the whole job

  // Who hosts the store and decides, in messages: "node 0", or "the store-only launcher".
  std::string coordinator() const;
  void check_same_store();
  void meet_after_last_call(JobConfig& job, const JobOptions& options, const std::string& mine,
                            const std::string& self_host);
  void check_same_nnodes();
  void join_running_job(const std::string& entry);
  void adopt_job_settings(JobConfig& job, const JobOptions& options);
};

// A stop signal (SIGINT, SIGTERM or SIGHUP) pending while the launcher blocks them and nothing
// reads them yet (connecting, waiting for the other nodes); 0 when none.
int pending_stop_signal();

// Thrown by those waits when a stop signal is pending: the launcher exits with 128 + signal.
class Interrupted : public Error {
 public:
  explicit Interrupted(int sig);
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace fastrun::launcher
