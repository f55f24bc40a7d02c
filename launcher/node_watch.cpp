#include "fastrun/launcher/node_watch.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include <fmt/format.h>

#include "fastrun/launcher/node_rendezvous.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/prefix_store.h"

namespace fastrun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Short timeouts: the store is already up, and a launcher that stops answering is the news.
std::unique_ptr<Store> connect_short(const std::string& address, const std::string& token, const std::string& prefix) {
  StoreOptions so;
  so.timeout = std::chrono::seconds(5);
  so.token = token;
  auto client = connect_store(address, so);
  if (prefix.empty()) return client;
  return std::make_unique<PrefixStore>(prefix, std::move(client));
}

}  // namespace

NodeWatch::NodeWatch(const std::string& address, const std::string& token, int node_rank,
                     std::vector<std::string> hosts, const std::string& prefix, Arrivals arrivals,
                     bool coordinator_apart)
    : me_(node_rank), shift_(coordinator_apart ? 1 : 0), hosts_(std::move(hosts)), address_(address), arrivals_(std::move(arrivals)) {
  watch_client_ = connect_short(address, token, prefix);
  main_client_ = connect_short(address, token, prefix);
  event_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!event_) throw_errno("eventfd", errno);
  const std::size_t n = hosts_.size();
  beats_.assign(n, -1);
  beat_seen_.assign(n, Clock::now());
  done_.assign(n, false);
  thread_.start(kInterval, [this] { return step(); });
}

NodeWatch::~NodeWatch() { thread_.stop(); }

std::string NodeWatch::coordinator_name() const {
  return fmt::format("{} (host {})", shift_ ? "the store-only launcher" : "node 0", hosts_.empty() ? "?" : hosts_[0]);
}

std::optional<NodeFailure> NodeWatch::remote() const {
  std::lock_guard lock(mutex_);
  return remote_;
}

void NodeWatch::raise(NodeFailure f) {
  {
    std::lock_guard lock(mutex_);
    if (remote_) return;
    remote_ = std::move(f);
  }
  const std::uint64_t one = 1;
  (void)::write(event_.get(), &one, sizeof one);
}

bool NodeWatch::step() {
  Store& s = *watch_client_;
  try {
    if (s.check({launcher_keys::kNodeFailure})) {
      NodeFailure f = decode_node_failure(to_string(s.get(launcher_keys::kNodeFailure, std::chrono::seconds(5))));
      s.set(launcher_keys::ack(me_), to_bytes("1"));  // node 0 may now take the store down
      if (f.node == shown(me_)) return false;     // our own, published by the supervisor
      raise(std::move(f));
      return false;
    }
    if (me_ != 0) {
      s.add(launcher_keys::heartbeat(me_), 1);
      return true;
    }
    const auto now = Clock::now();
    for (std::size_t k = 1; k < hosts_.size(); ++k) {
      if (done_[k]) continue;
      if (s.check({launcher_keys::done(static_cast<int>(k))})) {
        done_[k] = true;
        continue;
      }
      const std::int64_t beat = s.add(launcher_keys::heartbeat(static_cast<int>(k)), 0);
      // Before a node's first heartbeat, allow for its start-up (log directories on a slow
      // shared filesystem, a loaded machine) rather than call it lost.
      const auto allowed = beat > 0 ? std::chrono::duration_cast<Clock::duration>(kLostAfter)
                                    : std::chrono::duration_cast<Clock::duration>(kFirstBeatWithin);
      if (beat != beats_[k]) {
        beats_[k] = beat;
        beat_seen_[k] = now;
      } else if (now - beat_seen_[k] > allowed) {
        NodeFailure lost{1, shown(static_cast<int>(k)),
                         fmt::format("node {} (host {}): its launcher stopped answering (no heartbeat for {:.1f} s: "
                                     "killed, or the network to it is down)",
                                     shown(static_cast<int>(k)), hosts_[k], std::chrono::duration<double>(allowed).count()),
                         false, /*final=*/true, /*lost=*/true};  // a fixed set of nodes cannot restart without it
        const std::string got = set_if_absent(s, launcher_keys::kNodeFailure, encode(lost));
        raise(decode_node_failure(got));
        return false;
      }
    }
    if (arrivals_ && !finishing_) {
      if (auto why = arrivals_()) {
        NodeFailure back{1, shown(0), *why, false, false, false, /*joining=*/true};
        raise(decode_node_failure(set_if_absent(s, launcher_keys::kNodeFailure, encode(back))));
        return false;
      }
    }
    return true;
  } catch (const std::exception& e) {
    if (me_ == 0) {
      log::warn("node watch: the job's store on this node failed: {}", e.what());
      return false;
    }
    raise(NodeFailure{1, shown(0),
                      fmt::format("{}: lost the job's store at {}: {} launcher is gone ({})", coordinator_name(),
                                  address_, shift_ ? "the store-only" : "node 0's", e.what()),
                      true});
    return false;
  }
}

