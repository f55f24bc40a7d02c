// Large shm messages copied by both sides (p2p_engine.h, "cooperative rendezvous"): the receiver
// claims chunks from the front, the sender from the back. Real processes (test::run_ranks);
// every byte checked, at sizes that leave a short last chunk, with several large messages on
// one pair at once (one cooperative, the others read by the receiver alone), both directions
// at once, a ring of 3 ranks, a recv posted late, a sender whose writes fail (it hands its
// chunks back), and a sender that never progresses while the receiver works (the receiver then
// copies every chunk itself).
#include <catch2/catch.hpp>

#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p_engine.h"
#include "fastrun/runtime/context.h"
#include "fastrun/runtime/error.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

test::RankRunOptions within(std::chrono::seconds limit) {
  test::RankRunOptions o;
  o.timeout = limit;
  return o;
}

// The word at `i` of message `m` from `from`: differs between neighbouring words, messages and
// senders, so a chunk copied to the wrong place, twice from the wrong source or not at all shows.
std::int32_t word(int from, std::size_t m, std::size_t i) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>((i + 1) * 2654435761u) ^
                                   static_cast<std::uint32_t>(static_cast<std::size_t>(from) * 7919 + m * 104729));
}

std::vector<std::int32_t> message(int from, std::size_t m, std::size_t words) {
  std::vector<std::int32_t> v(words);
  for (std::size_t i = 0; i < words; ++i) v[i] = word(from, m, i);
  return v;
}

void expect_message(const std::vector<std::int32_t>& got, int from, std::size_t m, const std::string& what) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != word(from, m, i))
      throw std::runtime_error(fmt::format("{}: word {} of {} is {:#x}, expected {:#x}", what, i, got.size(), got[i],
                                           word(from, m, i)));
}

// Words per message: below the cooperative size (the receiver alone), just above it (29 chunks
// of 36 KiB, the last one short), and larger ones whose last chunk is short (chunks of 164 KiB
// and 1 MiB).
constexpr std::size_t kWords[] = {(32u << 10) / 4, (1u << 20) / 4 - 1, (1u << 20) / 4 + 3, (5u << 20) / 4 + 1,
                                  (33u << 20) / 4 + 2};

void ping_pong(Group& g) {
  const int me = g.rank(), peer = 1 - me;
  for (std::size_t m = 0; m < std::size(kWords); ++m) {
    const std::size_t n = kWords[m];
    auto out = message(me, m, n);
    std::vector<std::int32_t> in(n, 0);
    if (me == 0) {
      g.send(view_of(out.data(), n), peer, {1})->wait();
      g.recv(view_of(in.data(), n), peer, {1})->wait();
    } else {
      g.recv(view_of(in.data(), n), peer, {1})->wait();
      g.send(view_of(out.data(), n), peer, {1})->wait();
    }
    expect_message(in, peer, m, fmt::format("ping-pong of {} bytes", n * 4));
  }
}

// Three large messages each way on one pair, all posted at once (tags 0..2 received in the
// other order on rank 1), then a late recv: the message is waiting as a rendezvous when it comes.
void many_at_once(Group& g) {
  const int me = g.rank(), peer = 1 - me;
  const std::size_t n = (3u << 20) / 4 + 5;
  std::vector<std::vector<std::int32_t>> out, in;
  std::vector<P2POp> ops;
  for (std::size_t m = 0; m < 3; ++m) {
    out.push_back(message(me, m, n + m));
    in.emplace_back(n + m, 0);
  }
  for (std::size_t m = 0; m < 3; ++m) {
    const std::size_t r = me == 0 ? m : 2 - m;
    ops.push_back({P2POp::Kind::recv, view_of(in[r].data(), n + r), peer, static_cast<int>(r)});
    ops.push_back({P2POp::Kind::send, view_of(out[m].data(), n + m), peer, static_cast<int>(m)});
  }
  g.batch_send_recv(ops)->wait();
  for (std::size_t m = 0; m < 3; ++m) expect_message(in[m], peer, m, fmt::format("message {} of 3 at once", m));

  auto late_out = message(me, 7, n);
  std::vector<std::int32_t> late_in(n, 0);
  auto sent = g.send(view_of(late_out.data(), n), peer, {9});
  if (me == 1) ::usleep(20'000);
  g.recv(view_of(late_in.data(), n), peer, {9})->wait();
  sent->wait();
  expect_message(late_in, peer, 7, "a recv posted after the message arrived");
}

// Every rank sends to the next and receives from the previous: each is a cooperative receiver
// and a helping sender at once.
void ring(Group& g) {
  const int n = g.size(), me = g.rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
  const std::size_t words = (7u << 20) / 4 + 3;
  auto out = message(me, 11, words);
  std::vector<std::int32_t> in(words, 0);
  g.batch_send_recv({{P2POp::Kind::send, view_of(out.data(), words), next, 0},
                     {P2POp::Kind::recv, view_of(in.data(), words), prev, 0}})
      ->wait();
  expect_message(in, prev, 11, "ring");
}

bool wait_readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

}  // namespace

TEST_CASE("shm p2p: large messages copied by both sides, every byte checked", "[shm][p2p][mp]") {
  auto results = test::run_ranks(
      2,
      [](int) {
        auto ctx = join({"shm"});
        ping_pong(ctx->world());
        many_at_once(ctx->world());
        ring(ctx->world());
        ctx->world().barrier()->wait();
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("shm p2p: cooperative copies on a ring of 3 ranks", "[shm][p2p][mp]") {
  auto results = test::run_ranks(
      3,
      [](int) {
        auto ctx = join({"shm"});
        for (int round = 0; round < 3; ++round) ring(ctx->world());
        ctx->world().barrier()->wait();
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("shm p2p: a sender whose writes are refused hands its chunks back", "[shm][p2p][mp]") {
  auto results = test::run_ranks(
      2,
      [](int) {
        shm::set_single_copy_writes_fail(true);  // as a seccomp filter that allows reads only
        auto ctx = join({"shm"});
        ping_pong(ctx->world());
        many_at_once(ctx->world());
        ctx->world().barrier()->wait();
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("shm p2p: a large recv completes while its sender does not progress", "[shm][p2p][mp]") {
  // Rank 0 posts the send and then blocks on a pipe that rank 1 writes only once its recv is
  // complete: the receiver must not need the sender's help (it would hang until the timeout).
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  auto results = test::run_ranks(
      2,
      [&](int rank) {
        auto ctx = join({"shm"});
        auto& g = ctx->world();
        const std::size_t n = (9u << 20) / 4 + 1;
        if (rank == 0) {
          auto out = message(0, 3, n);
          auto sent = g.send(view_of(out.data(), n), 1, {0});
          if (!wait_readable(pipe_fds[0], 60'000)) throw std::runtime_error("rank 1 never finished its recv");
          sent->wait();
        } else {
          std::vector<std::int32_t> in(n, 0);
          g.recv(view_of(in.data(), n), 0, {0})->wait();
          expect_message(in, 0, 3, "recv from a sender that is not progressing");
          RANK_REQUIRE(::write(pipe_fds[1], "x", 1) == 1);
        }
        g.barrier()->wait();
      },
      within(std::chrono::seconds(90)));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  REQUIRE(test::all_ok(results));
}
