#include "fastrun/launcher/node_rendezvous.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/launcher/free_port.h"
#include "fastrun/launcher/node_pulse.h"
#include "fastrun/launcher/node_records.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/cluster/local_address.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/env_sources.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/process_group/peer_info.h"
#include "fastrun/runtime/store/gather.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun::launcher {
namespace {

// " (from ...)" when srun or mpirun gave the address, so the user knows what to override.
std::string derived_from(const NodePlan& plan) {
  return plan.master_from.empty() ? "" : fmt::format(" (from {}; give --master-addr/--master-port to choose)",
                                                     plan.master_from);
}

// Set by a store-only launcher before the job's other settings: a compute node reads it to check
// that it was started for such a job (--external-store), and the other way round.
constexpr const char* kStoreOnlyKey = "fastrun/launcher/store-only";

// The secret given to every node (FASTRUN_STORE_TOKEN, not empty), read once per launcher.
std::optional<std::string> given_store_token() {
  if (auto t = env::find_string(env::kStoreToken); t && !t->empty()) return t;
  return std::nullopt;
}

// Said by the launcher that hosts the store, once it does, when no secret was given.
void warn_store_token_derived(const NodePlan& plan) {
  log::warn("FASTRUN_STORE_TOKEN is not set: the job's store on {}:{} accepts anyone who knows that address "
            "(the token is derived from it); export one secret to every node, e.g. "
            "FASTRUN_STORE_TOKEN=$(openssl rand -hex 32) in the job script (docs/multinode.md)",
            plan.master_addr, plan.master_port);
}

}  // namespace

int pending_stop_signal() {
  sigset_t pending;
  if (::sigpending(&pending) != 0) return 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    if (sigismember(&pending, sig)) return sig;
  return 0;
}

Interrupted::Interrupted(int sig)
    : Error(fmt::format("got {} while waiting for the other nodes; stopped", signal_name(sig))), signal_(sig) {}

NodeRendezvous::NodeRendezvous(const NodePlan& plan, Duration timeout) : plan_(plan), timeout_(timeout) {
  const std::string host =
      plan.master_addr.find(':') != std::string::npos ? "[" + plan.master_addr + "]" : plan.master_addr;
  address_ = fmt::format("tcp://{}:{}", host, plan.master_port);
  // The token launchers and ranks present to the job's store: the given secret, else one derived
  // from master address and port (no secret: the hosting launcher warns; docs/multinode.md).
  const std::optional<std::string> given_token = given_store_token();
  token_ = given_token ? *given_token : join_detail::address_token(plan.master_addr, plan.master_port);
  StoreOptions so;
  so.timeout = timeout;
  so.token = token_;
  if (plan.coordinates()) {
    const auto cannot_host = [&](const Error& e, std::string_view remedy) {
      return fmt::format("{}: cannot host the job's store on --master-addr {} --master-port {}{}: {}{}",
                         plan.store_only ? "--store-only" : "node 0", plan.master_addr, plan.master_port,
                         derived_from(plan), e.what(), remedy);
    };
    try {
      hosted_ = host_store(address_, so);
    } catch (const ConfigError& e) {
      // A name that does not resolve, an address not this host's, a port in use: the flags' fault.
      throw ConfigError(cannot_host(e, "; give this host's own address as --master-addr and a port free on it as "
                                       "--master-port (the same on every node)"));
    } catch (const Error& e) {
      throw StoreError(cannot_host(e, ""));
    }
    // Only now: a launcher that cannot host says why without a warning about the token first.
    if (!given_token) warn_store_token_derived(plan);
    address_ = hosted_->address();  // the port actually bound (--nnodes 1 may ask for 0)
    client_ = hosted_->connect();
  } else {
    // In slices of a second, so that Ctrl-C is noticed while node 0 is not up yet.
    const Deadline deadline(timeout);
    for (;;) {
      so.timeout = std::min<Duration>(deadline.left(), std::chrono::seconds(1));
      try {
        client_ = connect_store(address_, so);
        break;
      } catch (const StoreError& e) {
        if (const int sig = pending_stop_signal()) throw Interrupted(sig);
        if (!deadline.passed() && std::string(e.what()).find("authentication") == std::string::npos)
          continue;
        throw StoreError(fmt::format("node {}: cannot reach {}'s store at {}{} within {:.3g} s (--master-addr, "
                                     "--master-port, FASTRUN_TIMEOUT): {}",
                                     plan.node_rank, coordinator(), address_, derived_from(plan),
                                     std::chrono::duration<double>(timeout).count(), e.what()));
      }
    }
  }
  client_->set_timeout(timeout);
}

