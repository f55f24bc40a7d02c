#pragma once
// One factory for every store kind, taking an address:
//   shm://NAME         shared memory on one node (the default for one node)
//   file://PATH        a file on a filesystem every rank shares (NFS across nodes)
//   tcp://HOST:PORT    Boost.Asio server in the launcher / rank 0, clients everywhere
//   c10d://HOST:PORT   a PyTorch c10d TCPStore someone else hosts (torchrun's agent); connect only
// Bad addresses are ConfigErrors that say which forms are accepted.
//
// Ownership: host_store() creates the store (segment, file, listening server) and the returned
// HostedStore removes it when destroyed, also after an exception. connect_store() opens a client
// handle on a store someone else hosts; destroying it removes nothing.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fastrun/runtime/store/store.h"

namespace fastrun {

struct StoreAddress {
  enum class Kind { shm, file, tcp, c10d };
  Kind kind;
  std::string name;       // shm: segment name; file: path; tcp, c10d: host
  std::uint16_t port = 0; // tcp, c10d; 0 = pick a free port (tcp host_store only)
  std::string to_string() const;
};

// Throws ConfigError for "", "shm://", "tcp://host", "tcp://host:99999", "ftp://x", ...
StoreAddress parse_store_address(std::string_view address);

struct StoreOptions {
  Duration timeout{};           // default for blocking calls and for connecting; zero = FASTRUN_TIMEOUT
  std::string token;            // secret every TCP client must present; "" = FASTRUN_STORE_TOKEN
  std::size_t shm_bytes = 0;    // shm segment size; 0 = FASTRUN_SHM_STORE_BYTES
  std::size_t shm_min_keys = 0; // shm host: keys to make room for (the launcher: from the world size)
};

class HostedStore {
 public:
  virtual ~HostedStore() = default;
  // The address to publish (tcp: with the port actually bound).
  virtual std::string address() const = 0;
  // The secret clients must present ("" where the kind needs none).
  virtual std::string token() const = 0;
  // A client handle for the host's own use.
  virtual std::unique_ptr<Store> connect() = 0;
};

std::unique_ptr<HostedStore> host_store(std::string_view address, const StoreOptions& options = {});
std::unique_ptr<Store> connect_store(std::string_view address, const StoreOptions& options = {});

// Whether a store that needs no server exists now, without waiting: shm:// its segment, file://
// its directory's owner marker. nullopt for tcp:// and c10d:// (only connecting tells). For a
// caller that knows nothing will host the store later (join() under torchrun, srun, mpirun),
// where connect_store would wait the whole store timeout for it.
std::optional<bool> store_exists(std::string_view address);

}  // namespace fastrun
