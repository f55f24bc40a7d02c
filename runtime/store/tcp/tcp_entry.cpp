// The tcp:// kind's factory entry points (kinds.h): host_tcp starts a Server and owns it;
// connect_tcp opens a Client. The token: StoreOptions::token, else FASTRUN_STORE_TOKEN, else
// (host only) 32 random bytes from /dev/urandom, hex-encoded.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/kinds.h"
#include "fastrun/runtime/store/tcp/client.h"
#include "fastrun/runtime/store/tcp/hosted.h"
#include "fastrun/runtime/store/tcp/server.h"

namespace fastrun::tcp_store {

std::string random_token() {
  const os::UniqueFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("tcp store: open /dev/urandom for the job token", errno);
  unsigned char raw[32];
  const ssize_t got = os::read_full(fd.get(), raw, sizeof raw);
  if (got != static_cast<ssize_t>(sizeof raw))
    throw_errno("tcp store: read /dev/urandom for the job token", got < 0 ? errno : EIO);
  std::string hex;
  hex.reserve(2 * sizeof raw);
  for (unsigned char b : raw) hex += fmt::format("{:02x}", b);
  return hex;
}

namespace {

std::string token_from(const StoreOptions& options) {
  if (!options.token.empty()) return options.token;
  return env::find_string(env::kStoreToken).value_or("");
}

// "[::1]" -> "::1": an IPv6 literal may reach us with the brackets of its URL form.
std::string bare_host(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

HostedTcpStore::HostedTcpStore(const std::string& host, std::uint16_t port, const StoreOptions& options,
                               const tcp_wire::Limits& limits)
    : options_(options) {
  token_ = token_from(options);
  if (token_.empty()) token_ = random_token();
  ServerOptions so;
  so.host = host.empty() ? "127.0.0.1" : host;
  so.port = port;
  so.token = token_;
  so.limits = limits;
  server_ = std::make_unique<Server>(std::move(so));
  // Publish a host clients can reach: a wildcard bind is reachable locally as loopback.
  connect_host_ = (host == "0.0.0.0" || host == "::" || host.empty()) ? "127.0.0.1" : host;
  publish_host_ = host.empty() ? "127.0.0.1" : host;
}

HostedTcpStore::~HostedTcpStore() = default;

std::string HostedTcpStore::address() const {
  if (publish_host_.find(':') != std::string::npos) return fmt::format("tcp://[{}]:{}", publish_host_, port());
  return fmt::format("tcp://{}:{}", publish_host_, port());
}

std::unique_ptr<Store> HostedTcpStore::connect() {
  ClientOptions co;
  co.host = connect_host_;
  co.port = port();
  co.token = token_;
  co.timeout = options_.timeout;
  return std::make_unique<Client>(std::move(co));
}

std::uint16_t HostedTcpStore::port() const { return server_->port(); }
ServerStats HostedTcpStore::stats() const { return server_->stats(); }

}  // namespace fastrun::tcp_store

namespace fastrun::store_kinds {

std::unique_ptr<HostedStore> host_tcp(const StoreAddress& address, const StoreOptions& options) {
  return std::make_unique<tcp_store::HostedTcpStore>(tcp_store::bare_host(address.name), address.port, options);
}

std::unique_ptr<Store> connect_tcp(const StoreAddress& address, const StoreOptions& options) {
  if (address.port == 0)
    throw ConfigError(fmt::format("tcp://{}:0: a client needs the port the store host published; the accepted form "
                                  "is tcp://HOST:PORT with PORT in 1..65535",
                                  address.name));
  tcp_store::ClientOptions co;
  co.host = tcp_store::bare_host(address.name);
  co.port = address.port;
  co.token = tcp_store::token_from(options);
  co.timeout = options.timeout;
  return std::make_unique<tcp_store::Client>(std::move(co));
}

}  // namespace fastrun::store_kinds