NodeRendezvous::~NodeRendezvous() = default;

std::string NodeRendezvous::coordinator() const {
  return plan_.coordinator_apart() ? "the store-only launcher" : "node 0";
}

void NodeRendezvous::agree(JobConfig& job, const JobOptions& options) {
  const int me = plan_.node_rank;
  const std::string self_host = this_host_name();
  // 1. Node 0 (or the store-only launcher) fixes what every node must share: the run id, the seed
  // and the ranks' MASTER_PORT.
  if (plan_.coordinates()) {
    if (plan_.store_only) client_->set(kStoreOnlyKey, to_bytes("1"));
    client_->set(launcher_keys::kRunId, to_bytes(job.run_id));
    client_->set(launcher_keys::kSeed, to_bytes(job.seed));
    client_->set(launcher_keys::kMaxRestarts, to_bytes(std::to_string(job.max_restarts)));
    client_->set(launcher_keys::kNnodes, to_bytes(fmt::format("{}:{}", plan_.min_nnodes, plan_.nnodes)));
    client_->set(launcher_keys::kRankMaster, to_bytes(fmt::format("{}", pick_free_port(plan_.master_addr))));
  }
  if (!plan_.coordinates()) {
    check_same_nnodes();
    check_same_store();
  }
  if (plan_.store_only) {  // no node of its own: it waits for the compute nodes and names the members
    meet_after_last_call(job, options, std::string(), self_host);
    return;
  }
  // 2. Claim this node's entry: a second launcher with the same --node-rank is refused.
  NodeEntry entry;
  entry.ranks = job.world_size;
  entry.host = self_host;
  entry.pid = static_cast<long>(::getpid());
  if (plan_.external_store) {
    // The store-only launcher's host runs no rank: the attempt's first node names the ranks'
    // MASTER_ADDR/MASTER_PORT instead (node_attempts.h, share_ranks), from this entry.
    entry.rank_master_addr = cluster::local_address_towards(plan_.master_addr, plan_.master_port);
    entry.rank_master_port = pick_free_port(entry.rank_master_addr);
  }
  const std::string mine = encode(entry);
  const std::string got = set_if_absent(*client_, launcher_keys::node(me), mine);
  // An elastic job's node 0 tells the live nodes from the lost ones by this (node_pulse.h).
  if (plan_.elastic() && !plan_.coordinates()) pulse_ = std::make_unique<NodePulse>(address_, token_, me);
  if (got != mine && plan_.elastic() && !plan_.coordinates()) {
    // --nnodes MIN:MAX: this node's place is an earlier launcher's, lost or running; node 0
    // takes this one into its next attempt (node_attempts.h), or it times out.
    join_running_job(mine);
    adopt_job_settings(job, options);
    job.node.host = self_host;
    return;
  }
  if (got != mine) {
    const NodeEntry other = decode_node_entry(me, got);
    throw ConfigError(fmt::format("--node-rank {}: node {} already joined this job from host {} (pid {}); give each "
                                  "launcher its own node rank, 0 to {}",
                                  me, me, other.host, other.pid, plan_.nnodes - 1));
  }
  if (plan_.elastic() || plan_.coordinator_apart()) {
    meet_after_last_call(job, options, mine, self_host);
    return;
  }
  // 3. Meet every node in one round (runtime/store/gather.h): each node's entry goes in once,
  // the last node to arrive publishes all of them under one key that the others wait on (O(nodes)
  // requests; this was every node checking every node's key in a sleep-poll). At the deadline,
  // name the ones missing.
  std::vector<int> missing;  // as last seen: what to report if node 0's store goes first
  for (int k = 0; k < plan_.nnodes; ++k)
    if (k != me) missing.push_back(k);
  const auto never_arrived = [&](const std::string& also) {
    return TimeoutError(fmt::format(
        "node {} ({}): {} of {} nodes never arrived within {:.3g} s: node{} [{}]{} (store {}; start a fastrun with "
        "--node-rank K --master-addr {} --master-port {} on each, or raise FASTRUN_TIMEOUT)",
        me, self_host, missing.size(), plan_.nnodes, std::chrono::duration<double>(timeout_).count(),
        missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), also, address_, plan_.master_addr,
        plan_.master_port));
  };
  RoundOptions round;
  round.prefix = launcher_keys::kNodesRound;
  round.rank = me;
  round.size = plan_.nnodes;
  round.timeout = timeout_;
  std::optional<std::chrono::steady_clock::time_point> refreshed;
  round.poll = [&](const std::function<std::vector<int>()>& who) {
    if (const int sig = pending_stop_signal()) throw Interrupted(sig);
    // At the first slice, then once a second (the list is only for a message).
    if (!refreshed || std::chrono::steady_clock::now() - *refreshed >= std::chrono::seconds(1)) {
      missing = who();
      refreshed = std::chrono::steady_clock::now();
    }
  };
  round.on_timeout = [&](const std::vector<int>& who) {
    if (who.empty()) return;
    missing = who;
    throw never_arrived("");
  };
  std::vector<Bytes> entries;
  try {
    entries = store_all_gather(*client_, round, to_bytes(mine));
  } catch (const StoreError& e) {
    // Node 0 gave up at the same deadline and took its store down: the cause is the same.
    if (me != 0) throw never_arrived(fmt::format("; node 0 gave up first ({})", e.what()));
    throw;
  }
  // 4. Offsets in node-rank order.
  int offset = 0, world = 0;
  hosts_.clear();
  ranks_.clear();
  for (int k = 0; k < plan_.nnodes; ++k) {
    const NodeEntry e = decode_node_entry(k, to_string(entries[static_cast<std::size_t>(k)]));
    if (k == me) offset = world;
    world += e.ranks;
    hosts_.push_back(e.host);
    ranks_.push_back(e.ranks);
  }
  job.node.nnodes = plan_.nnodes;
  job.node.node_rank = me;
  job.node.rank_offset = offset;
  job.node.world_size = world;
  job.node.host = self_host;
  members_.clear();
  for (int k = 0; k < plan_.nnodes; ++k) members_.push_back(k);
  adopt_job_settings(job, options);
  log::info("node {} of {} ({}): ranks {}..{} of {}, store {}, run {}", me, plan_.nnodes, self_host, offset,
            offset + job.world_size - 1, world, address_, job.run_id);
}

