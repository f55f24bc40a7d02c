#include "fastrun/runtime/backend/gloo/store_adapter.h"

namespace fastrun::gloo_backend {

StoreAdapter::StoreAdapter(std::shared_ptr<fastrun::Store> store, Duration timeout)
    : store_(std::move(store)), timeout_(timeout) {}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_->set(key, Bytes(data.begin(), data.end()));
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  const Bytes value = store_->get(key, timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void StoreAdapter::wait(const std::vector<std::string>& keys) { store_->wait(keys, timeout_); }

void StoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  // Gloo passes its context timeout here; the group's set-up timeout (FASTRUN_TIMEOUT) governs.
  store_->wait(keys, timeout_);
}

}  // namespace fastrun::gloo_backend
