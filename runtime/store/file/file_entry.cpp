// host_file / connect_file: creating, opening and removing the directory of a file:// store.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/file/file_store.h"
#include "fastrun/runtime/store/kinds.h"
#include "fastrun/runtime/store/owner.h"

namespace fastrun::store_kinds {
namespace {

// Removes the store directory and the files in it (the store never makes sub-directories).
void remove_store_dir(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
      ::unlink((dir + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
    log::warn("could not remove file store directory {}: {}", dir, std::strerror(errno));
}

// Owns the directory: a fresh one is created (a stale existing path is refused, so a crashed
// job's keys are never replayed into a new one) and removed when this object goes away.
class HostedFile final : public HostedStore {
 public:
  HostedFile(const StoreAddress& a, const StoreOptions& o) : address_(a.to_string()), timeout_(o.timeout) {
    dir_ = file_store::resolve_path(a.name);
    if (::mkdir(dir_.c_str(), 0700) != 0) {
      if (errno == EEXIST)
        throw StoreError(fmt::format("{}: {} already exists: another job uses it, or a crashed job left it (a file "
                                     "store path must be fresh; remove it, or run `fastrun --cleanup`)",
                                     address_, dir_));
      throw_errno(fmt::format("{}: creating store directory {}", address_, dir_), errno);
    }
    try {
      if (::chmod(dir_.c_str(), 0700) != 0) throw_errno("chmod " + dir_, errno);
      const os::UniqueFd lock(::open((dir_ + "/lock").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!lock) throw_errno(fmt::format("{}: creating {}/lock", address_, dir_), errno);
      const os::UniqueFd log(::open((dir_ + "/log").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!log) throw_errno(fmt::format("{}: creating {}/log", address_, dir_), errno);
      // The owner marker last, via rename: its presence means "ready" to connecting clients.
      const std::string tmp = dir_ + "/t-owner";
      {
        std::ofstream out(tmp);
        out << file_store::kOwnerMagic << "\n" << store_owner::serialize(store_owner::self()) << "\n";
        if (!out.flush()) throw StoreError(fmt::format("{}: writing {}", address_, tmp));
      }
      ::chmod(tmp.c_str(), 0600);
      if (::rename(tmp.c_str(), (dir_ + "/owner").c_str()) != 0) throw_errno("rename " + tmp, errno);
    } catch (...) {
      remove_store_dir(dir_);
      throw;
    }
  }
  ~HostedFile() override { remove_store_dir(dir_); }
  std::string address() const override { return address_; }
  std::string token() const override { return ""; }
  std::unique_ptr<Store> connect() override {
    auto s = std::make_unique<file_store::FileStore>(address_, dir_);
    s->set_timeout(timeout_);
    return s;
  }

 private:
  std::string address_;
  std::string dir_;
  Duration timeout_;
};

}  // namespace

std::unique_ptr<HostedStore> host_file(const StoreAddress& address, const StoreOptions& options) {
  return std::make_unique<HostedFile>(address, options);
}

// Ranks may start before the host made the directory: wait (polling) for its owner marker.
std::unique_ptr<Store> connect_file(const StoreAddress& address, const StoreOptions& options) {
  const std::string addr = address.to_string();
  const std::string dir = file_store::resolve_path(address.name);
  constexpr os::Backoff kBackoff{std::chrono::milliseconds(1), std::chrono::milliseconds(20)};
  const bool appeared = os::poll_until(std::chrono::steady_clock::now() + options.timeout, kBackoff, [&] {
    struct stat st {};
    return ::stat((dir + "/owner").c_str(), &st) == 0;
  });
  if (!appeared)
    throw TimeoutError(fmt::format("{}: store directory {} did not appear within {:.3g} s (is the store hosted, and "
                                   "is the path on a filesystem this host shares?)",
                                   addr, dir, options.timeout.count() / 1000.0));
  auto s = std::make_unique<file_store::FileStore>(addr, dir);
  s->set_timeout(options.timeout);
  return s;
}

bool file_exists(const StoreAddress& address) {
  struct stat st {};
  return ::stat((file_store::resolve_path(address.name) + "/owner").c_str(), &st) == 0;
}

}  // namespace fastrun::store_kinds
