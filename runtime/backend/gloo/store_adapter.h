#pragma once
// fastrun::Store seen as a gloo::rendezvous::Store. Overrides only set, get (blocking, as
// connectFullMesh needs: Gloo's own HashStore returns empty for a missing key) and both wait
// overloads, so the adapter compiles against Gloo with and without GLOO_STORE_HAS_STORE_V2.
// The wrapped store must already carry a fresh prefix for this context: connectFullMesh uses
// the keys "0", "1", ..., "rank_0", ... which would collide across contexts.
#include <chrono>
#include <memory>

#include <gloo/rendezvous/store.h>

#include "fastrun/runtime/store/store.h"

namespace fastrun::gloo_backend {

class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  // `timeout` bounds every blocking call (the group's set-up timeout).
  StoreAdapter(std::shared_ptr<fastrun::Store> store, Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<fastrun::Store> store_;
  Duration timeout_;
};

}  // namespace fastrun::gloo_backend
