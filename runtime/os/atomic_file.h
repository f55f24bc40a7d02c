#pragma once
// A file written all or nothing: readers of `path` see the previous file or the new one, never
// a torn one, also when the writer is SIGKILLed or the disk fills up mid-write.
//
//   os::AtomicFile f(path);   // an unnamed file in path's directory (O_TMPFILE)
//   f.write(p, n); ...        // throws Error naming the path and errno
//   f.commit();               // fsync, give it a name, rename it over `path`, fsync the directory
//
// Without commit() (an exception, a crash, a kill) nothing appears and nothing is left behind:
// the data lives in an unnamed inode that the kernel frees when the descriptor closes. Where the
// filesystem has no O_TMPFILE (or /proc/self/fd is missing), a named `path.tmp.<pid>` is used
// instead and removed by the destructor (a SIGKILL can leave that one behind; the next commit
// by the same pid replaces it). The temporary lives in the same directory so that the rename
// stays on one filesystem and is atomic.
// Threading: one object, one thread. Not for two writers of the same path at once.
#include <cstddef>
#include <string>

#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::os {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // throws Error when the directory is not writable
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // not committed: the temporary is discarded

  const std::string& path() const { return path_; }
  void write(const void* data, std::size_t n);
  // Durable and visible: fsync, rename over path(), fsync of the directory. Once only.
  void commit();

 private:
  std::string path_;
  std::string temp_name_;  // named fallback (or the name linked just before the rename)
  bool unnamed_ = false;   // O_TMPFILE: no name until commit
  bool committed_ = false;
  UniqueFd fd_;
};

// The directory part of `path` ("." for a bare name, "/" for a file in the root).
std::string directory_of(const std::string& path);

}  // namespace fastrun::os
