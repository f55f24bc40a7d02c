#include "fastrun/runtime/store/file/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/hash/fnv1a.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/runtime_dir.h"

namespace fastrun::file_store {
namespace {

using Clock = std::chrono::steady_clock;

// A record: magic, u64 key length, u64 value length (kDeleted set: a deletion, no value), key,
// value, u64 FNV-1a of all before (hash/fnv1a.h, from kFormatBasis; host byte order).
constexpr char kRecordMagic[8] = {'F', 'R', 'S', 'T', 'L', 'G', '0', '2'};
constexpr std::size_t kHead = sizeof kRecordMagic + 16;
constexpr std::uint64_t kDeleted = std::uint64_t{1} << 63;
// Lengths past these are not a record being written but bytes a killed writer left.
constexpr std::uint64_t kMaxKeyBytes = std::uint64_t{1} << 30;
constexpr std::uint64_t kMaxValueBytes = std::uint64_t{1} << 40;
// A log past this size, and past 4x its live records, is compacted (rewrites would grow it
// without end: a node's heartbeat adds a record every 100 ms).
constexpr std::uint64_t kCompactFloor = 256u << 10;

std::uint64_t checksum(const void* data, std::size_t n) { return hash::fnv1a_bytes(data, n, hash::kFormatBasis); }

Bytes encode_record(const std::string& key, const Bytes* value) {
  const std::uint64_t key_len = key.size(), value_size = value ? value->size() : 0;
  const std::uint64_t value_len = value ? value_size : kDeleted;
  Bytes rec(kHead + key.size() + value_size + 8);
  std::uint8_t* p = rec.data();
  std::memcpy(p, kRecordMagic, sizeof kRecordMagic);
  std::memcpy(p + 8, &key_len, 8);
  std::memcpy(p + 16, &value_len, 8);
  std::memcpy(p + kHead, key.data(), key.size());
  if (value_size > 0) std::memcpy(p + kHead + key.size(), value->data(), value_size);
  const std::uint64_t sum = checksum(p, rec.size() - 8);
  std::memcpy(p + rec.size() - 8, &sum, 8);
  return rec;
}

// The log from `offset` to its end. Sized from fstat: waiters poll this every few ms, and nothing
// new must cost no more than the fstat (a fixed 64 KiB buffer, zeroed per poll, made 256 polling
// processes under ASan time out).
Bytes read_from(int fd, std::uint64_t offset, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("reading " + what, errno);
  if (static_cast<std::uint64_t>(st.st_size) <= offset) return {};
  Bytes data(static_cast<std::uint64_t>(st.st_size) - offset + 4096);  // + room to see the end in one read
  std::size_t got = 0;
  for (;;) {
    if (got == data.size()) data.resize(data.size() * 2);
    const ssize_t r = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno("reading " + what, errno);
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  data.resize(got);
  return data;
}

// Waits for keys: from 1 ms up to 10 ms between looks (an append comes without a wake-up).
constexpr os::Backoff kWaitBackoff{std::chrono::milliseconds(1), std::chrono::milliseconds(10)};
// A mutation holds the write lock briefly: look again soon.
constexpr os::Backoff kLockBackoff{std::chrono::microseconds(20), std::chrono::microseconds(2000)};

// Takes the lock without waiting; false: another holds it.
bool try_lock(int fd, const std::string& dir) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(fd, F_OFD_SETLK, &fl) == 0) return true;
  if (errno != EAGAIN && errno != EACCES && errno != EINTR) throw_errno(fmt::format("locking {}/lock", dir), errno);
  return false;
}

// Never fails on a lock this descriptor holds (and closing it would release it anyway).
void unlock(int fd) noexcept {
  struct flock fl {};
  fl.l_type = F_UNLCK;
  fl.l_whence = SEEK_SET;
  ::fcntl(fd, F_OFD_SETLK, &fl);
}

}  // namespace

std::string resolve_path(const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;
  return runtime_dir() + "/" + name;
}

