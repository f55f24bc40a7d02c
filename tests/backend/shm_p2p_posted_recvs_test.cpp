// shm point-to-point: recvs posted before their messages, under several tags, each get their own
// message whatever order the messages come in (P2PEngine::match takes the earliest pending recv
// of the message's tag out of its peer's queue: at the front, in the middle, or at the back, and
// a rendezvous message's recv as well as an eager one's). On 2 real processes, round after round
// so that the queue's storage wraps; every byte is checked.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

constexpr std::size_t kWords = 6;              // int32 elements of an eager message
constexpr std::size_t kBigWords = 256 * 1024;  // 1 MiB: past every eager limit
constexpr int kRounds = 40;

std::vector<std::int32_t> message(int id, std::size_t words) {
  std::vector<std::int32_t> m(words);
  for (std::size_t j = 0; j < words; ++j) m[j] = id * 1000 + static_cast<std::int32_t>(j % 1000);
  return m;
}

BufferView view(std::vector<std::int32_t>& v) { return BufferView{v.data(), v.size(), DType::int32, DeviceKind::cpu}; }

// What one round posts, in posting order: a tag, the message owed to it, and its size. Two recvs
// of tag 2: the first posted is owed the first sent.
struct Posted {
  int tag;
  int id;
  std::size_t words;
};
const std::vector<Posted> kPosted{{4, 40, kBigWords}, {1, 10, kWords}, {2, 20, kWords}, {3, 30, kWords}, {2, 21, kWords}};
// The order rank 1 sends them in: the middle of the queue first, its front late.
const std::vector<std::size_t> kSendOrder{3, 2, 0, 1, 4};

}  // namespace

TEST_CASE("shm p2p: recvs waiting under several tags get their own messages in any order of arrival",
          "[shm][p2p][mp]") {
  auto results = test::run_ranks(2, [](int) {
    auto ctx = join({"shm"});
    Group& g = ctx->world();
    for (int round = 0; round < kRounds; ++round) {
      const int base = round * 100;
      if (g.rank() == 1) {
        g.barrier()->wait();  // rank 0 posted every recv of the round
        for (std::size_t i : kSendOrder) {
          auto m = message(base + kPosted[i].id, kPosted[i].words);
          g.send(view(m), 0, {kPosted[i].tag})->wait();
        }
        continue;
      }
      std::vector<std::vector<std::int32_t>> got;
      std::vector<WorkHandle> works;
      for (const Posted& p : kPosted) got.emplace_back(p.words, -1);
      for (std::size_t i = 0; i < kPosted.size(); ++i) works.push_back(g.recv(view(got[i]), 1, {kPosted[i].tag}));
      g.barrier()->wait();
      for (std::size_t i = works.size(); i-- > 0;) works[i]->wait();  // the last posted first
      for (std::size_t i = 0; i < kPosted.size(); ++i)
        if (got[i] != message(base + kPosted[i].id, kPosted[i].words))
          throw std::runtime_error(fmt::format("round {}: recv {} (tag {}) got message {}, not {}", round, i,
                                               kPosted[i].tag, got[i][0] / 1000, base + kPosted[i].id));
    }
  });
  REQUIRE(test::all_ok(results));
}
