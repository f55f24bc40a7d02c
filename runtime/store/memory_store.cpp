#include "fastrun/runtime/store/memory_store.h"

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun {

struct MemoryStore::State {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::string, Bytes> map;
};

std::int64_t parse_counter(const std::string& store, const std::string& key, const Bytes& value) {
  const auto v = text::to_integer(std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
  if (!v)
    throw StoreError(fmt::format("{}: add('{}'): the key holds {} bytes that are not a decimal counter", store, key,
                                 value.size()));
  return *v;
}

MemoryStore::MemoryStore() : state_(std::make_shared<State>()) {}

void MemoryStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard lock(state_->mu);
    state_->map[key] = value;
  }
  state_->cv.notify_all();
}

Bytes MemoryStore::get(const std::string& key, Duration timeout) {
  std::unique_lock lock(state_->mu);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto it = state_->map.find(key); it != state_->map.end()) return it->second;
    if (state_->cv.wait_until(lock, deadline) == std::cv_status::timeout && !state_->map.count(key)) {
      lock.unlock();
      throw_wait_timeout(*this, {key}, 1, timeout);
    }
  }
}

std::int64_t MemoryStore::add(const std::string& key, std::int64_t delta) {
  std::int64_t v = delta;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->map.find(key);
    if (it != state_->map.end()) v = parse_counter(describe(), key, it->second) + delta;
    state_->map[key] = to_bytes(std::to_string(v));
  }
  state_->cv.notify_all();
  return v;
}

Bytes MemoryStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes result;
  bool changed = false;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->map.find(key);
    if (it == state_->map.end()) {
      if (!expected.empty()) return expected;
      state_->map.emplace(key, desired);
      result = desired;
      changed = true;
    } else if (it->second == expected) {
      it->second = desired;
      result = desired;
      changed = true;
    } else {
      result = it->second;
    }
  }
  if (changed) state_->cv.notify_all();
  return result;
}

void MemoryStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::unique_lock lock(state_->mu);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto missing = [&] {
    std::vector<std::string> m;
    for (const auto& k : keys)
      if (!state_->map.count(k)) m.push_back(k);
    return m;
  };
  while (!state_->cv.wait_until(lock, deadline, [&] { return missing().empty(); })) {
    if (std::chrono::steady_clock::now() >= deadline) {
      auto m = missing();
      lock.unlock();
      throw_wait_timeout(*this, m, keys.size(), timeout);
    }
  }
}

bool MemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(state_->mu);
  for (const auto& k : keys)
    if (!state_->map.count(k)) return false;
  return true;
}

bool MemoryStore::delete_key(const std::string& key) {
  std::lock_guard lock(state_->mu);
  return state_->map.erase(key) > 0;
}

std::int64_t MemoryStore::num_keys() {
  std::lock_guard lock(state_->mu);
  return static_cast<std::int64_t>(state_->map.size());
}

std::unique_ptr<Store> MemoryStore::clone() {
  auto s = std::unique_ptr<MemoryStore>(new MemoryStore(state_));
  s->set_timeout(timeout());
  return s;
}

}  // namespace fastrun
