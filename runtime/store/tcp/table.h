#pragma once
// The tcp:// server's key table with the c10d semantics of Store (store.h): add keeps ASCII
// decimal text, compare_set follows the c10d rules. Pure and single-threaded: only the server
// thread touches it. Every mutation reports whether it created the key, which is what wakes
// waiters.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "fastrun/runtime/store/tcp/wire.h"

namespace fastrun::tcp_store {

using tcp_wire::Bytes;

class Table {
 public:
  // Returns true when the key did not exist before.
  bool set(const std::string& key, Bytes value);
  const Bytes* find(const std::string& key) const;
  bool contains(const std::string& key) const { return map_.count(key) != 0; }

  struct AddResult {
    std::int64_t value = 0;
    bool created = false;
    std::string error;  // non-empty: nothing changed (not a decimal integer, overflow)
  };
  AddResult add(const std::string& key, std::int64_t delta);

  struct CompareSetResult {
    Bytes value;
    bool created = false;
  };
  CompareSetResult compare_set(const std::string& key, const Bytes& expected, Bytes desired);

  // Marks `rank` arrived in the arrival record under `key` (tcp_wire::kArrivalHeader; created
  // on the first arrival). `error` (nothing changed) for a rank out of range, a key holding
  // something else or a record for another count, and a rank that already arrived (a key used
  // by an earlier round).
  struct ArriveResult {
    std::uint32_t arrived = 0;
    bool created = false;
    std::string error;
  };
  ArriveResult arrive(const std::string& key, std::uint32_t rank, std::uint32_t participants);

  bool erase(const std::string& key) { return map_.erase(key) != 0; }
  std::int64_t size() const { return static_cast<std::int64_t>(map_.size()); }

 private:
  std::unordered_map<std::string, Bytes> map_;
};

// Parses ASCII decimal text ("-12", "7"); nullopt for anything else, including overflow.
std::optional<std::int64_t> parse_decimal(const Bytes& text);

}  // namespace fastrun::tcp_store
