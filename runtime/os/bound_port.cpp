#include "fastrun/runtime/os/bound_port.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "fastrun/runtime/error.h"

namespace fastrun::os {

std::uint16_t bound_port(int fd, std::string_view what) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_errno(std::string(what) + ": getsockname", errno);
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port
                                          : reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

}  // namespace fastrun::os
