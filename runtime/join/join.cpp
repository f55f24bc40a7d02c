#include "fastrun/runtime/join/join.h"

// join(): the four numbered steps that turn the environment into a Context (context.h).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

#include "fastrun/runtime/cluster/local_address.h"
#include "fastrun/runtime/device_probe.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/env_sources.h"
#include "fastrun/runtime/join/rendezvous.h"
#include "fastrun/runtime/join/stall_host.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/peer_info.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/prefix_store.h"

namespace fastrun {
namespace {

std::mutex g_current_mutex;
std::weak_ptr<Context> g_current;
std::atomic<int> g_generation{0};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// FASTRUN_STORE set by hand under torchrun, srun or mpirun is only connected to. connect_store
// waits the whole FASTRUN_TIMEOUT for a shm:// or file:// store to appear, since under the
// fastrun launcher its host may still be creating it; here nothing in the job ever will, so a
// missing one fails now, naming the value and what works instead. (A user who hosts such a store
// outside the job creates it before the job starts.)
void check_store_by_hand(const join_detail::Layout& l) {
  if (!l.store_by_hand || store_exists(l.store_address).value_or(true)) return;
  const bool file = l.store_address.rfind("file://", 0) == 0;
  const std::string instead =
      l.source == "torchrun"
          ? "the ranks then join through torchrun's agent store (static rendezvous, and --standalone under torch "
            "2.x) or rank 0 hosts tcp://MASTER_ADDR:MASTER_PORT; docs/torchrun.md"
          : "rank 0 then hosts tcp://MASTER_ADDR:MASTER_PORT, derived from the engine's variables when those are "
            "unset; docs/multinode.md";
  throw ConfigError(fmt::format(
      "rank {} of {} ({} environment): FASTRUN_STORE={} names no existing store ({} not found) and nothing in a {} "
      "job creates one: FASTRUN_STORE set by hand is only connected to (only the fastrun launcher hosts the store "
      "it sets). Unset FASTRUN_STORE: {}. Or name a store that is hosted before the job starts: tcp://HOST:PORT, "
      "c10d://HOST:PORT (a torch TCPStore), or a shm:// or file:// store its host has created",
      l.rank, l.world_size, l.source, l.store_address, file ? "its directory's owner marker" : "its shm segment",
      l.source, instead));
}

// The job's store, as the layout says: none (a world of one: in memory), hosted by this rank,
// under the launcher's prefix (falling back to a store rank 0 hosts when the job is on one node),
// or connected to.
struct JobStore {
  std::unique_ptr<HostedStore> hosted;  // when this rank hosts it
  std::shared_ptr<Store> store;
};

// An address fastrun derived (srun, mpirun) must say where it came from and how to override it.
// The error keeps its class: an address this host cannot listen on is the input's fault, so it
// stays a ConfigError. Called from a handler of `e` (the bare throw rethrows it unchanged).
template <class E>
[[noreturn]] void rethrow_with_origin(const E& e, const std::string& origin) {
  if (origin.empty()) throw;
  throw E(fmt::format("{} (the address is {})", e.what(), origin));
}

JobStore open_job_store(const join_detail::Layout& layout, const StoreOptions& so) {
  JobStore js;
  try {
    if (layout.store_address.empty()) {
      js.store = std::make_shared<MemoryStore>();
    } else if (layout.host_store) {
      js.hosted = host_store(layout.store_address, so);
      js.store = js.hosted->connect();
    } else if (!layout.store_prefix.empty()) {
      try {
        js.store = std::make_shared<PrefixStore>(layout.store_prefix, connect_store(layout.store_address, so));
      } catch (const StoreError& e) {
        if (layout.fallback_store.empty()) throw;
        // Every rank of the node sees the same server, so all of them take this branch.
        log::warn("{}; the job is on one node: using {} (hosted by rank 0) instead", e.what(), layout.fallback_store);
        if (layout.rank == 0) {
          js.hosted = host_store(layout.fallback_store, so);
          js.store = js.hosted->connect();
        } else {
          js.store = connect_store(layout.fallback_store, so);
        }
      }
    } else {
      check_store_by_hand(layout);
      js.store = connect_store(layout.store_address, so);
    }
  } catch (const ConfigError& e) {
    rethrow_with_origin(e, layout.store_origin);
  } catch (const StoreError& e) {
    rethrow_with_origin(e, layout.store_origin);
  }
  return js;
}

// This rank's place on its node: from the environment when given, else from the host names
// (ranks on one host, in rank order; nodes in the order their first rank appears).
struct LocalLayout {
  int local_rank = 0, local_world_size = 0, node_rank = 0;
};

LocalLayout local_layout(const join_detail::Layout& layout, const std::vector<std::string>& hosts, int rank) {
  std::vector<std::string> distinct_hosts;
  for (const auto& h : hosts)
    if (std::find(distinct_hosts.begin(), distinct_hosts.end(), h) == distinct_hosts.end()) distinct_hosts.push_back(h);
  const std::string& my_host = hosts[static_cast<std::size_t>(rank)];
  int computed_local_rank = 0, computed_local_size = 0;
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    if (hosts[r] != my_host) continue;
    if (static_cast<int>(r) < rank) ++computed_local_rank;
    ++computed_local_size;
  }
  LocalLayout l;
  l.local_rank = layout.local_rank.value_or(computed_local_rank);
  l.local_world_size = layout.local_world_size.value_or(computed_local_size);
  l.node_rank = layout.node_rank.value_or(static_cast<int>(
      std::find(distinct_hosts.begin(), distinct_hosts.end(), my_host) - distinct_hosts.begin()));
  return l;
}

}  // namespace

