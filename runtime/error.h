#pragma once
// The one exception hierarchy of fastrun (docs/errors.md). Every message says which rank, which
// operation, which peer or keys, the underlying errno/NCCL text, and the flag or variable that
// changes the behaviour. Status codes become these exceptions once, at the boundary.
#include <cerrno>
#include <stdexcept>
#include <string>

namespace fastrun {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: a flag, an environment variable, an address. Raised before anything starts.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A wait ran past its deadline. The message names who or what did not arrive.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A rendezvous store failed (I/O, protocol, full segment, bad token).
class StoreError : public Error {
 public:
  using Error::Error;
};

// Another rank failed or died; the message names it.
class PeerFailure : public Error {
 public:
  using Error::Error;
};

// A collective backend (gloo, nccl, shm) failed.
class BackendError : public Error {
 public:
  using Error::Error;
};

// Throws Error("<what>: <strerror(errno_value)> (errno N)"). The one boundary for syscalls.
[[noreturn]] void throw_errno(const std::string& what, int errno_value);

// Checks a syscall-style result: -1 means failure with errno set.
inline long check_syscall(long result, const char* what) {
  if (result == -1) throw_errno(what, errno);
  return result;
}

}  // namespace fastrun
