#include "fastrun/runtime/store/file/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/os/safe_name.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/owner.h"
#include "fastrun/runtime/store/runtime_dir.h"

namespace fastrun::file_store {
namespace {

using Clock = std::chrono::steady_clock;
// Re-reads of a record torn by a concurrent in-place rewrite before it counts as corrupt.
constexpr int kTornReadRetries = 1000;
// Records up to this size are rewritten in place (one write, within one page, so a writer
// killed mid-way cannot leave half a record); larger ones go through a new file and rename.
constexpr std::size_t kInPlaceMax = 3072;
constexpr char kValueMagic[8] = {'F', 'R', 'S', 'T', 'K', 'V', '0', '1'};

std::uint64_t fnv(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// File name of a key: safe characters kept, others %XX; long keys become a hash (the key is
// stored in the file and checked on read, so a collision is an error, never a wrong value).
std::string encode_key(const std::string& key) {
  std::string out = "k-";
  for (unsigned char c : key) {
    if (os::is_name_char(static_cast<char>(c))) out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  if (out.size() > 180) out = fmt::format("k-#{:016x}{:016x}", fnv(key.data(), key.size()),
                                          fnv(key.data(), key.size(), 0x9e3779b97f4a7c15ull));
  return out;
}

// One buffer for one write: header (magic, key and value lengths), key, value, FNV-1a of all.
Bytes encode_record(const std::string& key, const Bytes& value) {
  const std::uint64_t key_len = key.size(), value_len = value.size();
  Bytes file(sizeof kValueMagic + 16 + key.size() + value.size() + 8);
  std::uint8_t* p = file.data();
  std::memcpy(p, kValueMagic, sizeof kValueMagic);
  std::memcpy(p + 8, &key_len, 8);
  std::memcpy(p + 16, &value_len, 8);
  std::memcpy(p + 24, key.data(), key.size());
  if (!value.empty()) std::memcpy(p + 24 + key.size(), value.data(), value.size());
  const std::uint64_t sum = fnv(p, file.size() - 8);
  std::memcpy(p + file.size() - 8, &sum, 8);
  return file;
}

// The whole file, read until end of file (no fstat: one syscall fewer, and a size that changes
// under the read is caught by the record's own lengths).
Bytes read_to_end(int fd, const std::string& path) {
  Bytes data(4096);
  std::size_t got = 0;
  for (;;) {
    if (got == data.size()) data.resize(data.size() * 2);
    const ssize_t r = ::read(fd, data.data() + got, data.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno("read " + path, errno);
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  data.resize(got);
  return data;
}

// On NFS a missing key's lookup may be answered from a cached negative entry until the
// directory's attributes are revalidated; opening the directory revalidates them
// (close-to-open), so a poll after a miss sees files other hosts created. ~2 us locally.
void refresh_dir(const std::string& dir) {
  const os::UniqueFd opened(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));  // the open is the point
}

// Waits for keys: from 1 ms up to 10 ms between looks (a file appears without a wake-up).
constexpr os::Backoff kWaitBackoff{std::chrono::milliseconds(1), std::chrono::milliseconds(10)};
// A mutation holds the write lock briefly: look again soon.
constexpr os::Backoff kLockBackoff{std::chrono::microseconds(20), std::chrono::microseconds(2000)};

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
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const auto deadline = Clock::now() + std::max(s.timeout(), Duration(std::chrono::seconds(1)));
    const bool locked = os::poll_until(deadline, kLockBackoff, [&] {
      if (::fcntl(s.lock_fd_.get(), F_OFD_SETLK, &fl) == 0) return true;
      if (errno != EAGAIN && errno != EACCES && errno != EINTR)
        throw_errno(fmt::format("{}: locking {}/lock", s.address_, s.dir_), errno);
      return false;
    });
    if (!locked)
      throw StoreError(fmt::format("{}: could not take the lock {}/lock within {} ms (a holder is stopped, or the "
                                   "filesystem does not support fcntl locks: NFS needs its lock manager)",
                                   s.address_, s.dir_, s.timeout().count()));
  }
  ~Lock() {
    struct flock fl {};
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    ::fcntl(s_.lock_fd_.get(), F_OFD_SETLK, &fl);
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  FileStore& s_;
};

FileStore::FileStore(std::string address, std::string dir) : address_(std::move(address)), dir_(std::move(dir)) {
  lock_fd_.reset(::open((dir_ + "/lock").c_str(), O_RDWR | O_CLOEXEC));
  if (!lock_fd_) throw_errno(fmt::format("{}: opening {}/lock", address_, dir_), errno);
}

FileStore::~FileStore() = default;

std::string FileStore::key_path(const std::string& key) const { return dir_ + "/" + encode_key(key); }

std::optional<Bytes> FileStore::read_value(const std::string& key) const {
  const std::string path = key_path(key);
  // A read that overlaps an in-place rewrite (write_value) can see a mix of both values: the
  // checksum tells, and the read is repeated. A file that stays corrupt was not written here.
  for (int attempt = 0;; ++attempt) {
    const os::UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f) {
      if (errno == ENOENT) return std::nullopt;
      throw_errno(fmt::format("{}: reading key '{}' ({})", address_, key, path), errno);
    }
    Bytes data = read_to_end(f.get(), path);
    const char* why = nullptr;
    if (auto v = decode_record(data, key, why)) return v;
    if (attempt >= kTornReadRetries)
      throw StoreError(fmt::format("{}: key file {} is corrupt ({}): it was not written by this store", address_,
                                   path, why));
    if (attempt > 4) std::this_thread::yield();
  }
}

// The key's value if `data` is a whole record of it; else nullopt and `why` says what is wrong.
std::optional<Bytes> FileStore::decode_record(const Bytes& data, const std::string& key, const char*& why) const {
  std::uint64_t key_len = 0, value_len = 0, sum = 0;
  const std::size_t head = sizeof kValueMagic + 16;
  const std::size_t got = data.size();
  if (got < head + 8 || std::memcmp(data.data(), kValueMagic, sizeof kValueMagic) != 0) {
    why = "bad header";
    return std::nullopt;
  }
  std::memcpy(&key_len, data.data() + 8, 8);
  std::memcpy(&value_len, data.data() + 16, 8);
  if (key_len > got || value_len > got || head + key_len + value_len + 8 != got) {
    why = "bad length";
    return std::nullopt;
  }
  std::memcpy(&sum, data.data() + head + key_len + value_len, 8);
  if (fnv(data.data(), head + key_len + value_len) != sum) {
    why = "bad checksum";
    return std::nullopt;
  }
  if (key_len != key.size() || std::memcmp(data.data() + head, key.data(), key.size()) != 0)
    throw StoreError(fmt::format("{}: key file {} holds another key (hash collision of long keys)", address_,
                                 key_path(key)));
  return Bytes(data.begin() + static_cast<std::ptrdiff_t>(head + key_len),
               data.begin() + static_cast<std::ptrdiff_t>(head + key_len + value_len));
}

bool FileStore::exists(const std::string& key) const {
  struct stat st {};
  return ::stat(key_path(key).c_str(), &st) == 0;
}

// A key's first value (and any record that is large, or smaller than the file it replaces) is
// written to a t- file renamed over the key's file: atomic for readers, on NFS too. Later small
// values overwrite the existing file in place with one pwrite, which costs no inode and no
// directory update (the cost that made this store slower than torch's FileStore); readers
// detect an overlapping read by the checksum and re-read. Writers are serialized by the lock.
// No fsync: a process crash cannot expose a partial record (see kInPlaceMax), NFS flushes on
// close, and a machine crash ends the job that owns the store anyway.
void FileStore::write_value(const std::string& key, const Bytes& value) {
  const Bytes record = encode_record(key, value);
  const std::string path = key_path(key);
  if (record.size() <= kInPlaceMax) {
    const os::UniqueFd f(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    struct stat st {};
    if (f && ::fstat(f.get(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) <= record.size()) {
      const ssize_t w = ::pwrite(f.get(), record.data(), record.size(), 0);
      if (w == static_cast<ssize_t>(record.size())) return;
      if (w < 0) throw_errno(fmt::format("{}: writing key '{}' ({})", address_, key, path), errno);
      // A short write (disk full): the rename below replaces the torn file whole, or fails.
    }
  }
  static std::atomic<std::uint64_t> counter{0};
  static const std::string host = store_owner::host_name();  // same after fork; pid is not
  const std::string tmp = fmt::format("{}/t-{}-{}-{}", dir_, host, ::getpid(), counter.fetch_add(1));
  {
    const os::UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!f) throw_errno(fmt::format("{}: writing key '{}' ({})", address_, key, tmp), errno);
    if (!os::write_all(f.get(), record.data(), record.size())) {
      const int e = errno;
      ::unlink(tmp.c_str());
      throw_errno("write " + tmp, e);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(fmt::format("{}: publishing key '{}'", address_, key), e);
  }
}

void FileStore::set(const std::string& key, const Bytes& value) {
  Lock l(*this);
  write_value(key, value);
}

Bytes FileStore::get(const std::string& key, Duration timeout) {
  std::optional<Bytes> v;
  bool looked = false;
  const bool found = os::poll_until(Clock::now() + timeout, kWaitBackoff, [&] {
    if (std::exchange(looked, true)) refresh_dir(dir_);  // after a miss and a sleep
    return (v = read_value(key)).has_value();
  });
  if (!found) throw_wait_timeout(*this, {key}, 1, timeout);
  return std::move(*v);
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  Lock l(*this);
  std::int64_t v = delta;
  if (auto old = read_value(key)) v = parse_counter(address_, key, *old) + delta;
  write_value(key, to_bytes(std::to_string(v)));
  return v;
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Lock l(*this);
  auto old = read_value(key);
  if (!old) {
    if (!expected.empty()) return expected;
  } else if (*old != expected) {
    return *old;
  }
  write_value(key, desired);
  return desired;
}

void FileStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::size_t next = 0;  // keys[0, next) were seen present: poll only the first missing one
  bool looked = false;
  const bool all = os::poll_until(Clock::now() + timeout, kWaitBackoff, [&] {
    if (std::exchange(looked, true)) refresh_dir(dir_);  // after a miss and a sleep
    while (next < keys.size() && exists(keys[next])) ++next;
    return next == keys.size();
  });
  if (all) return;
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!exists(k)) missing.push_back(k);
  if (!missing.empty()) throw_wait_timeout(*this, missing, keys.size(), timeout);
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (!exists(k)) return false;
  return true;
}

bool FileStore::delete_key(const std::string& key) {
  Lock l(*this);
  if (::unlink(key_path(key).c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  throw_errno(fmt::format("{}: deleting key '{}'", address_, key), errno);
}

std::int64_t FileStore::num_keys() {
  DIR* d = ::opendir(dir_.c_str());
  if (!d) throw_errno(fmt::format("{}: listing {}", address_, dir_), errno);
  std::int64_t n = 0;
  while (const dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, "k-", 2) == 0) ++n;
  ::closedir(d);
  return n;
}

std::unique_ptr<Store> FileStore::clone() {
  auto s = std::make_unique<FileStore>(address_, dir_);
  s->set_timeout(timeout());
  return s;
}

}  // namespace fastrun::file_store
