#include "fastrun/launcher/free_port.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/bound_port.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::launcher {

int pick_free_port(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), "0", &hints, &res); rc != 0 || !res)
    throw Error(fmt::format("picking a free port on '{}': the host does not resolve ({})", host, gai_strerror(rc)));
  const int family = res->ai_family;
  sockaddr_storage addr{};
  socklen_t len = res->ai_addrlen;
  std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  os::UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("picking a free port: socket", errno);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    throw_errno(fmt::format("picking a free port on '{}': bind", host), errno);
  return os::bound_port(fd.get(), "picking a free port");
}

}  // namespace fastrun::launcher
