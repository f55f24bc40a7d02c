// shm point-to-point: a recv posted after its message came is done when posted (P2PEngine::
// recv_now copies it straight out of the ring, or out of a kept node), and MPI's matching order
// holds on that path too: a recv takes the earliest unclaimed message from its peer with its tag,
// never one that an earlier recv of the same tag, still waiting, is owed. A message left in the
// ring at posting never hides what follows it from a wait. On 2 real processes; every byte is
// checked.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

constexpr std::size_t kWords = 6;              // int32 elements per message (eager: small)
constexpr std::size_t kBigWords = 256 * 1024;  // 1 MiB: past every eager limit

std::vector<std::int32_t> message(int id) {
  std::vector<std::int32_t> m(kWords);
  for (std::size_t j = 0; j < kWords; ++j) m[j] = id * 1000 + static_cast<int>(j);
  return m;
}

BufferView view(std::vector<std::int32_t>& v) { return BufferView{v.data(), v.size(), DType::int32, DeviceKind::cpu}; }

// Receives a message of tag `tag` from `peer` and checks it is message `id`.
void expect_from(Group& g, int peer, int tag, int id, const char* when) {
  std::vector<std::int32_t> got(kWords, -1);
  g.recv(view(got), peer, {tag})->wait();
  if (got != message(id))
    throw std::runtime_error(
        fmt::format("{}: the recv of tag {} got message {}, not {}", when, tag, got[0] / 1000, id));
}
void expect(Group& g, int tag, int id, const char* when) { expect_from(g, 1, tag, id, when); }

}  // namespace

TEST_CASE("shm p2p: recvs posted after their messages came take them in MPI's order", "[shm][p2p][mp]") {
  auto results = test::run_ranks(2, [](int) {
    auto ctx = join({"shm"});
    Group& g = ctx->world();
    // Messages 0..5 with tags 1 1 2 1 2 2, all sent before rank 0 posts any recv.
    const std::vector<int> tags{1, 1, 2, 1, 2, 2};
    auto send_all = [&](int first) {
      std::vector<std::vector<std::int32_t>> bufs;
      for (std::size_t i = 0; i < tags.size(); ++i) bufs.push_back(message(first + static_cast<int>(i)));
      for (std::size_t i = 0; i < tags.size(); ++i) g.send(view(bufs[i]), 0, {tags[i]})->wait();
    };
    if (g.rank() == 1) {
      send_all(0);
      g.barrier()->wait();
      send_all(10);
      g.barrier()->wait();
      // 3. Two messages of tag 1 after rank 0 posted a recv for the first of them.
      g.barrier()->wait();
      auto m20 = message(20), m21 = message(21);
      g.send(view(m20), 0, {1})->wait();
      g.send(view(m21), 0, {1})->wait();
      g.barrier()->wait();
      // 4. A large send (rendezvous where single copy is allowed) whose answer rank 0 writes
      //    behind a small message no recv here wants yet: waiting for the send must still see it.
      std::vector<std::int32_t> big(kBigWords);
      for (std::size_t j = 0; j < kBigWords; ++j) big[j] = static_cast<std::int32_t>(j * 7 + 3);
      auto sent = g.send(view(big), 0, {6});
      g.barrier()->wait();
      sent->wait();
      expect_from(g, 0, 5, 30, "after a large send");
      return;
    }
    // 1. In arrival order: each recv finds its message at the head of the ring (or kept, where
    //    the barrier's wait moved it out: a rank blocked in a collective moves its messages).
    g.barrier()->wait();
    for (std::size_t i = 0; i < tags.size(); ++i) expect(g, tags[i], static_cast<int>(i), "in arrival order");
    // 2. Tag 2 first: the first recv moves the tag-1 messages ahead of its own out of the ring;
    //    the later recvs of either tag find theirs kept or at the ring's head, in sending order.
    g.barrier()->wait();
    expect(g, 2, 12, "tag 2 first");
    expect(g, 1, 10, "tag 2 first");
    expect(g, 2, 14, "tag 2 first");
    expect(g, 1, 11, "tag 2 first");
    expect(g, 1, 13, "tag 2 first");
    expect(g, 2, 15, "tag 2 first");
    // 3. A recv of tag 1 waits for a message not sent yet; a second recv of tag 1, posted once
    //    both messages may be there, is owed the second, whatever the first recv has seen.
    std::vector<std::int32_t> first(kWords, -1), second(kWords, -1);
    auto w1 = g.recv(view(first), 1, {1});
    g.barrier()->wait();
    g.barrier()->wait();
    auto w2 = g.recv(view(second), 1, {1});
    w2->wait();
    w1->wait();
    if (first != message(20) || second != message(21))
      throw std::runtime_error(
          fmt::format("a waiting recv and a later one of the same tag got messages {} and {}, "
                      "not 20 and 21",
                      first[0] / 1000, second[0] / 1000));
    // 4. (rank 1's side above)
    auto m30 = message(30);
    g.send(view(m30), 1, {5})->wait();
    g.barrier()->wait();
    std::vector<std::int32_t> big(kBigWords, -1);
    g.recv(view(big), 1, {6})->wait();
    for (std::size_t j = 0; j < kBigWords; ++j)
      if (big[j] != static_cast<std::int32_t>(j * 7 + 3))
        throw std::runtime_error(fmt::format("the large message's element {} is {}", j, big[j]));
  });
  REQUIRE(test::all_ok(results));
}

