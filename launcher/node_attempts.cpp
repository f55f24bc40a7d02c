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
#include "fastrun/launcher/node_attempts_runner.h"
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
namespace attempts {
namespace {

constexpr os::Backoff kEvery100ms{std::chrono::milliseconds(100), std::chrono::milliseconds(100)};
constexpr auto kVerdictSlice = std::chrono::milliseconds(100);
constexpr auto kLeaveWithin = std::chrono::seconds(5);

}  // namespace

NodeAttempts::NodeAttempts(NodeRendezvous& rendezvous, const NodePlan& plan, SupervisorOptions options)
    : rv_(rendezvous),
      store_(*rendezvous.store()),
      coordinator_(plan.coordinates()),
      apart_(plan.coordinator_apart()),
      store_only_(plan.store_only),
      coordinator_host_(plan.master_addr),
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

int NodeAttempts::run() {
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
      NodeWatch watch(rv_.address(), rv_.token(), slot(), watch_hosts(), key(n, "watch"), arrivals(), apart_);
      so_.job.attempt = n;
      so_.job.resized_attempts = resized_;
      so_.nodes = &watch;
      JobResult local;  // the store-only launcher's part: no ranks, nothing failed
      if (!store_only_) {
        share_ranks();
        local = Supervisor(so_).run();
      }
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

void NodeAttempts::open_rank_store(int n) {
  StoreOptions so;
  so.timeout = timeout_;
  so.token = rv_.token();
  std::string address;
  if (coordinator_) {
    rank_hosted_.reset();
    const std::string& a = rv_.address();  // tcp://HOST:PORT: the same host, a port of its own
    rank_hosted_ = host_store(a.substr(0, a.rfind(':')) + ":0", so);
    address = rank_hosted_->address();
    store_.set(key(n, "store"), to_bytes(address));
  } else {
    try {
      address = to_string(store_.get(key(n, "store"), timeout_));
    } catch (const TimeoutError&) {
      throw TimeoutError(fmt::format("node {}: {} did not publish the store of attempt {} within {:.3g} s "
                                     "(FASTRUN_TIMEOUT)",
                                     me_, coordinator_name(), n, std::chrono::duration<double>(timeout_).count()));
    }
  }
  rank_client_ = connect_store(address, so);
  so_.job.store_address = address;
  so_.failure_store = rank_client_.get();
}

std::optional<int> NodeAttempts::verdict(int n, NodeWatch& watch, const JobResult& local) {
  // 1. This node's part: done (node 0: and every other node done, or a failure), or failed.
  std::optional<NodeFailure> failure;
  try {
    failure = local.exit_code == 0 ? watch.finish_success() : watch.recorded();
  } catch (const Error& e) {
    log::warn("attempt {}: lost {}'s store: {}", n, coordinator_name(), e.what());
    return local.exit_code != 0 ? local.exit_code : 1;
  }
  if (local.exit_code != 0 && !failure) failure = NodeFailure{local.exit_code, me_, "this node's attempt failed"};
  // A signal to this launcher ends the job even when another node's failure came first.
  if (local.stop_signal != 0) stop_job(local.exit_code, fmt::format("the launcher on node {} got {}", me_,
                                                                    signal_name(local.stop_signal)));
  // 2. Node 0 decides, the others wait for its decision.
  std::string said;
  if (coordinator_) {
    said = decide(n, failure);
    store_.set(key(n, "verdict"), to_bytes(said));
  } else {
    try {
      said = wait_for_verdict(n);
    } catch (const JobStopped& s) {
      return leave(n, local.stop_signal ? local.exit_code : s.exit_code);
    } catch (const Error& e) {
      std::fprintf(stderr, "fastrun: lost %s (its store) while waiting for its verdict on attempt %d: %s\n",
                   coordinator_name(), n, e.what());
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
    if (!store_only_ && std::find(next.begin(), next.end(), me_) == next.end()) {
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
    if (local.exit_code == 0 && failure->node < 0)  // the store-only launcher's: a signal to it
      std::fprintf(stderr, "fastrun: the job was stopped: %s\n", failure->why.c_str());
    else if (local.exit_code == 0)
      std::fprintf(stderr, "fastrun: the job failed on node %d: %s\n", failure->node, failure->why.c_str());
  }
  return leave(n, code);
}

std::string NodeAttempts::decide(int n, const std::optional<NodeFailure>& failure) {
  if (!failure || stopped()) return "end";
  if (min_nodes_ < max_nodes_) return decide_members(n, *failure);
  return !failure->final && restarts_ < so_.job.max_restarts ? "restart" : "end";
}

std::string NodeAttempts::wait_for_verdict(int n) {
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

int NodeAttempts::between(int n) {
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

int NodeAttempts::enter(int m) {
  for (;;) {
    try {
      start_round(m);
      // A member lost at the very end of the round (node 0 skipped it as the others passed).
      if (min_nodes_ < max_nodes_ && store_.check({key(m, "skip")})) throw SkipAttempt{};
      return m;
    } catch (const SkipAttempt&) {
      const std::string k = key(m + 1, "members");
      std::vector<int> next = decode_members(k, to_string(store_.get(k, timeout_)));
      if (!store_only_ && std::find(next.begin(), next.end(), me_) == next.end()) {
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

void NodeAttempts::start_round(int m) {
  const int n = m - 1;
  // The pulses of the members node 0 waits for (lost_before_start()).
  PulseWatch pulses;
  Clock::time_point looked{};
  RoundOptions round;
  round.prefix = key(n + 1, "start");
  round.rank = slot();
  round.size = slots();
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
    lost_before_start(m, pulses, looked, missing);
    if (min_nodes_ < max_nodes_ && store_.check({key(m, "skip")})) throw SkipAttempt{};
  };
  round.on_timeout = [&](const std::vector<int>& who) {
    // The round counts slots (node_of_slot): name the nodes, with the numbers the user gave them.
    std::vector<std::string> names;
    for (int i : who) {
      const auto k = node_of_slot(i);
      names.push_back(k ? fmt::format("node {} (host {})", *k, hosts_.at(static_cast<std::size_t>(*k)))
                        : std::string("the store-only launcher"));
    }
    throw TimeoutError(fmt::format("node {}: attempt {} could not start: {} did not come back within "
                                   "{:.3g} s (FASTRUN_TIMEOUT)",
                                   me_, n + 1, fmt::join(names, ", "), std::chrono::duration<double>(timeout_).count()));
  };
  store_round_barrier(store_, round);
}

void NodeAttempts::stop_job(int exit_code, const std::string& why) {
  try {
    set_if_absent(store_, launcher_keys::kJobStopped, encode(NodeFailure{exit_code, me_, why, false, true}));
  } catch (const std::exception& e) {
    log::warn("could not record in node 0's store that the job stops: {}", e.what());
  }
}

std::optional<NodeFailure> NodeAttempts::stopped() {
  if (!store_.check({launcher_keys::kJobStopped})) return std::nullopt;
  return decode_node_failure(to_string(store_.get(launcher_keys::kJobStopped, timeout_)));
}

int NodeAttempts::leave(int n, int code) {
  try {
    if (!coordinator_) {
      store_.set(key(n, "left/" + std::to_string(me_)), to_bytes("1"));
      return code;
    }
    os::poll_until(Clock::now() + kLeaveWithin, kEvery100ms, [&] {
      for (int k : members_)
        if (!decides(k) && std::find(gone_.begin(), gone_.end(), k) == gone_.end() &&
            !store_.check({key(n, "left/" + std::to_string(k))}))
          return false;
      return true;
    });
  } catch (const std::exception& e) {
    log::warn("leaving the job after attempt {}: {}", n, e.what());
  }
  return code;
}

}  // namespace attempts

int run_node_attempts(NodeRendezvous& rendezvous, const NodePlan& plan, SupervisorOptions options) {
  return attempts::NodeAttempts(rendezvous, plan, std::move(options)).run();
}

}  // namespace fastrun::launcher
