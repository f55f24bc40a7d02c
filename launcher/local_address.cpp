#include "fastrun/launcher/local_address.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include <fmt/format.h>

#include "fastrun/launcher/unique_fd.h"
#include "fastrun/runtime/error.h"

namespace fastrun::launcher {

std::string local_address_towards(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port == 0 ? 9 : port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0 || !res)
    throw Error(fmt::format("'{}' does not resolve ({}); give --master-addr as an address every node can reach",
                            host, gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(res, &::freeaddrinfo);
  UniqueFd fd(::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("local address: socket", errno);
  if (::connect(fd.get(), res->ai_addr, res->ai_addrlen) != 0)
    throw_errno(fmt::format("finding the local address that reaches {}", host), errno);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0)
    throw_errno("local address: getsockname", errno);
  char text[NI_MAXHOST];
  if (const int rc = ::getnameinfo(reinterpret_cast<sockaddr*>(&local), len, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
      rc != 0)
    throw Error(fmt::format("local address towards {}: getnameinfo: {}", host, gai_strerror(rc)));
  return text;
}

}  // namespace fastrun::launcher
