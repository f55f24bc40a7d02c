#pragma once
// In-process store for tests and for ranks-as-threads (c10d's HashStore, but it notifies on
// every mutation, `add` included). Thread-safe: every handle — the original and its clone()s —
// shares one map guarded by one mutex + condition variable, and may be used from any thread.
#include <memory>

#include "fastrun/runtime/store/store.h"

namespace fastrun {

class MemoryStore final : public Store {
 public:
  MemoryStore();
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  std::unique_ptr<Store> clone() override;
  std::string describe() const override { return "memory://"; }
  using Store::get;
  using Store::wait;

 private:
  struct State;
  explicit MemoryStore(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// Parses the ASCII-decimal counter text every store's add() keeps (c10d compatible): a
// StoreError naming the key when the existing value is not a counter.
std::int64_t parse_counter(const std::string& store, const std::string& key, const Bytes& value);

}  // namespace fastrun
