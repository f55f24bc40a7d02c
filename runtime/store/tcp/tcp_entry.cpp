// Placeholder until the TCP store lands: the tcp:// kind reports itself as not built.
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/kinds.h"

namespace fastrun::store_kinds {

std::unique_ptr<HostedStore> host_tcp(const StoreAddress& address, const StoreOptions&) {
  throw ConfigError(fmt::format("{}: the tcp store is not built yet", address.to_string()));
}
std::unique_ptr<Store> connect_tcp(const StoreAddress& address, const StoreOptions&) {
  throw ConfigError(fmt::format("{}: the tcp store is not built yet", address.to_string()));
}

}  // namespace fastrun::store_kinds
