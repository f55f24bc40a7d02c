// Large shm messages copied by both sides (p2p_engine.h, "cooperative rendezvous"): the receiver
// claims chunks from the front, the sender from the back. Real processes (test::run_ranks);
// every byte checked, at sizes that leave a short last chunk, with several large messages on
// one pair at once (one cooperative, the others read by the receiver alone), both directions
// at once, a ring of 3 ranks, a recv posted late, a sender whose writes fail (it hands its
// chunks back), a sender that never progresses while the receiver works (the receiver then
// copies every chunk itself), and where the line lies: from 128 KiB, but below 1 MiB not between
// two ranks reading each other's messages at once (an all-to-all in step).
// Every case checks that the cooperative copy ran (shm::copy_counts()): where cross-process
// reads are refused every message goes through the rings and the checks of the bytes would pass
// without it. Where it cannot run, each case skips at once and says why.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/children.h"
#include "test_support/rank_runner.h"
#include "test_support/skip.h"

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

// One round of a 2-rank ping-pong: message `m` of `n` words there and back, checked.
void ping_pong_once(Group& g, std::size_t m, std::size_t n) {
  const int me = g.rank(), peer = 1 - me;
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

void ping_pong(Group& g) {
  for (std::size_t m = 0; m < std::size(kWords); ++m) ping_pong_once(g, m, kWords[m]);
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

// Why the cooperative copy cannot run here ("" when it can). It needs a rank to read and write
// another's memory (process_vm_readv / process_vm_writev), which ptrace rules (Yama), seccomp or
// a container may refuse; tried as the ranks do it: between two sibling processes, the target
// having let any process trace it (as the engine's set-up does).
std::string cross_process_copies_refused() {
  static std::uint64_t word = 0x5eed'0000'0000'5eedull;
  int ready[2], done[2];
  if (::pipe(ready) != 0 || ::pipe(done) != 0) throw std::runtime_error("pipe failed");
  test::Children kids(true);
  const pid_t target = kids.spawn([&] {
    ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    ::close(done[1]);  // its own copy: the read below ends when the parent closes the last one
    char c = 'x';
    if (::write(ready[1], &c, 1) != 1 || ::read(done[0], &c, 1) < 0) return 1;
    return 0;
  });
  char c = 0;
  const bool up = ::read(ready[0], &c, 1) == 1;
  if (up)
    kids.spawn([&] {
      std::uint64_t got = 0;
      iovec mine{&got, sizeof got}, theirs{&word, sizeof word};
      if (::process_vm_readv(target, &mine, 1, &theirs, 1, 0) != sizeof got || got != word)
        throw std::runtime_error(fmt::format("process_vm_readv: {}", std::strerror(errno)));
      if (::process_vm_writev(target, &mine, 1, &theirs, 1, 0) != sizeof got)
        throw std::runtime_error(fmt::format("process_vm_writev: {}", std::strerror(errno)));
      return 0;
    });
  for (int fd : {ready[0], ready[1], done[1], done[0]}) ::close(fd);  // the target reads EOF: done
  const auto status = kids.wait_all(std::chrono::seconds(10));
  // A probe that breaks is the test's failure, not a reason to skip.
  if (!up || status.size() != 2 || !status[0].ok())
    throw std::runtime_error("the probe of cross-process copies failed: its target process did not start or exit");
  if (status[1].ok()) return "";
  return fmt::format("a process cannot read and write a sibling's memory here ({}): the shm engine sends every "
                     "message through the rings, and the cooperative copy cannot run",
                     status[1].message.empty() ? "the probe failed" : status[1].message);
}

void skip_unless_cooperative_copies_run() {
  if (const std::string why = cross_process_copies_refused(); !why.empty()) test::skip_case(why);
}

// Throws unless this rank received at least `messages` messages by a cooperative copy and
// copied chunks of them as the receiver (else the cases above tested only the rings).
void expect_cooperative_receives(std::uint64_t messages) {
  const auto n = shm::copy_counts();
  if (n.cooperative < messages || n.chunks_received == 0)
    throw std::runtime_error(fmt::format("the cooperative copy did not run: {} cooperative receives (expected {} or "
                                         "more), {} chunks copied as the receiver, {} single-copy receives",
                                         n.cooperative, messages, n.chunks_received, n.single_copy));
}

bool wait_readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

}  // namespace

TEST_CASE("shm p2p: large messages copied by both sides, every byte checked", "[shm][p2p][mp]") {
  skip_unless_cooperative_copies_run();
  auto results = test::run_ranks(
      2,
      [](int) {
        auto ctx = join({"shm"});
        ping_pong(ctx->world());
        expect_cooperative_receives(3);  // the ping-pong's three messages of 1 MiB or more
        many_at_once(ctx->world());
        ring(ctx->world());
        expect_cooperative_receives(6);  // one at a time per pair: one of the three at once, the late one, the ring
        ctx->world().barrier()->wait();
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("shm p2p: cooperative copies on a ring of 3 ranks", "[shm][p2p][mp]") {
  skip_unless_cooperative_copies_run();
  auto results = test::run_ranks(
      3,
      [](int) {
        auto ctx = join({"shm"});
        for (int round = 0; round < 3; ++round) ring(ctx->world());
        expect_cooperative_receives(3);  // one per round: one large message from one peer
        ctx->world().barrier()->wait();
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("shm p2p: a sender whose writes are refused hands its chunks back", "[shm][p2p][mp]") {
  skip_unless_cooperative_copies_run();
  auto results = test::run_ranks(
      2,
      [](int) {
        shm::set_single_copy_writes_fail(true);  // as a seccomp filter that allows reads only
        auto ctx = join({"shm"});
        ping_pong(ctx->world());
        many_at_once(ctx->world());
        expect_cooperative_receives(3);
        // Whatever a sender claimed, it handed back: the receivers copied every chunk.
        if (const auto n = shm::copy_counts(); n.chunks_sent != 0)
          throw std::runtime_error(fmt::format("a sender whose writes fail wrote {} chunks", n.chunks_sent));
        ctx->world().barrier()->wait();
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}

TEST_CASE("shm p2p: a large recv completes while its sender does not progress", "[shm][p2p][mp]") {
  // Rank 0 posts the send and then blocks on a pipe that rank 1 writes only once its recv is
  // complete: the receiver must not need the sender's help (it would hang until the timeout).
  skip_unless_cooperative_copies_run();
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
          expect_cooperative_receives(1);
          RANK_REQUIRE(::write(pipe_fds[1], "x", 1) == 1);
        }
        g.barrier()->wait();
      },
      within(std::chrono::seconds(90)));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  REQUIRE(test::all_ok(results));
}

TEST_CASE("shm p2p: from 128 KiB a message is copied by both sides, but not below 1 MiB between ranks reading "
          "each other's at once",
          "[shm][p2p][mp]") {
  skip_unless_cooperative_copies_run();
  auto results = test::run_ranks(
      2,
      [](int) {
        auto ctx = join({"shm"});
        auto& g = ctx->world();
        const int me = g.rank(), peer = 1 - me;
        // A ping-pong of 256 KiB: the sender only waits for its ack, so it helps.
        const auto before = shm::copy_counts();
        for (std::size_t m = 0; m < 5; ++m) ping_pong_once(g, m, (256u << 10) / 4 + 1);
        // Most are; under ASan on a busy machine one of five was once read alone (why is not known:
        // a heuristic's miss, not a wrong byte). Below the line (1 MiB until 2026-12-06) none is.
        if (const auto c = shm::copy_counts().cooperative - before.cooperative; c == 0)
          throw std::runtime_error("none of 5 ping-pong receives of 256 KiB was cooperative");
        // All-to-alls of 256 KiB blocks: each rank reads its peer's block while the peer reads its
        // own, so most are read alone (one whose own block was read already may still ask for help).
        const auto mid = shm::copy_counts();
        const std::size_t block = (256u << 10) / 4;
        for (std::size_t m = 0; m < 50; ++m) {
          std::vector<std::int32_t> in(2 * block), out(2 * block, 0);
          for (std::size_t i = 0; i < block; ++i) in[static_cast<std::size_t>(peer) * block + i] = word(me, m, i);
          g.all_to_all(view_of(in.data(), in.size()), view_of(out.data(), out.size()))->wait();
          expect_message({out.begin() + static_cast<std::ptrdiff_t>(peer) * static_cast<std::ptrdiff_t>(block),
                          out.begin() + static_cast<std::ptrdiff_t>(peer + 1) * static_cast<std::ptrdiff_t>(block)},
                         peer, m, "all-to-all block of 256 KiB");
        }
        const auto after = shm::copy_counts();
        if (after.single_copy == mid.single_copy)
          throw std::runtime_error(fmt::format("none of 50 all-to-alls of 256 KiB blocks was read alone ({} cooperative)",
                                               after.cooperative - mid.cooperative));
        g.barrier()->wait();
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}