// What a handle says without a wait: a recv done when posted (its message was there) is known
// complete; one posted before its message is not, even once the message came, until a wait or
// completed() makes the progress pass that takes it. The Group asks known_complete() after
// issuing an op (a progress pass per op was a third of a traced recv's cost), so a recv it wraps
// for its flight record must still deliver; both forms are checked, byte for byte.
TEST_CASE("shm p2p: a handle is known complete only when done, and completes by a wait or completed()",
          "[shm][p2p][mp]") {
  auto results = test::run_ranks(2, [](int) {
    auto ctx = join({"shm"});
    Group& g = ctx->world();
    if (g.rank() == 1) {
      auto m40 = message(40), m41 = message(41), m42 = message(42);
      g.send(view(m40), 0, {7})->wait();
      g.barrier()->wait();  // (1) sent before rank 0 posts
      g.barrier()->wait();  // (2) rank 0 posted both recvs
      g.send(view(m41), 0, {8})->wait();
      g.send(view(m42), 0, {9})->wait();
      g.barrier()->wait();  // (3) both sent
      return;
    }
    auto fail = [](const std::string& what) { throw std::runtime_error(what); };
    g.barrier()->wait();
    std::vector<std::int32_t> at_post(kWords, -1), by_test(kWords, -1), by_wait(kWords, -1);
    auto done = g.recv(view(at_post), 1, {7});
    if (!done->known_complete()) fail("a recv whose message was there is not known complete when posted");
    if (at_post != message(40)) fail(fmt::format("the recv done when posted got message {}", at_post[0] / 1000));
    auto on_backend = g.backend().recv(view(by_test), 1, {8});  // the engine's handle itself
    auto traced = g.recv(view(by_wait), 1, {9});                // the Group's, wrapped for its record
    if (on_backend->known_complete() || traced->known_complete())
      fail("a recv posted before its message is known complete");
    g.barrier()->wait();
    g.barrier()->wait();
    // The messages are here (rank 1 waited its sends out, and the barrier's wait may have moved
    // them); without a progress pass a handle does not claim it.
    if (on_backend->known_complete()) fail("the engine's handle claims completion without a progress pass");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!on_backend->completed())
      if (std::chrono::steady_clock::now() > until) fail("completed() never saw the message that came");
    if (by_test != message(41)) fail(fmt::format("completed()'s recv got message {}", by_test[0] / 1000));
    traced->wait();
    if (by_wait != message(42)) fail(fmt::format("the Group's recv got message {}", by_wait[0] / 1000));
  });
  REQUIRE(test::all_ok(results));
}
