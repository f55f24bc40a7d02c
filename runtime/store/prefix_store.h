#pragma once
// Namespacing decorator (c10d PrefixStore): every key becomes "<prefix>/<key>" in the wrapped
// store, so each job, process group or round gets its own keys in one shared store.
// num_keys() is NOT filtered by prefix (it counts the whole underlying store, as in c10d).
// Threading: as the wrapped store; clone() clones the wrapped store.
#include <memory>

#include "fastrun/runtime/store/store.h"

namespace fastrun {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::unique_ptr<Store> inner);
  // Non-owning form: `inner` must outlive this object.
  PrefixStore(std::string prefix, Store& inner);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  [[nodiscard]] std::vector<int> arrive(const std::string& key, int rank, int participants,
                                        Duration timeout) override;
  std::unique_ptr<Store> clone() override;
  std::string describe() const override;
  // Passed on to the wrapped store when this object owns it (a clone does); a non-owning prefix
  // leaves the caller's store as it is.
  void set_timeout(Duration t) override;
  using Store::get;
  using Store::wait;

  const std::string& prefix() const { return prefix_; }
  Store& inner() { return *inner_; }

 private:
  std::string k(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> k(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::unique_ptr<Store> owned_;
  Store* inner_;
};

}  // namespace fastrun
