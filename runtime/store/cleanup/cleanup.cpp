#include "fastrun/runtime/store/cleanup/cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <ctime>
#include <fstream>

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/file/file_store.h"
#include "fastrun/runtime/store/owner.h"
#include "fastrun/runtime/store/runtime_dir.h"
#include "fastrun/runtime/store/shm/segment_layout.h"

namespace fastrun {
namespace {

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

bool dead(const store_owner::Identity& id) { return store_owner::liveness(id) == store_owner::Liveness::dead; }

// A shm store segment is stale when its header's creator is dead, or when it is empty and a
// minute old. A sized segment without a creator block is left alone (it may be another kind's).
bool stale_segment(const std::string& path) {
  const os::UniqueFd owner(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!owner) return false;
  const int fd = owner.get();
  struct stat st {};
  shm_store::Creator c{};
  bool stale = false;
  const auto creator_at = offsetof(shm_store::SegmentHeader, creator);
  if (::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && S_ISREG(st.st_mode)) {
    const ssize_t n = ::pread(fd, &c, sizeof c, static_cast<off_t>(creator_at));
    if (n == static_cast<ssize_t>(sizeof c) && c.ident_magic == shm_store::kIdentMagic) {
      store_owner::Identity id;
      id.pid = c.pid;
      id.start_time = c.start_time;
      id.boot_id.assign(c.boot_id, strnlen(c.boot_id, sizeof c.boot_id));
      id.host.assign(c.host, strnlen(c.host, sizeof c.host));
      stale = dead(id);
    } else if (st.st_size == 0) {
      // Created but never sized: its creator died between shm_open and ftruncate, or is in
      // that window right now — so only once it is a minute old.
      stale = ::time(nullptr) - st.st_mtime > 60;
    }
  }
  return stale;
}

bool stale_file_store(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) return false;
  std::ifstream in(dir + "/owner");
  std::string magic, ident;
  if (!std::getline(in, magic) || magic != file_store::kOwnerMagic || !std::getline(in, ident)) return false;
  store_owner::Identity id;
  return store_owner::parse(ident, id) && dead(id);
}

void remove_dir_files(const std::string& dir) {
  for (const auto& n : list_dir(dir)) ::unlink((dir + "/" + n).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

std::vector<std::string> cleanup_stale_stores(const CleanupOptions& options) {
  std::vector<std::string> removed;
  for (const auto& name : list_dir(options.shm_dir)) {
    if (name.rfind(shm_store::kSegmentPrefix, 0) != 0) continue;
    const std::string path = options.shm_dir + "/" + name;
    if (!stale_segment(path)) continue;
    if (!options.dry_run && ::unlink(path.c_str()) != 0) {
      log::info("cleanup: could not remove {}: {}", path, std::strerror(errno));
      continue;
    }
    removed.push_back(path);
  }
  std::string rdir = options.runtime_dir;
  if (rdir.empty()) {
    try {
      rdir = runtime_dir();
    } catch (const std::exception& e) {
      log::info("cleanup: skipping the runtime directory: {}", e.what());
    }
  }
  if (!rdir.empty()) {
    for (const auto& name : list_dir(rdir)) {
      const std::string path = rdir + "/" + name;
      if (!stale_file_store(path)) continue;
      if (!options.dry_run) remove_dir_files(path);
      removed.push_back(path);
    }
  }
  return removed;
}

}  // namespace fastrun