// --nnodes MIN:MAX, as torchrun's c10d rendezvous: node 0 starts the job on the nodes present
// once all MAX are there, or `last_call` after the MIN-th arrived (the window starts once, at the
// MIN-th arrival: torchrun's _add_to_participants sets its deadline when the count reaches
// min_nodes and later arrivals do not move it). It publishes attempt 0's members; a node left
// out (late) asks to join the running job, as a node that comes back does.
void NodeRendezvous::meet_after_last_call(JobConfig& job, const JobOptions& options, const std::string& mine,
                                          const std::string& self_host) {
  using Clock = std::chrono::steady_clock;
  const int me = plan_.node_rank;
  const std::string members_key = launcher_keys::attempt(0) + "/members";
  const auto deadline = Clock::now() + timeout_;
  const auto seconds = [](Duration d) { return std::chrono::duration<double>(d).count(); };
  std::vector<int> members;
  const int first_node = plan_.coordinator_apart() ? 0 : 1;  // the nodes node 0 (or the store-only launcher) waits for
  const std::string who = plan_.store_only ? "the store-only launcher" : "node 0";
  if (plan_.coordinates()) {
    // One check per node every 100 ms: the node keys are what a launcher claims on arrival.
    std::optional<Clock::time_point> last_call_ends;
    std::vector<int> missing;
    os::BackoffSleeper sleeper({std::chrono::milliseconds(100), std::chrono::milliseconds(100)});
    for (;;) {
      if (const int sig = pending_stop_signal()) throw Interrupted(sig);
      members = first_node == 0 ? std::vector<int>{} : std::vector<int>{0};
      missing.clear();
      for (int k = first_node; k < plan_.nnodes; ++k) (client_->check({launcher_keys::node(k)}) ? members : missing).push_back(k);
      const auto now = Clock::now();
      if (missing.empty()) break;
      if (static_cast<int>(members.size()) >= plan_.min_nnodes) {
        if (!last_call_ends) {
          last_call_ends = now + plan_.last_call;
          std::fprintf(stderr,
                       "fastrun: %s: %zu of %d nodes are here (--nnodes %d:%d); the job starts in %.3g s "
                       "(--last-call, FASTRUN_LAST_CALL) or when all %d are\n",
                       who.c_str(), members.size(), plan_.nnodes, plan_.min_nnodes, plan_.nnodes,
                       seconds(plan_.last_call), plan_.nnodes);
        }
        if (now >= *last_call_ends) break;
      } else if (now >= deadline) {
        throw TimeoutError(fmt::format(
            "{} ({}): {} of the {} nodes needed (--nnodes {}:{}) arrived within {:.3g} s: node{} [{}] never "
            "came (store {}; start a fastrun with --node-rank K --master-addr {} --master-port {} on each, or raise "
            "FASTRUN_TIMEOUT)",
            who, self_host, members.size(), plan_.min_nnodes, plan_.min_nnodes, plan_.nnodes, seconds(timeout_),
            missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), address_, plan_.master_addr, plan_.master_port));
      }
      // Never past the deadline that applies now: the last call's end, or FASTRUN_TIMEOUT's.
      sleeper.sleep(last_call_ends.value_or(deadline));
    }
    client_->set(members_key, to_bytes(encode_members(members)));
    if (!missing.empty())
      std::fprintf(stderr,
                   "fastrun: %s: starting the job on %zu of %d nodes (--nnodes %d:%d): node%s [%s] did not "
                   "arrive within the last call of %.3g s and join%s at the next attempt when %s\n",
                   who.c_str(), members.size(), plan_.nnodes, plan_.min_nnodes, plan_.nnodes, missing.size() == 1 ? "" : "s",
                   fmt::format("{}", fmt::join(missing, ", ")).c_str(), seconds(plan_.last_call),
                   missing.size() == 1 ? "s" : "", missing.size() == 1 ? "it comes" : "they come");
  } else {
    // In slices, so that a signal to this launcher is seen meanwhile.
    for (;;) {
      if (const int sig = pending_stop_signal()) throw Interrupted(sig);
      try {
        client_->wait({members_key}, std::chrono::milliseconds(100));
        break;
      } catch (const TimeoutError&) {
        if (Clock::now() >= deadline)
          throw TimeoutError(fmt::format("node {} ({}): {} did not start the job within {:.3g} s: fewer than "
                                         "the {} nodes of --nnodes {}:{} arrived (store {}; raise FASTRUN_TIMEOUT)",
                                         me, self_host, who, seconds(timeout_), plan_.min_nnodes, plan_.min_nnodes,
                                         plan_.nnodes, address_));
      }
    }
    members = decode_members(members_key, to_string(client_->get(members_key, timeout_)));
    if (std::find(members.begin(), members.end(), me) == members.end()) {
      // Late: the job started without this node after its last call; it joins the next attempt.
      join_running_job(mine);
      adopt_job_settings(job, options);
      job.node.host = self_host;
      return;
    }
  }
  // Offsets over the members, in node-rank order.
  hosts_.assign(static_cast<std::size_t>(plan_.nnodes), std::string());
  ranks_.assign(static_cast<std::size_t>(plan_.nnodes), 0);
  int offset = 0, world = 0;
  for (int k : members) {
    const NodeEntry e = decode_node_entry(k, to_string(client_->get(launcher_keys::node(k), timeout_)));
    if (k == me) offset = world;
    world += e.ranks;
    hosts_[static_cast<std::size_t>(k)] = e.host;
    ranks_[static_cast<std::size_t>(k)] = e.ranks;
  }
  members_ = members;
  job.node.nnodes = static_cast<int>(members.size());
  job.node.node_rank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  job.node.rank_offset = offset;
  job.node.world_size = world;
  job.node.host = self_host;
  adopt_job_settings(job, options);
  if (plan_.store_only) {
    log::info("store-only launcher ({}): the job starts on node{} [{}] of --nnodes {}:{}, {} ranks, store {}, run {}",
              self_host, members.size() == 1 ? "" : "s", fmt::join(members, ", "), plan_.min_nnodes, plan_.nnodes,
              world, address_, job.run_id);
    return;
  }
  log::info("node {} ({}) of {} (--nnodes {}:{}; {}): ranks {}..{} of {}, store {}, run {}", job.node.node_rank, me,
            members.size(), plan_.min_nnodes, plan_.nnodes, self_host, offset, offset + job.world_size - 1, world,
            address_, job.run_id);
}

