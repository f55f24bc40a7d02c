#pragma once
// file://PATH — the rendezvous store as a directory on a filesystem every rank shares (local
// disk for one node, NFS across nodes). PATH is absolute, or relative to the private runtime
// directory (runtime_dir.h). Format (docs/stores.md "file store"):
//   PATH/owner   "fastrun-file-store 2" + creator identity (owner.h); present = ready
//   PATH/lock    empty; an fcntl OFD write lock on it serializes mutations
//   PATH/log     the records of every mutation, appended: header, key, value (or a deletion
//                mark), FNV-1a checksum; rewritten with the live values only once it is past 256 KiB
//                and 4x their size (a new file renamed over it: each handle notices the new inode)
//   PATH/log.new a compacted log being written (never read)
// Why one log and not a file per key: creating a file per key made a rendezvous (every set of a
// fresh key) wait on the filesystem's metadata journal, 0.3x torch's FileStore on an idle disk
// and 0.02x on a busy one; an append is a data write. Each handle reads the log from where it
// stopped and keeps the live values (a value is read from memory once its record was seen).
// Crash safety: a mutation holds the lock, reads the log to its end, cuts off any tail that is not
// a whole record (a writer killed mid-append left it; no one else can be writing) and appends.
// Readers take no lock and stop before a record that is not whole yet (its checksum tells), so
// they never see a part; one that finds such a tail while the lock is free repairs it itself.
// The lock is released by the kernel (or the NFS lock manager) when its holder dies — no stale
// lock to break by hand. Waits poll with a backoff from 1 ms to 10 ms and honour sub-second
// timeouts. A handle is used by one thread at a time; clone() opens its own descriptors.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::file_store {

inline constexpr const char* kOwnerMagic = "fastrun-file-store 2";

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
  // Applies the log's new whole records to values_; returns the bytes past them (a record being
  // written, or one a killed writer left).
  std::uint64_t catch_up();
  // With the lock held: catch_up(), then cut off whatever follows the last whole record.
  void catch_up_and_repair();
  // For readers: catch_up(); if a tail follows and the lock is free, repair it.
  void refresh(bool reopen);
  void append(const std::string& key, const Bytes* value);  // nullptr: a deletion
  // With the lock held: the live values into a new log renamed over the old one.
  void compact();
  // (Re)opens PATH/log; if it is another file than the one parsed so far (compacted since), the
  // values are read from its start.
  void open_log();

  std::string address_;
  std::string dir_;
  os::UniqueFd lock_fd_;
  os::UniqueFd log_fd_;
  std::uint64_t log_id_[2] = {0, 0};  // device and inode of log_fd_'s file
  std::uint64_t parsed_ = 0;          // the log's bytes applied to values_
  std::uint64_t compact_check_at_;    // the log size at which append() next weighs a compaction
  std::unordered_map<std::string, Bytes> values_;
};

// The directory a file:// address names (relative paths resolve under runtime_dir()).
std::string resolve_path(const std::string& name);

}  // namespace fastrun::file_store
