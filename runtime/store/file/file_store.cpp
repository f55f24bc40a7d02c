#include "fastrun/runtime/store/file/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/safe_name.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/owner.h"
#include "fastrun/runtime/store/runtime_dir.h"

namespace fastrun::file_store {
namespace {

using Clock = std::chrono::steady_clock;
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

// On NFS a missing key's lookup may be answered from a cached negative entry until the
// directory's attributes are revalidated; opening the directory revalidates them
// (close-to-open), so a poll after a miss sees files other hosts created. ~2 us locally.
void refresh_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
}

void sleep_backoff(std::chrono::microseconds& delay, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  std::this_thread::sleep_for(std::max(std::chrono::microseconds(0), std::min(delay, left)));
  delay = std::min(delay * 2, std::chrono::microseconds(10000));
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
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const auto deadline = Clock::now() + std::max(s.timeout(), Duration(std::chrono::seconds(1)));
    auto delay = std::chrono::microseconds(20);
    while (::fcntl(s.lock_fd_, F_OFD_SETLK, &fl) != 0) {
      if (errno != EAGAIN && errno != EACCES && errno != EINTR)
        throw_errno(fmt::format("{}: locking {}/lock", s.address_, s.dir_), errno);
      if (Clock::now() >= deadline)
        throw StoreError(fmt::format("{}: could not take the lock {}/lock within {} ms (a holder is stopped, or the "
                                     "filesystem does not support fcntl locks: NFS needs its lock manager)",
                                     s.address_, s.dir_, s.timeout().count()));
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::microseconds(2000));
    }
  }
  ~Lock() {
    struct flock fl {};
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    ::fcntl(s_.lock_fd_, F_OFD_SETLK, &fl);
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  FileStore& s_;
};

FileStore::FileStore(std::string address, std::string dir) : address_(std::move(address)), dir_(std::move(dir)) {
  lock_fd_ = ::open((dir_ + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  if (lock_fd_ < 0) throw_errno(fmt::format("{}: opening {}/lock", address_, dir_), errno);
}

FileStore::~FileStore() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string FileStore::key_path(const std::string& key) const { return dir_ + "/" + encode_key(key); }

std::optional<Bytes> FileStore::read_value(const std::string& key) const {
  const std::string path = key_path(key);
  const os::UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f) {
    if (errno == ENOENT) return std::nullopt;
    throw_errno(fmt::format("{}: reading key '{}' ({})", address_, key, path), errno);
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw_errno("fstat " + path, errno);
  Bytes data(static_cast<std::size_t>(st.st_size));
  const ssize_t read = os::read_full(f.get(), data.data(), data.size());
  if (read < 0) throw_errno("read " + path, errno);
  const auto got = static_cast<std::size_t>(read);
  std::uint64_t key_len = 0, value_len = 0, sum = 0;
  const std::size_t head = sizeof kValueMagic + 16;
  auto corrupt = [&](const char* why) {
    return StoreError(fmt::format("{}: key file {} is corrupt ({}): it was not written by this store", address_, path,
                                  why));
  };
  if (got < head + 8 || std::memcmp(data.data(), kValueMagic, sizeof kValueMagic) != 0) throw corrupt("bad header");
  std::memcpy(&key_len, data.data() + 8, 8);
  std::memcpy(&value_len, data.data() + 16, 8);
  if (head + key_len + value_len + 8 != got) throw corrupt("bad length");
  std::memcpy(&sum, data.data() + head + key_len + value_len, 8);
  if (fnv(data.data(), head + key_len + value_len) != sum) throw corrupt("bad checksum");
  if (key_len != key.size() || std::memcmp(data.data() + head, key.data(), key.size()) != 0)
    throw StoreError(fmt::format("{}: key file {} holds another key (hash collision of long keys)", address_, path));
  return Bytes(data.begin() + static_cast<std::ptrdiff_t>(head + key_len),
               data.begin() + static_cast<std::ptrdiff_t>(head + key_len + value_len));
}

bool FileStore::exists(const std::string& key) const {
  struct stat st {};
  return ::stat(key_path(key).c_str(), &st) == 0;
}

// Writes a t- file and renames it over the key's file: atomic for readers, on NFS too.
// No fsync: process crashes cannot expose a partial file (the rename comes after the last
// write; NFS flushes on close), and a machine crash ends the job that owns the store anyway.
void FileStore::write_value(const std::string& key, const Bytes& value) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::string host = store_owner::host_name();  // same after fork; pid is not
  const std::string tmp = fmt::format("{}/t-{}-{}-{}", dir_, host, ::getpid(), counter.fetch_add(1));
  {
    const os::UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!f) throw_errno(fmt::format("{}: writing key '{}' ({})", address_, key, tmp), errno);
    const std::uint64_t key_len = key.size(), value_len = value.size();
    Bytes head(sizeof kValueMagic + 16);
    std::memcpy(head.data(), kValueMagic, sizeof kValueMagic);
    std::memcpy(head.data() + 8, &key_len, 8);
    std::memcpy(head.data() + 16, &value_len, 8);
    std::uint64_t sum = fnv(head.data(), head.size());
    sum = fnv(key.data(), key.size(), sum);
    sum = fnv(value.data(), value.size(), sum);
    // One buffer, one write: most values are small, and each syscall costs on NFS.
    Bytes file;
    file.reserve(head.size() + key.size() + value.size() + sizeof sum);
    file.insert(file.end(), head.begin(), head.end());
    file.insert(file.end(), key.begin(), key.end());
    file.insert(file.end(), value.begin(), value.end());
    const auto* sum_bytes = reinterpret_cast<const std::uint8_t*>(&sum);
    file.insert(file.end(), sum_bytes, sum_bytes + sizeof sum);
    if (!os::write_all(f.get(), file.data(), file.size())) {
      const int e = errno;
      ::unlink(tmp.c_str());
      throw_errno("write " + tmp, e);
    }
  }
  if (::rename(tmp.c_str(), key_path(key).c_str()) != 0) {
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
  const auto deadline = Clock::now() + timeout;
  auto delay = std::chrono::microseconds(1000);
  for (;;) {
    if (auto v = read_value(key)) return *v;
    if (Clock::now() >= deadline) throw_wait_timeout(*this, {key}, 1, timeout);
    sleep_backoff(delay, deadline);
    refresh_dir(dir_);
  }
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
  const auto deadline = Clock::now() + timeout;
  auto delay = std::chrono::microseconds(1000);
  std::size_t next = 0;  // keys[0, next) were seen present: poll only the first missing one
  for (;;) {
    while (next < keys.size() && exists(keys[next])) ++next;
    if (next == keys.size()) return;
    if (Clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (const auto& k : keys)
        if (!exists(k)) missing.push_back(k);
      if (missing.empty()) return;
      throw_wait_timeout(*this, missing, keys.size(), timeout);
    }
    sleep_backoff(delay, deadline);
    refresh_dir(dir_);
  }
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
