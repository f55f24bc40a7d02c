#include "fastrun/runtime/join/context.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/store/factory.h"  // HostedStore, which ~Context destroys
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/prefix_store.h"

// The Context's own calls: its groups and the failure record. join() itself, which builds a
// Context step by step, is in join/join.cpp.
namespace fastrun {

Context::~Context() = default;

void Context::report_failure(const std::string& why) noexcept {
  try {
    record_failure(*store_, fmt::format("rank {}: {}", rank_, why));
  } catch (const std::exception& e) {
    log::error("cannot record this rank's failure ({}) in the job store: {}", why, e.what());
  }
}

std::string Context::resolve_backend(const std::string& requested, const std::vector<int>& ranks) const {
  const std::string name = requested.empty() ? backend_request_ : requested;
  if (name != "auto") {
    backend::find(name);  // ConfigError listing the built backends
    return name;
  }
  if (device_ == DeviceKind::cuda && backend::available("nccl")) return "nccl";
  bool one_node = true;
  for (int r : ranks)
    if (places_.at(static_cast<std::size_t>(r)) != places_.at(static_cast<std::size_t>(ranks.front()))) one_node = false;
  if (one_node && ranks.size() > 1 && backend::available("shm")) return "shm";
  // Across nodes: shm inside each node, one leader per node over tcp (backend-hier.md); it runs
  // flat gloo itself where two levels do not pay.
  if (!one_node && backend::available("hier")) return "hier";
  return "gloo";
}

std::shared_ptr<Group> Context::make_group(const std::vector<int>& ranks, const std::string& backend_request,
                                           const std::string& name) {
  const auto it = std::find(ranks.begin(), ranks.end(), rank_);
  const std::string backend_name = resolve_backend(backend_request, ranks);
  GroupSpec spec;
  spec.rank = static_cast<int>(it - ranks.begin());
  spec.size = static_cast<int>(ranks.size());
  spec.global_ranks = ranks;
  spec.name = name;
  spec.run_id = run_id_.empty() ? "local" : run_id_;
  spec.timeout = timeout_;
  spec.op_timeout = op_timeout_;
  spec.failure_store = store_;
  spec.gloo_host = gloo_host_;
  spec.peers = peers_;
  spec.store = std::make_shared<PrefixStore>(fmt::format("fastrun/pg/{}/{}/{}", generation_, name, backend_name),
                                             store_->clone());
  std::shared_ptr<Backend> backend = backend::find(backend_name)(spec);
  // Object collectives need host memory: a gloo group over the same ranks, made on first use.
  std::weak_ptr<Context> self = weak_from_this();
  Group::CpuFactory cpu_factory = [self, ranks, name]() -> std::shared_ptr<Group> {
    auto ctx = self.lock();
    if (!ctx) throw ConfigError(fmt::format("group '{}': its context is gone; object collectives need it", name));
    return ctx->make_group(ranks, "gloo", name + "-cpu");
  };
  return std::make_shared<Group>(std::move(backend), ranks, std::move(cpu_factory), GroupPolicy{name, store_});
}

std::shared_ptr<Group> Context::new_group(const std::vector<int>& ranks, const std::string& backend) {
  const std::string name = fmt::format("group-{}", ++groups_made_);
  if (ranks.empty()) throw ConfigError(fmt::format("new_group: empty rank list ({})", name));
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= world_size_)
      throw ConfigError(fmt::format("new_group: rank {} is not in the world of {} ranks", r, world_size_));
    if (!seen.insert(r).second) throw ConfigError(fmt::format("new_group: rank {} is listed twice in [{}]", r, fmt::join(ranks, ", ")));
  }
  if (!seen.count(rank_)) return nullptr;
  return make_group(ranks, backend, name);
}

}  // namespace fastrun
