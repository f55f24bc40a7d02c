#include "fastrun/launcher/node_attempts.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/launcher/job_resources.h"
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
constexpr auto kLeaveWithin = std::chrono::seconds(5);

std::string key(int attempt, const std::string& what) { return launcher_keys::attempt(attempt) + "/" + what; }

// The job ends between two attempts (a signal to a launcher, recorded under kJobStopped): the
// code every launcher exits with.
struct JobStopped {
  int exit_code;
};

class NodeAttempts {
 public:
  NodeAttempts(NodeRendezvous& rendezvous, const NodePlan& plan, SupervisorOptions options)
      : rv_(rendezvous),
        store_(*rendezvous.store()),
        me_(plan.node_rank),
        nnodes_(plan.nnodes),
        timeout_(env::get_timeout(env::kTimeout)),
        so_(std::move(options)) {
    so_.restarts_by_caller = true;
  }

  int run() {
    for (int n = 0;; ++n) {
      // 1. The attempt: a fresh store for its ranks, its own node watch, its ranks.
      open_rank_store(n);
      std::optional<int> code;
      {
        NodeWatch watch(rv_.address(), rv_.token(), me_, rv_.hosts(), key(n, "watch"));
        so_.job.attempt = n;
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
        between(n);
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
      const bool restart = failure && !failure->final && !stopped() && n < so_.job.max_restarts;
      said = restart ? "restart" : "end";
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
    if (said == "restart") return std::nullopt;
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

  // Node k > 0: node 0's "restart" or "end" for attempt n. Polled, so that a signal to this
  // launcher (which stops the job) is seen meanwhile.
  std::string wait_for_verdict(int n) {
    std::string said;
    os::poll_until(Clock::time_point::max(), kEvery100ms, [&] {
      if (const int sig = pending_stop_signal()) {
        stop_job(128 + sig, fmt::format("the launcher on node {} got {}", me_, signal_name(sig)));
        throw JobStopped{128 + sig};
      }
      if (!store_.check({key(n, "verdict")})) return false;
      said = to_string(store_.get(key(n, "verdict"), timeout_));
      return true;
    });
    return said;
  }

  // Between attempt n and n+1: the back-off (the same on every node), the segments this node's
  // ranks left, and the start round, which no node passes before every node reaped attempt n.
  void between(int n) {
    const auto delay = restart_backoff(n + 1);
    const std::string notice = restart_notice(n + 1, so_.job.max_restarts, delay);
    std::fputs(notice.c_str(), stderr);
    if (const int sig = wait_before_restart(delay, so_.handle_signals)) {
      stop_job(128 + sig, fmt::format("the launcher on node {} got {} before attempt {} started", me_,
                                      signal_name(sig), n + 1));
      throw JobStopped{128 + sig};
    }
    remove_job_segments(so_.job.run_id);
    RoundOptions round;
    round.prefix = key(n + 1, "start");
    round.rank = me_;
    round.size = nnodes_;
    round.timeout = timeout_;
    round.poll = [&](const std::function<std::vector<int>()>&) {
      if (const int sig = pending_stop_signal()) {
        stop_job(128 + sig, fmt::format("the launcher on node {} got {} before attempt {} started", me_,
                                        signal_name(sig), n + 1));
        throw JobStopped{128 + sig};
      }
      if (auto s = stopped()) {
        std::fprintf(stderr, "fastrun: the job was stopped: %s\n", s->why.c_str());
        throw JobStopped{s->exit_code};
      }
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
        for (int k = 1; k < nnodes_; ++k)
          if (!store_.check({key(n, "left/" + std::to_string(k))})) return false;
        return true;
      });
    } catch (const std::exception& e) {
      log::warn("leaving the job after attempt {}: {}", n, e.what());
    }
    return code;
  }

  NodeRendezvous& rv_;
  Store& store_;  // node 0's launcher store (the rendezvous's client)
  const int me_;
  const int nnodes_;
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
