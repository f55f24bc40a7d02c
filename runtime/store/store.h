#pragma once
// The rendezvous store (docs/stores.md; c10d Store.hpp is the model for the
// contracts). Keys are strings; values are byte strings of any size (0 bytes and 16 MiB are
// tested). Every blocking call has a timeout; a timeout raises TimeoutError listing the keys
// still missing. Implementations: shm://, file://, tcp:// (runtime/store/<kind>/), a prefix
// decorator and an in-process store for tests. One Store object is used by one thread at a
// time unless the implementation says otherwise; clone() gives another thread its own handle.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/duration.h"

namespace fastrun {

using Bytes = std::vector<std::uint8_t>;

inline Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }
inline std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

class Store {
 public:
  static constexpr Duration kDefaultTimeout = std::chrono::seconds(300);

  virtual ~Store() = default;

  // Overwrites; wakes everyone waiting on `key`.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until `key` exists, then returns its value; TimeoutError after `timeout`.
  virtual Bytes get(const std::string& key, Duration timeout) = 0;
  // Atomic 64-bit counter stored as ASCII decimal text; a missing key counts as 0.
  // Returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // c10d rules: key absent and expected empty -> sets desired, returns desired; key absent and
  // expected not empty -> returns expected, sets nothing; present and equal to expected -> sets
  // desired, returns desired; otherwise returns the current value.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Blocks until every key exists; TimeoutError naming the missing ones after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, Duration timeout) = 0;
  // Non-blocking: true when every key exists.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // True when a key was removed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual std::int64_t num_keys() = 0;
  // A barrier in one call: marks participant `rank` (0..participants-1) arrived at `key` and
  // blocks until all `participants` have, or `timeout` passed. Returns the ranks that had not
  // arrived at the timeout (empty: everyone arrived), for the caller to name in its message.
  // A key serves one round: a rank arriving twice (a key reused) fails with StoreError, a rank
  // out of range with ConfigError. The default is a store round (runtime/store/gather.h:
  // add + wait, 2 requests per participant and one release key); tcp:// does it in one request
  // answered when the last participant arrives. The keys it leaves are the implementation's.
  [[nodiscard]] virtual std::vector<int> arrive(const std::string& key, int rank, int participants,
                                                Duration timeout);
  // A new independent handle on the same store (its own connection / mapping), for another thread.
  virtual std::unique_ptr<Store> clone() = 0;
  // Human-readable address for messages ("shm://job-42", "tcp://127.0.0.1:4242").
  virtual std::string describe() const = 0;

  // Convenience overloads with the store's default timeout.
  Bytes get(const std::string& key) { return get(key, timeout_); }
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  Duration timeout() const { return timeout_; }
  // Also what a tcp:// or c10d:// handle waits for a reply; a decorator that owns the store it
  // wraps passes it on (PrefixStore), so a clone can be given a shorter bound than its original.
  virtual void set_timeout(Duration t) { timeout_ = t; }

 private:
  Duration timeout_ = kDefaultTimeout;
};

// Raises the TimeoutError every store uses: "<store>: timed out after 1.5 s waiting for keys
// [a, b] (2 of 5 missing)".
[[noreturn]] void throw_wait_timeout(const Store& store, const std::vector<std::string>& missing,
                                     std::size_t total_keys, Duration timeout);

// A named barrier for `participants` processes built on add + wait: each caller increments
// "<name>/count"; the last one sets "<name>/done"; everyone waits for "<name>/done". The timeout
// message says how many arrived. A name may be used once per store (use a prefix per round).
void store_barrier(Store& store, const std::string& name, int participants, Duration timeout);
// The same for participants that know their rank (0..participants-1), as one Store::arrive under
// `name` (tcp://: one request; elsewhere the store round of runtime/store/gather.h), so the
// timeout names the ranks that never arrived, and a name used twice fails with StoreError.
void store_barrier(Store& store, const std::string& name, int rank, int participants, Duration timeout);

}  // namespace fastrun
