#include "fastrun/runtime/backend/hier/ring_ops.h"

#include <algorithm>
#include <cstdint>

#include "fastrun/runtime/backend/hier/chain_all_reduce.h"

namespace fastrun::hier {

void ring_broadcast(LeaderRing& ring, BufferView buffer, int root, const Deadline& deadline) {
  constexpr std::uint32_t kTag = 2;
  const int k = ring.index(), n = ring.size();
  const Chunks chunked(buffer.count, buffer.dtype);
  const auto chunks = static_cast<std::uint32_t>(chunked.n);
  const auto part = [&](std::uint32_t c) { return chunked.part(buffer, c); };
  if (k == root) {
    for (std::uint32_t c = 0; c < chunks; ++c) ring.send(kTag, c, part(c).data, part(c).bytes());
  } else {
    const bool passes_on = (k + 1) % n != root;
    for (std::uint32_t c = 0; c < chunks; ++c) ring.expect(kTag, c, part(c).data, part(c).bytes());
    for (std::uint32_t c = 0; c < chunks; ++c) {
      ring.wait_arrived(kTag, c, deadline);
      if (passes_on) ring.send(kTag, c, part(c).data, part(c).bytes());
    }
  }
  ring.flush(deadline);
}

void ring_all_gather(LeaderRing& ring, const std::vector<BufferView>& blocks, const Deadline& deadline) {
  constexpr std::uint32_t kTag = 3;
  const int k = ring.index(), n = ring.size();
  const auto block = [&](int i) -> const BufferView& { return blocks[static_cast<std::size_t>(i)]; };
  // Step s receives block k-1-s from the previous leader; each message's chunk number is the
  // block's index.
  const auto from_at = [&](int s) { return ((k - 1 - s) % n + n) % n; };
  for (int s = 0; s < n - 1; ++s) {
    const int from = from_at(s);
    ring.expect(kTag, static_cast<std::uint32_t>(from), block(from).data, block(from).bytes());
  }
  ring.send(kTag, static_cast<std::uint32_t>(k), block(k).data, block(k).bytes());
  for (int s = 0; s < n - 1; ++s) {
    const int from = from_at(s);
    ring.wait_arrived(kTag, static_cast<std::uint32_t>(from), deadline);
    if (s < n - 2) ring.send(kTag, static_cast<std::uint32_t>(from), block(from).data, block(from).bytes());
  }
  ring.flush(deadline);
}

}  // namespace fastrun::hier
