#include "fastrun/runtime/os/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/full_io.h"

namespace fastrun::os {

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // 1. An unnamed file in the target's directory: a crash before commit leaves nothing. Linking
  //    it later goes through /proc/self/fd (linkat with AT_EMPTY_PATH would need a capability).
  if (::access("/proc/self/fd", X_OK) == 0) {
    fd_.reset(::open(directory_of(path_).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644));
    unnamed_ = static_cast<bool>(fd_);
  }
  // 2. Fallback (no O_TMPFILE on this filesystem, no /proc): a named temporary, replaced if a
  //    crashed earlier writer with this pid left one.
  if (!fd_) {
    temp_name_ = path_ + ".tmp." + std::to_string(::getpid());
    fd_.reset(::open(temp_name_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd_) {
      const int e = errno;
      temp_name_.clear();
      throw_errno("creating a temporary file for " + path_ + " in " + directory_of(path_), e);
    }
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !temp_name_.empty()) ::unlink(temp_name_.c_str());
}

void AtomicFile::write(const void* data, std::size_t n) {
  if (committed_) throw Error("AtomicFile::write after commit of " + path_);
  if (!write_all(fd_.get(), data, n)) throw_errno("writing " + path_ + " (not yet in place)", errno);
}

void AtomicFile::commit() {
  if (committed_) throw Error("AtomicFile::commit twice for " + path_);
  // 1. The data on disk before the name points at it (else a power cut could leave the new
  //    name on an empty or partial file).
  if (::fsync(fd_.get()) != 0) throw_errno("fsync of " + path_ + " (not yet in place)", errno);
  // 2. A name in the directory for the unnamed file: rename needs one, and linkat cannot
  //    replace an existing file, so link under the temporary name first.
  if (unnamed_) {
    temp_name_ = path_ + ".tmp." + std::to_string(::getpid());
    ::unlink(temp_name_.c_str());  // a stale one from a crashed writer with this pid
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_.get());
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_name_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      const int e = errno;
      temp_name_.clear();
      throw_errno("naming the new " + path_ + " (linkat)", e);
    }
  }
  // 3. The atomic step: readers see the old file until here, the new one after.
  if (::rename(temp_name_.c_str(), path_.c_str()) != 0)
    throw_errno("renaming " + temp_name_ + " to " + path_, errno);  // the destructor unlinks it
  committed_ = true;
  fd_.reset();
  // 4. The rename itself made durable. Best effort: the new file is already in place and
  //    complete, so a failure here must not report the write as failed.
  UniqueFd dir(::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir) ::fsync(dir.get());
}

}  // namespace fastrun::os