std::optional<NodeFailure> NodeWatch::recorded() {
  if (!main_client_->check({launcher_keys::kNodeFailure})) return std::nullopt;
  return decode_node_failure(to_string(main_client_->get(launcher_keys::kNodeFailure, std::chrono::seconds(5))));
}

std::optional<NodeFailure> NodeWatch::publish(int exit_code, const std::string& why, bool final) noexcept {
  try {
    const NodeFailure mine{exit_code, shown(me_), why, false, final};
    const std::string got = set_if_absent(*main_client_, launcher_keys::kNodeFailure, encode(mine));
    const NodeFailure first = decode_node_failure(got);
    main_client_->set(launcher_keys::ack(me_), to_bytes("1"));  // seen: node 0 need not wait for this node
    if (first.node != shown(me_)) return first;
  } catch (const std::exception& e) {
    // Node 0 gone: the other nodes find out by themselves; this node reports its own failure.
    log::warn("could not record this node's failure in the job's store {}: {}", address_, e.what());
  }
  return std::nullopt;
}

std::optional<NodeFailure> NodeWatch::finish_success() {
  if (me_ != 0) {
    thread_.stop();  // no more heartbeats: node 0 reads done/<k> first
    try {
      main_client_->set(launcher_keys::done(me_), to_bytes("1"));
    } catch (const std::exception& e) {
      log::warn("could not tell node 0 that this node is done: {}", e.what());
    }
    return remote();
  }
  // Node 0: the store must outlive every node's ranks. The store-only launcher, whose ranks are
  // none, keeps taking nodes that come back meanwhile.
  finishing_ = shift_ == 0;
  for (;;) {
    const auto f = remote();
    // A node back just as the last one finished: the job is done, there is no attempt to join.
    if (f && !(shift_ && f->joining)) return f;
    if (const int sig = pending_stop_signal()) {
      // Ctrl-C while node 0 waits for the others: it stops the whole job, as it would earlier.
      const std::string why = shift_ ? fmt::format("{} got {}", coordinator_name(), signal_name(sig))
                                     : fmt::format("the launcher on {} got {}", coordinator_name(), signal_name(sig));
      if (auto first = publish(128 + sig, why, true)) return first;
      return NodeFailure{128 + sig, shown(0), why, false, true};
    }
    bool all_done = true;
    for (std::size_t k = 1; k < hosts_.size() && all_done; ++k)
      all_done = main_client_->check({launcher_keys::done(static_cast<int>(k))});
    if (all_done) return std::nullopt;
    if (f) return f;  // the joining node stops the attempt on the nodes still running
    std::this_thread::sleep_for(kInterval);
  }
}

void NodeWatch::finish_failure() noexcept {
  if (me_ != 0) return;
  thread_.stop();
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  constexpr os::Backoff kEvery20ms{std::chrono::milliseconds(20), std::chrono::milliseconds(20)};
  try {
    // The node that failed needs no telling (and a lost one cannot answer).
    int failed_node = -1;
    if (main_client_->check({launcher_keys::kNodeFailure})) failed_node = decode_node_failure(to_string(main_client_->get(launcher_keys::kNodeFailure))).node;
    for (std::size_t k = 1; k < hosts_.size(); ++k) {
      const int node = static_cast<int>(k);
      if (shown(node) == failed_node) continue;
      os::poll_until(deadline, kEvery20ms, [&] {
        return main_client_->check({launcher_keys::ack(node)}) || main_client_->check({launcher_keys::done(node)});
      });
    }
  } catch (const std::exception&) {
    // The store is this process's own; nothing more to wait for.
  }
}

}  // namespace fastrun::launcher
