#include "fastrun/runtime/os/fd_control.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::os {
namespace {

// The command's name, so the message reads "F_SETFL" rather than "4".
std::string command_name(int cmd) {
  switch (cmd) {
    case F_GETFL: return "F_GETFL";
    case F_SETFL: return "F_SETFL";
    case F_GETFD: return "F_GETFD";
    case F_SETFD: return "F_SETFD";
    case F_DUPFD: return "F_DUPFD";
    case F_DUPFD_CLOEXEC: return "F_DUPFD_CLOEXEC";
    default: return fmt::format("command {}", cmd);
  }
}

std::string for_what(std::string_view what) { return what.empty() ? "" : fmt::format(" ({})", what); }

}  // namespace

int checked_fcntl(int fd, int cmd, long arg, std::string_view what) {
  for (;;) {
    const int r = ::fcntl(fd, cmd, arg);
    if (r != -1) return r;
    if (errno == EINTR) continue;
    throw_errno(fmt::format("fcntl(fd {}, {}){}", fd, command_name(cmd), for_what(what)), errno);
  }
}

void set_nonblocking(int fd, std::string_view what) {
  const int flags = checked_fcntl(fd, F_GETFL, 0, what);
  if ((flags & O_NONBLOCK) == 0) checked_fcntl(fd, F_SETFL, flags | O_NONBLOCK, what);
}

void checked_dup2(int from, int to, std::string_view what) {
  for (;;) {
    if (::dup2(from, to) != -1) return;
    if (errno == EINTR || errno == EBUSY) continue;
    throw_errno(fmt::format("dup2(fd {} onto fd {}){}", from, to, for_what(what)), errno);
  }
}

}  // namespace fastrun::os
