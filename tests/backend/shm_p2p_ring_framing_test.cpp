// shm point-to-point: the pair rings' framing (p2p_ring.cpp, mailbox_layout.h). Every message
// starts on a 64-byte line with a stamped header; the receiver finds a message by its stamp
// alone and reads the sender's head only for a payload streamed in parts. Here, on 2 real
// processes, both ways at once: messages of every even length remainder mod 64, enough of them to
// wrap the ring several times (lengths are even: the smallest dtype has 2 bytes), lengths around the ring's size (streamed in parts when every
// message goes through the rings), payloads of all-zero and all-one bytes (what an unwritten
// or a stale stamp could look like), and messages that arrive before their receive. Every byte
// is checked, in order.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/mailbox_layout.h"
#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

// `bytes` (even) at `data` as a buffer: float16 elements, the narrowest dtype; only copied.
BufferView bytes_at(std::uint8_t* data, std::size_t bytes) {
  return BufferView{data, bytes / 2, DType::float16, DeviceKind::cpu};
}

// Byte j of message i sent by `rank`: distinct per message, per sender and per position; some
// messages are all 0x00 or all 0xFF.
std::uint8_t byte_of(int rank, std::size_t i, std::size_t j) {
  if (i % 7 == 3) return 0x00;
  if (i % 7 == 5) return 0xFF;
  return static_cast<std::uint8_t>(i * 131 + j * 7 + static_cast<std::size_t>(rank) * 59 + 1);
}

// Sends messages of `sizes` to the other rank while receiving its messages of the same sizes, in
// one batch (tag `tag`), then checks every byte received.
void exchange(Group& g, const std::vector<std::size_t>& sizes, int tag, std::size_t first_index) {
  const int me = g.rank(), peer = 1 - me;
  std::vector<std::vector<std::uint8_t>> out(sizes.size()), in(sizes.size());
  std::vector<P2POp> ops;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    out[k].resize(sizes[k]);
    in[k].assign(sizes[k], 0x5A);
    for (std::size_t j = 0; j < sizes[k]; ++j) out[k][j] = byte_of(me, first_index + k, j);
    ops.push_back({P2POp::Kind::send, bytes_at(out[k].data(), out[k].size()), peer, tag});
  }
  for (std::size_t k = 0; k < sizes.size(); ++k)
    ops.push_back({P2POp::Kind::recv, bytes_at(in[k].data(), in[k].size()), peer, tag});
  g.batch_send_recv(ops)->wait();
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (std::size_t j = 0; j < sizes[k]; ++j)
      if (in[k][j] != byte_of(peer, first_index + k, j))
        throw std::runtime_error(fmt::format("rank {}: message {} of {} bytes from rank {}: byte {} is {:#04x}, not {:#04x}",
                                             me, first_index + k, sizes[k], peer, j, in[k][j],
                                             byte_of(peer, first_index + k, j)));
}

void check_framing(bool single_copy) {
  auto results = test::run_ranks(2, [single_copy](int) {
    shm::set_single_copy_allowed(single_copy);
    auto ctx = join({"shm"});
    Group& g = ctx->world();
    const std::size_t ring = shm::MailboxLayout::for_ranks(2).ring_bytes;
    std::size_t index = 0;
    // 1. Every even remainder mod 64, small enough to go whole, one batch each way.
    std::vector<std::size_t> small;
    for (std::size_t n = 0; n < 400; n += 2) small.push_back(n);
    exchange(g, small, 1, index);
    index += small.size();
    // 2. Sent before the other rank posts its receives: they wait in the ring or as unexpected.
    std::vector<std::uint8_t> early(78);
    for (std::size_t j = 0; j < early.size(); ++j) early[j] = byte_of(g.rank(), index, j);
    auto sent = g.send(bytes_at(early.data(), early.size()), 1 - g.rank(), {2});
    g.barrier()->wait();
    std::vector<std::uint8_t> got(78);
    g.recv(bytes_at(got.data(), got.size()), 1 - g.rank(), {2})->wait();
    sent->wait();
    for (std::size_t j = 0; j < got.size(); ++j)
      if (got[j] != byte_of(1 - g.rank(), index, j)) throw std::runtime_error("an early message came wrong");
    ++index;
    // 3. Several laps of the ring in batches of mixed lengths.
    for (int round = 0; round < 40; ++round) {
      std::vector<std::size_t> sizes;
      for (std::size_t k = 0; k < 40; ++k) sizes.push_back((index + k) * 37 % 700 & ~std::size_t{1});
      exchange(g, sizes, 3, index);
      index += sizes.size();
    }
    // 4. Around the ring's size: streamed in parts when the rings carry everything.
    for (std::size_t n : {ring - 48, ring - 46, ring - 2, ring, ring + 2, 2 * ring + 6}) {
      exchange(g, {n, 10}, 4, index);
      index += 2;
    }
  });
  REQUIRE(test::all_ok(results));
}

}  // namespace

TEST_CASE("shm p2p: messages of every length arrive whole and in order, through the rings", "[shm][p2p][mp]") {
  SECTION("large messages by single copy where allowed") { check_framing(true); }
  SECTION("every message through the rings") { check_framing(false); }
}
