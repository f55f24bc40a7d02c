#include "fastrun/runtime/objects/object_collectives.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/process_group/rank_name.h"
#include "fastrun/runtime/process_group/shape_check.h"

namespace fastrun::objects_detail {
namespace {

// Payloads travel as int64 elements (every backend moves int64); bytes are padded to 8.
std::size_t words_for(std::size_t bytes) { return (bytes + 7) / 8; }

void wait(const WorkHandle& w) { w->wait(); }

}  // namespace

CallGroup call_group(Group* group) {
  CallGroup g;
  g.group = group;
  if (g.group == nullptr) {
    g.ctx = current_context();
    if (g.ctx) g.group = &g.ctx->world();
  }
  return g;
}

void check_root(const char* op, int root, const CallGroup& g) {
  if (!root_ok(root, g.size())) fastrun::check_root(op, root, g.size());
}

Group& p2p_group(CallGroup& g, const char* op, int peer, int tag) {
  if (g.group == nullptr)
    throw ConfigError(fmt::format("{}: peer {} in a world of one (no group given and no current context: join() "
                                  "first, or pass the group)",
                                  op, peer));
  if (!peer_ok(peer, tag, g.rank(), g.size())) check_peer(op, peer, tag, g.rank(), g.size());
  return *g.group;
}

std::vector<std::uint8_t> broadcast_bytes(Group& group, std::vector<std::uint8_t> bytes, int root) {
  Group& g = group.cpu_group();
  std::int64_t size = g.rank() == root ? static_cast<std::int64_t>(bytes.size()) : 0;
  wait(g.broadcast(view_of(&size, 1), {root}));
  std::vector<std::int64_t> words(words_for(static_cast<std::size_t>(size)));
  if (g.rank() == root && !bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
  wait(g.broadcast(view_of(words.data(), words.size()), {root}));
  if (g.rank() != root) {
    bytes.resize(static_cast<std::size_t>(size));
    if (size > 0) std::memcpy(bytes.data(), words.data(), bytes.size());
  }
  return bytes;
}

std::vector<std::vector<std::uint8_t>> all_gather_bytes(Group& group, const std::vector<std::uint8_t>& bytes) {
  Group& g = group.cpu_group();
  const auto n = static_cast<std::size_t>(g.size());
  std::int64_t mine = static_cast<std::int64_t>(bytes.size());
  std::vector<std::int64_t> sizes(n);
  wait(g.all_gather(view_of(&mine, 1), view_of(sizes.data(), n)));
  const std::size_t slot = words_for(static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end())));
  // A separate padded input (not a view into the output): no backend has to support aliasing.
  std::vector<std::int64_t> mine_padded(slot, 0);
  if (!bytes.empty()) std::memcpy(mine_padded.data(), bytes.data(), bytes.size());
  std::vector<std::int64_t> all(slot * n);
  wait(g.all_gather(view_of(mine_padded.data(), slot), view_of(all.data(), all.size())));
  std::vector<std::vector<std::uint8_t>> out(n);
  for (std::size_t r = 0; r < n; ++r) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(all.data() + slot * r);
    out[r].assign(p, p + sizes[r]);
  }
  return out;
}

std::vector<std::uint8_t> scatter_bytes(Group& group, const std::vector<std::vector<std::uint8_t>>& per_rank,
                                        int root) {
  Group& g = group.cpu_group();
  const auto n = static_cast<std::size_t>(g.size());
  const bool is_root = g.rank() == root;
  std::int64_t slot = 0;  // words per rank: the largest payload's
  std::vector<std::int64_t> sizes(is_root ? n : 0);
  if (is_root)
    for (std::size_t r = 0; r < n; ++r) {
      sizes[r] = static_cast<std::int64_t>(per_rank[r].size());
      slot = std::max(slot, static_cast<std::int64_t>(words_for(per_rank[r].size())));
    }
  wait(g.broadcast(view_of(&slot, 1), {root}));
  std::int64_t size = 0;
  wait(g.scatter(view_of(sizes.data(), sizes.size()), view_of(&size, 1), {root}));
  const auto words = static_cast<std::size_t>(slot);
  std::vector<std::int64_t> all(is_root ? words * n : 0), mine(words);
  if (is_root)
    for (std::size_t r = 0; r < n; ++r)
      if (!per_rank[r].empty()) std::memcpy(all.data() + r * words, per_rank[r].data(), per_rank[r].size());
  wait(g.scatter(view_of(all.data(), all.size()), view_of(mine.data(), words), {root}));
  const auto* p = reinterpret_cast<const std::uint8_t*>(mine.data());
  return std::vector<std::uint8_t>(p, p + size);
}

void send_bytes(Group& group, const std::vector<std::uint8_t>& bytes, int peer, int tag) {
  Group& g = group.cpu_group();
  std::int64_t size = static_cast<std::int64_t>(bytes.size());
  std::vector<std::int64_t> words(words_for(bytes.size()));
  if (!bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
  auto a = g.send(view_of(&size, 1), peer, {tag});
  auto b = g.send(view_of(words.data(), words.size()), peer, {tag});
  wait(a);
  wait(b);
}

std::vector<std::uint8_t> recv_bytes(Group& group, int peer, int tag) {
  Group& g = group.cpu_group();
  std::int64_t size = 0;
  wait(g.recv(view_of(&size, 1), peer, {tag}));
  std::vector<std::int64_t> words(words_for(static_cast<std::size_t>(size)));
  wait(g.recv(view_of(words.data(), words.size()), peer, {tag}));
  const auto* p = reinterpret_cast<const std::uint8_t*>(words.data());
  return std::vector<std::uint8_t>(p, p + size);
}

void throw_no_local_result(const char* op) {
  throw ConfigError(fmt::format("{}: under FASTRUN_NO_SYNC=2 every collective is local, and this rank has no local "
                                "value to return (set FASTRUN_NO_SYNC to 0 or 1 around this call)",
                                op));
}

void throw_decode_error(Group& group, const char* op, int sender, std::size_t bytes, const std::exception& e) {
  throw SerializationError(fmt::format("{}: cannot decode the {} bytes sent by {} to rank {}: {}", op, bytes,
                                       rank_name(sender, group.global_ranks()), group.rank(), e.what()));
}

}  // namespace fastrun::objects_detail
