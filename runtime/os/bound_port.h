#pragma once
// The local port a bound socket got (bind to port 0 picks one): getsockname, IPv4 or IPv6.
#include <cstdint>
#include <string_view>

namespace fastrun::os {

// Throws Error "<what>: getsockname: <errno text>" when the socket's address cannot be read.
std::uint16_t bound_port(int fd, std::string_view what);

}  // namespace fastrun::os
