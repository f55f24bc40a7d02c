#pragma once
// A TCP port that was free a moment ago on one of this machine's addresses: bind port 0, read
// the port back, close. For MASTER_PORT, which the ranks' own c10d-style rendezvous binds later;
// something else may take it in between (the same race torchrun accepts).
#include <string>

namespace fastrun::launcher {

// `host` is a numeric IPv4/IPv6 address of this machine. Throws Error naming it when the bind fails.
int pick_free_port(const std::string& host);

}  // namespace fastrun::launcher
