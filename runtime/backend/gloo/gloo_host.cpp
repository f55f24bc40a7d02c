#include "fastrun/runtime/backend/gloo/gloo_host.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"

namespace fastrun {
namespace {

struct LocalAddress {
  std::string interface;
  std::string address;  // numeric
  bool v6 = false;
  bool link_local = false;
};

std::string numeric(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  else
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  return text;
}

std::vector<LocalAddress> local_addresses() {
  std::vector<LocalAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owned(list, &::freeifaddrs);
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    LocalAddress a{i->ifa_name, numeric(i->ifa_addr), i->ifa_addr->sa_family == AF_INET6, false};
    if (a.v6) a.link_local = IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    out.push_back(std::move(a));
  }
  return out;
}

// "lo (127.0.0.1, ::1), eth0 (192.0.2.2)" for error messages.
std::string describe(const std::vector<LocalAddress>& addresses) {
  std::map<std::string, std::vector<std::string>> by_interface;
  for (const auto& a : addresses) by_interface[a.interface].push_back(a.address);
  std::vector<std::string> parts;
  for (const auto& [name, list] : by_interface) parts.push_back(fmt::format("{} ({})", name, fmt::join(list, ", ")));
  return parts.empty() ? std::string("none found") : fmt::format("{}", fmt::join(parts, ", "));
}

bool is_local(const std::string& address, const std::vector<LocalAddress>& addresses) {
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) return true;
  for (const auto& a : addresses)
    if (a.address == address) return true;
  return false;
}

bool is_wildcard(const std::string& address) { return address == "0.0.0.0" || address == "::"; }

}  // namespace

std::string resolve_gloo_host(const std::string& value) {
  const auto addresses = local_addresses();
  const auto reject = [&](const std::string& why) {
    return ConfigError(fmt::format("FASTRUN_GLOO_HOST='{}': {}; give an interface name or an address of this "
                                   "machine that the other ranks can reach: {}",
                                   value, why, describe(addresses)));
  };
  if (value.empty()) throw reject("it is empty");
  // 1. An interface name.
  std::string v4, v6;
  bool interface_seen = false;
  for (const auto& a : addresses) {
    if (a.interface != value) continue;
    interface_seen = true;
    if (!a.v6 && v4.empty()) v4 = a.address;
    if (a.v6 && !a.link_local && v6.empty()) v6 = a.address;  // link-local needs a scope id gloo cannot take
  }
  if (interface_seen) {
    if (!v4.empty()) return v4;
    if (!v6.empty()) return v6;
    throw reject("that interface has no usable address");
  }
  // 2. A numeric address of this machine.
  in6_addr buf{};
  if (::inet_pton(AF_INET, value.c_str(), &buf) == 1 || ::inet_pton(AF_INET6, value.c_str(), &buf) == 1) {
    if (is_wildcard(value)) throw reject("a wildcard address cannot be advertised to the other ranks");
    if (!is_local(value, addresses)) throw reject("no interface of this machine has that address");
    return value;
  }
  // 3. A host name resolving to one.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(value.c_str(), nullptr, &hints, &res); rc != 0 || !res)
    throw reject(fmt::format("it is neither an interface nor an address, and does not resolve ({})", gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(res, &::freeaddrinfo);
  std::vector<std::string> seen;
  for (const addrinfo* ai = res; ai; ai = ai->ai_next) {
    const std::string address = numeric(ai->ai_addr);
    if (!is_wildcard(address) && is_local(address, addresses)) return address;
    seen.push_back(address);
  }
  throw reject(fmt::format("it resolves to {}, none of them an address of this machine", fmt::join(seen, ", ")));
}

std::string resolve_group_gloo_host(const std::string& configured) {
  return resolve_gloo_host(configured.empty() ? env::get_string(env::kGlooHost) : configured);
}

}  // namespace fastrun