void NodeRendezvous::join_running_job(const std::string& entry) {
  const int me = plan_.node_rank;
  std::fprintf(stderr,
               "fastrun: node %d: the job runs already (--nnodes %d:%d); waiting for %s to take this node "
               "into its next attempt\n",
               me, plan_.min_nnodes, plan_.nnodes, coordinator().c_str());
  client_->set(launcher_keys::joining(me), to_bytes(entry));
  const std::string admitted = launcher_keys::joining(me) + "/admitted";
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const bool admitted_in_time =
      os::poll_until(deadline, {std::chrono::milliseconds(100), std::chrono::milliseconds(100)}, [&] {
        if (const int sig = pending_stop_signal()) throw Interrupted(sig);
        return client_->check({admitted});
      });
  if (!admitted_in_time)
    throw TimeoutError(fmt::format("node {}: {} did not take this node into the running job within {:.3g} s "
                                   "(FASTRUN_TIMEOUT); is a launcher with --node-rank {} still running in it?",
                                   me, coordinator(), std::chrono::duration<double>(timeout_).count(), me));
  // Node 0's records: a damaged one is refused, naming its key (stoi read '3x' as 3).
  first_attempt_ = static_cast<int>(
      text::parse_integer(fmt::format("store key {}", admitted), to_string(client_->get(admitted, timeout_)), 0, INT32_MAX));
  client_->delete_key(admitted);
}

