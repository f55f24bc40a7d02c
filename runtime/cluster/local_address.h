#pragma once
// The address of this machine that the kernel would use to reach a host: the sensible default
// for the address a multi-node rank's gloo binds (the interface that routes to node 0 or to the
// rank hosting the store), for launchers and for ranks started by srun or mpirun alike.
#include <cstdint>
#include <string>

namespace fastrun::cluster {

// Numeric address (IPv4 or IPv6). Connects a UDP socket (sends nothing). Throws Error naming the
// host when it does not resolve or no route leads there.
std::string local_address_towards(const std::string& host, std::uint16_t port);

}  // namespace fastrun::cluster
