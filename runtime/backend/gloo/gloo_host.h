#pragma once
// The address gloo's TCP transport binds and advertises to its peers (FASTRUN_GLOO_HOST, the
// analogue of GLOO_SOCKET_IFNAME). Checked here, before gloo sees it: gloo's own failure on a
// bad value is an opaque enforce message (or worse), and a wildcard or foreign address would be
// advertised to peers that cannot use it.
#include <string>

namespace fastrun {

// `value` is an interface name ("eth0": its first IPv4 address, else its first IPv6 one that is
// not link-local), an address of this machine (any 127.x.y.z counts), or a host name that
// resolves to one. Returns the numeric address. ConfigError naming FASTRUN_GLOO_HOST, the value,
// why, and this machine's interfaces and addresses otherwise (empty, wildcard, not local, ...).
std::string resolve_gloo_host(const std::string& value);

// The address a group binds: `configured` (GroupSpec::gloo_host) when given, else
// FASTRUN_GLOO_HOST (or its default), resolved as above. Gloo's devices and the hier backend's
// rings bind the same one.
std::string resolve_group_gloo_host(const std::string& configured);

}  // namespace fastrun