// Before a node meets the others: an elastic node and a fixed one would wait for each other in
// different ways (the round, node 0's members), so the set of nodes the job may shrink to
// (node_attempts.h) is compared first.
void NodeRendezvous::check_same_nnodes() {
  const std::string nnodes = to_string(client_->get(launcher_keys::kNnodes, timeout_));
  if (nnodes != fmt::format("{}:{}", plan_.min_nnodes, plan_.nnodes))
    throw ConfigError(fmt::format("--nnodes {}: {} runs this job with --nnodes {}; give every node the same",
                                  plan_.elastic() ? fmt::format("{}:{}", plan_.min_nnodes, plan_.nnodes)
                                                  : std::to_string(plan_.nnodes),
                                  coordinator(), nnodes));
}

// A node started without --external-store would host the store itself (node 0) or take node 0's
// place in its decisions; one with it against node 0's store would wait for a coordinator that
// never comes. The store-only launcher sets its key before kNnodes, which check_same_nnodes() waited for.
void NodeRendezvous::check_same_store() {
  const bool store_only = client_->check({kStoreOnlyKey});
  if (store_only && !plan_.external_store)
    throw ConfigError(fmt::format("node {}: the store at {} is a fastrun --store-only's: give --external-store to "
                                  "every compute node of this job (docs/multinode.md)",
                                  plan_.node_rank, address_));
  if (!store_only && plan_.external_store)
    throw ConfigError(fmt::format("node {}: --external-store, but the store at {} is node 0's, not a fastrun "
                                  "--store-only's: leave --external-store out, or start the store-only launcher "
                                  "there",
                                  plan_.node_rank, address_));
}

// Step 5 of agree(), also for a node that joins a running job: what node 0 fixed.
void NodeRendezvous::adopt_job_settings(JobConfig& job, const JobOptions& options) {
  const std::string run_id = to_string(client_->get(launcher_keys::kRunId, timeout_));
  if (!options.run_id.empty() && options.run_id != run_id)
    throw ConfigError(fmt::format("--run-id {}: {} runs this job as '{}'; give every node the same --run-id, "
                                  "or none (the nodes then share its)",
                                  options.run_id, coordinator(), run_id));
  // The count of restarts is the job's (node_attempts.h): every node must allow the same.
  const std::string max_restarts = to_string(client_->get(launcher_keys::kMaxRestarts, timeout_));
  if (max_restarts != std::to_string(job.max_restarts))
    throw ConfigError(fmt::format("--max-restarts {} (or FASTRUN_MAX_RESTARTS): {} runs this job with "
                                  "--max-restarts {}; give every node the same",
                                  job.max_restarts, coordinator(), max_restarts));
  job.run_id = run_id;
  job.seed = to_string(client_->get(launcher_keys::kSeed, timeout_));
  job.log_dir = options.log_dir.empty() ? std::string() : options.log_dir + "/" + run_id;
  job.store_address = address_;
  job.rank_master_addr = plan_.master_addr;
  job.rank_master_port = static_cast<int>(text::parse_integer(fmt::format("store key {}", launcher_keys::kRankMaster),
                                                              to_string(client_->get(launcher_keys::kRankMaster, timeout_)),
                                                              1, 65535));
  job.node.store_token = token_;
  // The address gloo binds on this node: the one that routes to node 0, unless the user chose.
  if (!env::raw(env::kGlooHost)) job.node.gloo_host = cluster::local_address_towards(plan_.master_addr, plan_.master_port);
}

}  // namespace fastrun::launcher
