#include "fastrun/runtime/store/runtime_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"

namespace fastrun {

void ensure_private_dir(const std::string& path, bool create) {
  if (create && ::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw StoreError(fmt::format("cannot create the private directory {}: {} (set FASTRUN_RUNTIME_DIR to another one)",
                                 path, std::strerror(errno)));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    throw StoreError(fmt::format("private directory {}: {} (set FASTRUN_RUNTIME_DIR)", path, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    throw StoreError(fmt::format("private directory {} is not a directory (a symlink or file is refused); "
                                 "remove it or set FASTRUN_RUNTIME_DIR",
                                 path));
  if (st.st_uid != ::geteuid())
    throw StoreError(fmt::format("private directory {} is owned by uid {}, not by this user (uid {}); "
                                 "set FASTRUN_RUNTIME_DIR to a directory of yours",
                                 path, st.st_uid, ::geteuid()));
  if ((st.st_mode & 077) != 0)
    throw StoreError(fmt::format("private directory {} has mode {:o}: group/other access is refused (want 0700); "
                                 "chmod 700 it or set FASTRUN_RUNTIME_DIR",
                                 path, st.st_mode & 07777));
}

std::string runtime_dir() {
  std::string dir;
  if (auto v = env::find_string(env::kRuntimeDir); v && !v->empty()) {
    dir = *v;
  } else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    dir = std::string(xdg) + "/fastrun";
  } else {
    dir = fmt::format("/tmp/fastrun-{}", ::geteuid());
  }
  ensure_private_dir(dir, true);
  return dir;
}

}  // namespace fastrun
