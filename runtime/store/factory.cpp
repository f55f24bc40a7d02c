// Address parsing and the dispatch to each kind's entry points (kinds.h).
#include "fastrun/runtime/store/factory.h"


#include <fmt/format.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/safe_name.h"
#include "fastrun/runtime/store/kinds.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun {
namespace {

constexpr const char* kAcceptedForms =
    "accepted forms: shm://NAME (NAME of letters, digits, '.', '_', '-'), file://PATH, tcp://HOST:PORT "
    "(PORT 0-65535; 0 = pick a free port when hosting), c10d://HOST:PORT (a torch TCPStore, connect only)";

[[noreturn]] void reject(std::string_view address, std::string_view why) {
  throw ConfigError(fmt::format("store address '{}' is not valid: {}; {}", address, why, kAcceptedForms));
}

bool valid_shm_name(std::string_view name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  return os::all_name_chars(name);
}

StoreAddress parse_host_port(StoreAddress::Kind kind, std::string_view address, std::string_view rest) {
  std::string_view host;
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {  // [ipv6]:port
    const auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      reject(address, "an IPv6 host must be written [ADDR]:PORT");
    host = rest.substr(1, close - 1);
    port_text = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) reject(address, "the port is missing");
    host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
  }
  if (host.empty()) reject(address, "the host is missing");
  if (port_text.empty()) reject(address, "the port is missing");
  const auto port = text::to_integer(port_text, 0, 65535);
  if (!port) reject(address, fmt::format("port '{}' is not a number from 0 to 65535", port_text));
  StoreAddress a{kind, std::string(host)};
  a.port = static_cast<std::uint16_t>(*port);
  return a;
}

// Fills the defaults StoreOptions documents from the environment registry.
StoreOptions resolve(const StoreOptions& given) {
  StoreOptions o = given;
  if (o.token.empty()) o.token = env::find_string(env::kStoreToken).value_or("");
  if (o.timeout <= Duration::zero()) o.timeout = env::get_timeout(env::kTimeout);
  if (o.shm_bytes == 0) o.shm_bytes = static_cast<std::size_t>(env::get_int(env::kShmStoreBytes));
  return o;
}

}  // namespace

std::string StoreAddress::to_string() const {
  switch (kind) {
    case Kind::shm: return "shm://" + name;
    case Kind::file: return "file://" + name;
    case Kind::tcp:
    case Kind::c10d: {
      const char* scheme = kind == Kind::tcp ? "tcp" : "c10d";
      if (name.find(':') != std::string::npos) return fmt::format("{}://[{}]:{}", scheme, name, port);
      return fmt::format("{}://{}:{}", scheme, name, port);
    }
  }
  return "?";
}

StoreAddress parse_store_address(std::string_view address) {
  if (address.empty()) reject(address, "it is empty");
  const auto sep = address.find("://");
  if (sep == std::string_view::npos) reject(address, "it has no scheme");
  const std::string_view scheme = address.substr(0, sep);
  const std::string_view rest = address.substr(sep + 3);
  if (scheme == "shm") {
    if (rest.empty()) reject(address, "the segment name is missing");
    if (!valid_shm_name(rest)) reject(address, fmt::format("segment name '{}' has characters other than letters, digits, '.', '_', '-' (or is longer than 200)", rest));
    return {StoreAddress::Kind::shm, std::string(rest)};
  }
  if (scheme == "file") {
    if (rest.empty()) reject(address, "the path is missing");
    if (rest.find('\0') != std::string_view::npos) reject(address, "the path contains a NUL byte");
    return {StoreAddress::Kind::file, std::string(rest)};
  }
  if (scheme == "tcp") return parse_host_port(StoreAddress::Kind::tcp, address, rest);
  if (scheme == "c10d") return parse_host_port(StoreAddress::Kind::c10d, address, rest);
  reject(address, fmt::format("unknown scheme '{}'", scheme));
}

std::unique_ptr<HostedStore> host_store(std::string_view address, const StoreOptions& options) {
  const StoreAddress a = parse_store_address(address);
  const StoreOptions o = resolve(options);
  switch (a.kind) {
    case StoreAddress::Kind::shm: return store_kinds::host_shm(a, o);
    case StoreAddress::Kind::file: return store_kinds::host_file(a, o);
    case StoreAddress::Kind::tcp: return store_kinds::host_tcp(a, o);
    case StoreAddress::Kind::c10d: return store_kinds::host_c10d(a, o);
  }
  reject(address, "unknown kind");
}

std::unique_ptr<Store> connect_store(std::string_view address, const StoreOptions& options) {
  const StoreAddress a = parse_store_address(address);
  const StoreOptions o = resolve(options);
  std::unique_ptr<Store> s;
  switch (a.kind) {
    case StoreAddress::Kind::shm: s = store_kinds::connect_shm(a, o); break;
    case StoreAddress::Kind::file: s = store_kinds::connect_file(a, o); break;
    case StoreAddress::Kind::tcp: s = store_kinds::connect_tcp(a, o); break;
    case StoreAddress::Kind::c10d: s = store_kinds::connect_c10d(a, o); break;
  }
  s->set_timeout(o.timeout);
  return s;
}

std::optional<bool> store_exists(std::string_view address) {
  const StoreAddress a = parse_store_address(address);
  switch (a.kind) {
    case StoreAddress::Kind::shm: return store_kinds::shm_exists(a);
    case StoreAddress::Kind::file: return store_kinds::file_exists(a);
    case StoreAddress::Kind::tcp:
    case StoreAddress::Kind::c10d: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace fastrun
