#pragma once
// file://PATH — the rendezvous store as a directory on a filesystem every rank shares (local
// disk for one node, NFS across nodes). PATH is absolute, or relative to the private runtime
// directory (runtime_dir.h). Format (docs/stores.md "file store"):
//   PATH/owner          "fastrun-file-store 1" + creator identity (owner.h); present = ready
//   PATH/lock           empty; an fcntl OFD write lock on it serializes mutations
//   PATH/k-<enc(key)>   one file per key: header, key, value, FNV-1a checksum
//   PATH/t-...          a value being written (never read)
// Crash safety: a key's first value is written to a t- file and renamed over its k- file (rename
// is atomic, also on NFS); later small values are rewritten in place with one pwrite, and a
// reader that overlaps one sees a bad checksum and reads again, so it returns the old or the
// new value, never a part. Mutations (set, add,
// compare_set, delete) hold the OFD lock, which the kernel (or the NFS lock manager) releases
// when its holder dies — no stale lock to break by hand. Waits poll with a backoff from 1 ms to
// 10 ms and honour sub-second timeouts. A handle is used by one thread at a time; clone() opens
// its own lock descriptor.
#include <memory>
#include <optional>
#include <string>

#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::file_store {

inline constexpr const char* kOwnerMagic = "fastrun-file-store 1";

class FileStore final : public Store {
 public:
  // `dir` exists and holds an `owner` marker (the host made it).
  FileStore(std::string address, std::string dir);
  ~FileStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  std::unique_ptr<Store> clone() override;
  std::string describe() const override { return address_; }
  using Store::get;
  using Store::wait;

 private:
  class Lock;
  std::string key_path(const std::string& key) const;
  std::optional<Bytes> read_value(const std::string& key) const;
  std::optional<Bytes> decode_record(const Bytes& data, const std::string& key, const char*& why) const;
  void write_value(const std::string& key, const Bytes& value);
  bool exists(const std::string& key) const;

  std::string address_;
  std::string dir_;
  os::UniqueFd lock_fd_;
};

// The directory a file:// address names (relative paths resolve under runtime_dir()).
std::string resolve_path(const std::string& name);

}  // namespace fastrun::file_store
