// shm point-to-point: messages that arrive before their receive (p2p_engine_state.h, Peer's
// `unexpected` and `spare`). On 2 real processes, rank 1 sends rounds of messages under two tags
// before rank 0 receives any; rank 0 then receives every tag-2 message first, which moves each
// tag-1 message ahead of it out of the ring into a kept node, and only then the tag-1 messages.
// The kept nodes and their buffers are reused from round to round with other lengths (longer,
// shorter, empty, and past the size whose buffer is freed rather than kept), and rendezvous
// messages (whose payload stays with the sender) mix with eager ones. Every byte is checked.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

BufferView bytes_at(std::uint8_t* data, std::size_t bytes) {
  return BufferView{data, bytes / 2, DType::float16, DeviceKind::cpu};  // bytes is even
}

std::uint8_t byte_of(int round, std::size_t i, std::size_t j) {
  return static_cast<std::uint8_t>(static_cast<std::size_t>(round) * 71 + i * 131 + j * 7 + 1);
}

// Round r's lengths: a rotation of one list, so that a kept buffer meets a longer, a shorter and
// an empty message in turn; 100000 bytes is past what a kept node holds on to.
std::vector<std::size_t> lengths(int round) {
  const std::vector<std::size_t> base{8, 2000, 0, 100000, 64, 30000, 6, 1024, 40000, 2};
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < base.size(); ++k)
    out.push_back(base[(k + static_cast<std::size_t>(round) * 3) % base.size()]);
  return out;
}

int tag_of(std::size_t i) { return i % 2 == 0 ? 1 : 2; }

void check_unexpected(bool single_copy) {
  auto results = test::run_ranks(2, [single_copy](int) {
    shm::set_single_copy_allowed(single_copy);
    auto ctx = join({"shm"});
    Group& g = ctx->world();
    for (int round = 0; round < 6; ++round) {
      const std::vector<std::size_t> sizes = lengths(round);
      std::vector<std::vector<std::uint8_t>> bufs(sizes.size());
      if (g.rank() == 1) {
        std::vector<WorkHandle> sends;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          bufs[i].resize(sizes[i]);
          for (std::size_t j = 0; j < sizes[i]; ++j) bufs[i][j] = byte_of(round, i, j);
          sends.push_back(g.send(bytes_at(bufs[i].data(), sizes[i]), 0, {tag_of(i)}));
        }
        g.barrier()->wait();  // rank 0 receives nothing before this
        for (auto& w : sends) w->wait();
      } else {
        g.barrier()->wait();
        for (int tag : {2, 1})
          for (std::size_t i = 0; i < sizes.size(); ++i) {
            if (tag_of(i) != tag) continue;
            bufs[i].assign(sizes[i], 0x5A);
            g.recv(bytes_at(bufs[i].data(), sizes[i]), 1, {tag})->wait();
            for (std::size_t j = 0; j < sizes[i]; ++j)
              if (bufs[i][j] != byte_of(round, i, j))
                throw std::runtime_error(fmt::format("round {}: message {} (tag {}, {} bytes): byte {} is {:#04x}, not "
                                                     "{:#04x}",
                                                     round, i, tag, sizes[i], j, bufs[i][j], byte_of(round, i, j)));
          }
      }
    }
  });
  REQUIRE(test::all_ok(results));
}

}  // namespace

TEST_CASE("shm p2p: messages received out of order come whole, round after round", "[shm][p2p][mp]") {
  SECTION("large messages by single copy where allowed") { check_unexpected(true); }
  SECTION("every message through the rings") { check_unexpected(false); }
}
