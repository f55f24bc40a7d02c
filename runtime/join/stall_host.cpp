#include "fastrun/runtime/join/stall_host.h"

#include <optional>

#include <fmt/format.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/stall_board.h"
#include "fastrun/runtime/process_group/stall_scanner.h"

namespace fastrun::join_detail {
namespace {

constexpr const char* kNone = "none";  // local rank 0 has no board to offer

// Local rank 0's: the board, then its scanner (destroyed first: it reads the board).
struct Host {
  std::shared_ptr<stall::HostedBoard> board;
  std::optional<stall::StallScanner> scanner;
};

}  // namespace

std::shared_ptr<void> host_stall_report(Store& store, const StallHostPlace& place) {
  if (place.source == "fastrun" || place.source == "none" || place.world_size <= 1) return nullptr;
  const auto threshold = env::get_int(env::kStallReport);
  if (threshold <= 0) return nullptr;
  const std::string key = fmt::format("fastrun/stall_board/{}/{}", place.generation, place.node_rank);
  if (place.local_rank == 0) {
    auto host = std::make_shared<Host>();
    try {
      host->board = stall::HostedBoard::create(place.local_world_size);
    } catch (const std::exception& e) {
      log::debug("no stall report on this node: {}", e.what());
      store.set(key, to_bytes(kNone));
      return nullptr;
    }
    store.set(key, to_bytes(host->board->address()));
    const bool many_nodes = place.local_world_size < place.world_size;
    host->scanner.emplace(host->board->data(), host->board->size(), static_cast<int>(threshold), 2,
                          many_nodes ? std::optional<int>(place.node_rank) : std::nullopt);
    return host;
  }
  try {
    const std::string address = to_string(store.get(key, place.timeout));
    if (address == kNone) return nullptr;
    return stall::HostedBoard::open(address, place.local_rank);
  } catch (const std::exception& e) {
    log::debug("this rank is not on its node's stall report: {}", e.what());
    return nullptr;
  }
}

}  // namespace fastrun::join_detail
