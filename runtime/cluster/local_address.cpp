#include "fastrun/runtime/cluster/local_address.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::cluster {

std::string local_address_towards(const std::string& host, std::uint16_t port) {
  namespace asio = boost::asio;
  using udp = asio::ip::udp;
  asio::io_context io;
  boost::system::error_code ec;
  const auto found = udp::resolver(io).resolve(host, std::to_string(port == 0 ? 9 : port),
                                               udp::resolver::numeric_service, ec);
  if (ec || found.empty())
    throw Error(fmt::format("'{}' does not resolve ({}); give the master as an address every node can reach", host,
                            ec ? ec.message() : "no address"));
  const udp::endpoint target = found.begin()->endpoint();
  // Close-on-exec from birth (asio's own open() is not): a rank's children must not inherit it.
  os::UniqueFd fd(::socket(target.protocol().family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("local address: socket", errno);
  udp::socket socket(io);
  if (socket.assign(target.protocol(), fd.get(), ec); ec) throw Error(fmt::format("local address: {}", ec.message()));
  fd.release();  // the asio socket owns it now
  if (socket.connect(target, ec); ec)
    throw Error(fmt::format("finding the local address that reaches {}: {}", host, ec.message()));
  const udp::endpoint local = socket.local_endpoint(ec);
  if (ec) throw Error(fmt::format("local address towards {}: {}", host, ec.message()));
  return local.address().to_string();
}

}  // namespace fastrun::cluster
