#include "fastrun/runtime/store/prefix_store.h"

#include "fastrun/runtime/error.h"

namespace fastrun {

PrefixStore::PrefixStore(std::string prefix, std::unique_ptr<Store> inner)
    : prefix_(std::move(prefix)), owned_(std::move(inner)), inner_(owned_.get()) {
  set_timeout(inner_->timeout());
}

PrefixStore::PrefixStore(std::string prefix, Store& inner) : prefix_(std::move(prefix)), inner_(&inner) {
  set_timeout(inner_->timeout());
}

std::vector<std::string> PrefixStore::k(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(k(key));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) { inner_->set(k(key), value); }

// Timeouts are rethrown with the caller's (unprefixed) key names stripped of nothing: the
// prefixed names are what is in the store, and they say which namespace was waited on.
Bytes PrefixStore::get(const std::string& key, Duration timeout) { return inner_->get(k(key), timeout); }
std::int64_t PrefixStore::add(const std::string& key, std::int64_t delta) { return inner_->add(k(key), delta); }
Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return inner_->compare_set(k(key), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys, Duration timeout) { inner_->wait(k(keys), timeout); }
bool PrefixStore::check(const std::vector<std::string>& keys) { return inner_->check(k(keys)); }
bool PrefixStore::delete_key(const std::string& key) { return inner_->delete_key(k(key)); }
std::int64_t PrefixStore::num_keys() { return inner_->num_keys(); }
// Forwarded, so a tcp:// store underneath still does it in one request.
std::vector<int> PrefixStore::arrive(const std::string& key, int rank, int participants, Duration timeout) {
  return inner_->arrive(k(key), rank, participants, timeout);
}

std::unique_ptr<Store> PrefixStore::clone() {
  auto s = std::make_unique<PrefixStore>(prefix_, inner_->clone());
  s->set_timeout(timeout());
  return s;
}

void PrefixStore::set_timeout(Duration t) {
  Store::set_timeout(t);
  if (owned_) owned_->set_timeout(t);
}

std::string PrefixStore::describe() const { return inner_->describe() + " [prefix " + prefix_ + "/]"; }

}  // namespace fastrun
