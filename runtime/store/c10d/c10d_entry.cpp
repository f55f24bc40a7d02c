// The c10d:// kind's factory entry points (kinds.h). fastrun only connects to a c10d store
// (torchrun's agent or a torch program hosts it); hosting one is fastrun's own tcp:// kind.
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/c10d/c10d_client.h"
#include "fastrun/runtime/store/kinds.h"

namespace fastrun::store_kinds {

std::unique_ptr<HostedStore> host_c10d(const StoreAddress& address, const StoreOptions&) {
  throw ConfigError(fmt::format("{}: fastrun connects to a c10d TCPStore that torch hosts (torchrun's agent, "
                                "torch.distributed.TCPStore) but does not host one: use tcp://HOST:PORT to host a "
                                "store",
                                address.to_string()));
}

std::unique_ptr<Store> connect_c10d(const StoreAddress& address, const StoreOptions& options) {
  if (address.port == 0)
    throw ConfigError(fmt::format("{}: a c10d store needs its port; the accepted form is c10d://HOST:PORT with "
                                  "PORT in 1..65535",
                                  address.to_string()));
  c10d_store::ClientOptions co;
  co.host = address.name;
  co.port = address.port;
  co.timeout = options.timeout;
  return std::make_unique<c10d_store::Client>(std::move(co));
}

}  // namespace fastrun::store_kinds