// The store-wide write lock: an fcntl OFD lock on PATH/lock, polled so that it honours a
// deadline. The kernel drops it when the holder's descriptor goes away (process death).
class FileStore::Lock {
 public:
  explicit Lock(FileStore& s) : s_(s) {
    const auto deadline = Clock::now() + std::max(s.timeout(), Duration(std::chrono::seconds(1)));
    if (!os::poll_until(deadline, kLockBackoff, [&] { return try_lock(s.lock_fd_.get(), s.dir_); }))
      throw StoreError(fmt::format("{}: could not take the lock {}/lock within {} ms (a holder is stopped, or the "
                                   "filesystem does not support fcntl locks: NFS needs its lock manager)",
                                   s.address_, s.dir_, s.timeout().count()));
  }
  ~Lock() { unlock(s_.lock_fd_.get()); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  FileStore& s_;
};

FileStore::FileStore(std::string address, std::string dir)
    : address_(std::move(address)), dir_(std::move(dir)), compact_check_at_(kCompactFloor) {
  lock_fd_.reset(::open((dir_ + "/lock").c_str(), O_RDWR | O_CLOEXEC));
  if (!lock_fd_) throw_errno(fmt::format("{}: opening {}/lock", address_, dir_), errno);
  open_log();
}

FileStore::~FileStore() = default;

void FileStore::open_log() {
  os::UniqueFd fd(::open((dir_ + "/log").c_str(), O_RDWR | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) throw_errno(fmt::format("{}: opening {}/log", address_, dir_), errno);
  if (st.st_dev != log_id_[0] || st.st_ino != log_id_[1]) {  // compacted since: parse it anew
    log_id_[0] = st.st_dev;
    log_id_[1] = st.st_ino;
    parsed_ = 0;
    values_.clear();
  }
  log_fd_ = std::move(fd);
}

std::uint64_t FileStore::catch_up() {
  // A compaction renamed a new log over the one we read: switch to it (stat: ~1 us).
  struct stat st {};
  if (::stat((dir_ + "/log").c_str(), &st) == 0 && (st.st_dev != log_id_[0] || st.st_ino != log_id_[1])) open_log();
  const Bytes data = read_from(log_fd_.get(), parsed_, dir_ + "/log");
  std::size_t at = 0;
  while (data.size() - at >= kHead + 8) {
    const std::uint8_t* p = data.data() + at;
    std::uint64_t key_len = 0, value_len = 0, sum = 0;
    std::memcpy(&key_len, p + 8, 8);
    std::memcpy(&value_len, p + 16, 8);
    const bool deleted = value_len == kDeleted;
    const std::uint64_t value_size = deleted ? 0 : value_len;
    if (std::memcmp(p, kRecordMagic, sizeof kRecordMagic) != 0 || key_len > kMaxKeyBytes ||
        value_size > kMaxValueBytes)
      break;  // not a record: a killed writer's bytes
    const std::uint64_t size = kHead + key_len + value_size + 8;
    if (data.size() - at < size) break;  // not all there yet
    std::memcpy(&sum, p + size - 8, 8);
    if (checksum(p, size - 8) != sum) break;  // being written (or torn by a killed writer)
    std::string key(reinterpret_cast<const char*>(p + kHead), key_len);
    if (deleted) values_.erase(key);
    else values_[std::move(key)] = Bytes(p + kHead + key_len, p + kHead + key_len + value_size);
    at += size;
  }
  parsed_ += at;
  return data.size() - at;
}

void FileStore::catch_up_and_repair() {
  if (catch_up() > 0 && ::ftruncate(log_fd_.get(), static_cast<off_t>(parsed_)) != 0)
    throw_errno(fmt::format("{}: cutting a killed writer's partial record off {}/log", address_, dir_), errno);
}

void FileStore::refresh(bool reopen) {
  // On NFS an open file's cached size may hide what other hosts appended until the attributes
  // are revalidated; opening the file again revalidates them (close-to-open). ~2 us locally.
  if (reopen) open_log();
  if (catch_up() == 0 || !try_lock(lock_fd_.get(), dir_)) return;
  // The lock is free, so no writer is mid-append: the tail is a killed writer's.
  try {
    catch_up_and_repair();
  } catch (...) {
    unlock(lock_fd_.get());
    throw;
  }
  unlock(lock_fd_.get());
}

// With the lock held and the log caught up and repaired: one write at its end. No fsync: a
// process crash leaves at most a partial record (cut off by the next mutation), NFS flushes on
// unlock, and a machine crash ends the job that owns the store anyway.
void FileStore::append(const std::string& key, const Bytes* value) {
  const Bytes rec = encode_record(key, value);
  if (::lseek(log_fd_.get(), static_cast<off_t>(parsed_), SEEK_SET) < 0 ||
      !os::write_all(log_fd_.get(), rec.data(), rec.size())) {
    const int e = errno;
    // Undo the partial record now if the filesystem lets us; if not, the next mutation cuts it off.
    [[maybe_unused]] const bool undone = ::ftruncate(log_fd_.get(), static_cast<off_t>(parsed_)) == 0;
    throw_errno(fmt::format("{}: writing key '{}' to {}/log", address_, key, dir_), e);
  }
  parsed_ += rec.size();
  if (value) values_[key] = *value;
  else values_.erase(key);
  if (parsed_ < compact_check_at_) return;
  std::uint64_t live = 0;
  for (const auto& [k, v] : values_) live += kHead + k.size() + v.size() + 8;
  if (parsed_ > 4 * live) {
    try {
      compact();
    } catch (const std::exception&) {
      // The mutation itself is done; the log stays long and the next check tries again.
    }
  }
  compact_check_at_ = std::max(kCompactFloor, 4 * live) + parsed_ / 4;
}

void FileStore::compact() {
  Bytes all;
  for (const auto& [k, v] : values_) {
    const Bytes rec = encode_record(k, &v);
    all.insert(all.end(), rec.begin(), rec.end());
  }
  // Only a lock holder writes log.new, so a fixed name; one a killed compactor left is truncated.
  const std::string tmp = dir_ + "/log.new";
  os::UniqueFd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  struct stat st {};
  if (!fd || !os::write_all(fd.get(), all.data(), all.size()) || ::fstat(fd.get(), &st) != 0 ||
      ::rename(tmp.c_str(), (dir_ + "/log").c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(fmt::format("{}: compacting {}/log", address_, dir_), e);
  }
  log_fd_ = std::move(fd);
  log_id_[0] = st.st_dev;
  log_id_[1] = st.st_ino;
  parsed_ = all.size();
}

void FileStore::set(const std::string& key, const Bytes& value) {
  catch_up();  // most of the reading before the lock: a new handle may have the whole log to read
  Lock l(*this);
  catch_up_and_repair();
  append(key, &value);
}

Bytes FileStore::get(const std::string& key, Duration timeout) {
  bool looked = false;
  const bool found = os::poll_until(Clock::now() + timeout, kWaitBackoff, [&] {
    refresh(std::exchange(looked, true));  // reopened after a miss and a sleep
    return values_.count(key) > 0;
  });
  if (!found) throw_wait_timeout(*this, {key}, 1, timeout);
  return values_.at(key);
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  catch_up();  // most of the reading before the lock: a new handle may have the whole log to read
  Lock l(*this);
  catch_up_and_repair();
  std::int64_t v = delta;
  if (auto it = values_.find(key); it != values_.end()) v = parse_counter(address_, key, it->second) + delta;
  const Bytes value = to_bytes(std::to_string(v));
  append(key, &value);
  return v;
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  catch_up();  // most of the reading before the lock: a new handle may have the whole log to read
  Lock l(*this);
  catch_up_and_repair();
  const auto it = values_.find(key);
  if (it == values_.end()) {
    if (!expected.empty()) return expected;
  } else if (it->second != expected) {
    return it->second;
  }
  append(key, &desired);
  return desired;
}

void FileStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  bool looked = false;
  auto all_present = [&] {
    for (const auto& k : keys)
      if (!values_.count(k)) return false;
    return true;
  };
  if (os::poll_until(Clock::now() + timeout, kWaitBackoff, [&] {
        refresh(std::exchange(looked, true));
        return all_present();
      }))
    return;
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!values_.count(k)) missing.push_back(k);
  throw_wait_timeout(*this, missing, keys.size(), timeout);
}

bool FileStore::check(const std::vector<std::string>& keys) {
  refresh(false);
  for (const auto& k : keys)
    if (!values_.count(k)) return false;
  return true;
}

bool FileStore::delete_key(const std::string& key) {
  catch_up();  // most of the reading before the lock: a new handle may have the whole log to read
  Lock l(*this);
  catch_up_and_repair();
  if (!values_.count(key)) return false;
  append(key, nullptr);
  return true;
}

std::int64_t FileStore::num_keys() {
  refresh(false);
  return static_cast<std::int64_t>(values_.size());
}

std::unique_ptr<Store> FileStore::clone() {
  auto s = std::make_unique<FileStore>(address_, dir_);
  s->set_timeout(timeout());
  return s;
}

}  // namespace fastrun::file_store
