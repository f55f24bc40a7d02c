#pragma once
// The process group of one rank that a bench forked itself (no launcher): every rank connects to
// the store the parent hosts at `address`, and the group is "world" of `size` ranks.
#include <memory>
#include <string>

#include "fastrun/runtime/backend/registry.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"

namespace fastrun::bench {

inline std::unique_ptr<ProcessGroup> forked_group(const std::string& backend, int rank, int size,
                                                  const std::string& address, const std::string& run_id) {
  GroupSpec spec;
  std::shared_ptr<Store> store(connect_store(address));
  spec.store = std::make_shared<PrefixStore>("bench", store->clone());
  spec.rank = rank;
  spec.size = size;
  for (int i = 0; i < size; ++i) spec.global_ranks.push_back(i);
  spec.name = "world";
  spec.run_id = run_id;
  spec.failure_store = store;
  return backend::find(backend)(spec);
}

}  // namespace fastrun::bench