// A world of one takes every step: its store is in memory, its peer exchange has one entry.
std::shared_ptr<Context> join(const JoinOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Context> ctx(new Context());
  Context& c = *ctx;

  // 1. Who am I: the first environment source present.
  const join_detail::Layout layout = join_detail::detect_layout();
  c.rank_ = layout.rank;
  c.world_size_ = layout.world_size;
  c.source_ = layout.source;
  c.run_id_ = layout.run_id;
  c.timeout_ = options.timeout > Duration::zero() ? options.timeout : env::get_timeout(env::kTimeout);
  c.op_timeout_ = env::get_timeout(env::kOpTimeout);
  c.backend_request_ = options.backend.empty() ? env::get_string(env::kBackend) : options.backend;
  c.generation_ = g_generation.fetch_add(1);
  log::set_rank(c.rank_);
  static std::once_flag source_logged;
  std::call_once(source_logged, [&] {
    log::info("rank layout from the {} environment: rank {} of {}", layout.source, layout.rank, layout.world_size);
  });

  // 2. The store.
  StoreOptions so;
  so.timeout = c.timeout_;
  so.token = layout.store_token;
  JobStore js = open_job_store(layout, so);
  c.hosted_ = std::move(js.hosted);
  c.store_ = std::move(js.store);
  c.store_->set_timeout(c.timeout_);
  // Across hosts gloo must not advertise 127.0.0.1: unless FASTRUN_GLOO_HOST says otherwise,
  // bind the interface that routes to the store's host (as the launcher does for its ranks).
  if (!layout.master_host.empty() && !env::raw(env::kGlooHost))
    c.gloo_host_ = cluster::local_address_towards(layout.master_host, static_cast<std::uint16_t>(layout.master_port));

  // 3. Exchange host, pid and device identity; refuse two ranks on one GPU.
  c.device_identity_ = probe_device_identity();
  c.device_ = c.device_identity_ == "cpu" ? DeviceKind::cpu : DeviceKind::cuda;
  PeerInfo self = local_peer_info(c.rank_, c.device_identity_);
  self.node = layout.node_rank.value_or(-1);
  const auto peers = join_detail::exchange_peer_infos(c.store_, self, c.world_size_, c.generation_, c.timeout_);
  join_detail::check_distinct_devices(peers);
  c.peers_ = std::make_shared<const std::vector<PeerInfo>>(peers);
  for (const auto& p : peers) {
    c.hosts_.push_back(p.host);
    c.places_.push_back(p.place());
  }

  // ... and this rank's place on its node, computed from those host names where the environment
  // does not give it.
  const LocalLayout local = local_layout(layout, c.hosts_, c.rank_);
  c.local_rank_ = local.local_rank;
  c.local_world_size_ = local.local_world_size;
  c.node_rank_ = local.node_rank;

  // ... and, without a fastrun launcher, the node's stall board, before the world group claims
  // its slot there.
  c.stall_report_ = join_detail::host_stall_report(
      *c.store_, {layout.source, c.world_size_, c.local_rank_, c.local_world_size_, c.node_rank_, c.generation_,
                  c.timeout_});

  // 4. The default process group.
  std::vector<int> all(static_cast<std::size_t>(c.world_size_));
  for (int r = 0; r < c.world_size_; ++r) all[static_cast<std::size_t>(r)] = r;
  c.world_ = c.make_group(all, c.backend_request_, "world");

  log::info("joined in {:.1f} ms: rank {} of {} (local {} of {}, node {}) from the {} environment, device {}, "
            "store {}, backend {}",
            ms_since(start), c.rank_, c.world_size_, c.local_rank_, c.local_world_size_, c.node_rank_, c.source_,
            c.device_identity_, c.store_->describe(), c.world_->backend_name());

  // What current_context() returns from now on.
  {
    std::lock_guard lock(g_current_mutex);
    g_current = ctx;
  }
  return ctx;
}

std::shared_ptr<Context> current_context() {
  std::lock_guard lock(g_current_mutex);
  return g_current.lock();
}

}  // namespace fastrun
