// The stall board as the failure record reads it (runtime/process_group/stall_board.h): a slot
// that a destroyed group freed keeps its ops for read_rank_slots, while read_board (the stall
// report) no longer shows it, and a new group takes a slot never used before reusing that one.
// The groups live in a child process, so that a crash in them leaves no board behind.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "fastrun/runtime/backend/shm/common/segment.h"
#include "fastrun/runtime/process_group/stall_board.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

OpDesc op(OpName name, std::int64_t seq) {
  OpDesc d;
  d.op = name;
  d.seq = seq;
  return d;
}

}  // namespace

TEST_CASE("a freed slot keeps its group's last ops for the failure record", "[stall][failure_record]") {
  // The board is this process's, the ranks' groups a child's: however the child ends (a failed
  // check, a crash in the code under test), the board's name is unlinked here when the case ends.
  const std::string run_id = "t-board-" + std::to_string(::getpid());
  auto board = shm::Segment::create(stall::segment_name(run_id, 0), stall::segment_bytes(2));
  stall::init_board(board.data(), 2);
  test::RankRunOptions options;
  options.set_fastrun_env = false;
  // The child is local rank 1 of that board.
  options.extra_env = {{"FASTRUN_RUN_ID", run_id}, {"FASTRUN_LOCAL_RANK", "1"}, {"FASTRUN_NODE_RANK", "0"}};
  auto results = test::run_ranks(1, [&](int) {
    RANK_REQUIRE(stall::read_rank_slots(board.data(), board.size(), 1).empty());  // nothing claimed yet

    auto world = stall::RankSlot::claim("world", 2, 1);
    RANK_REQUIRE(world);
    world->begun(op("all_reduce", 1), 100);
    world->ended(op("all_reduce", 1), 200, true);
    world->begun(op("broadcast", 2), 300);
    world.reset();  // the group is destroyed: the slot is free
    RANK_REQUIRE(stall::read_board(board.data(), board.size()).empty());
    auto kept = stall::read_rank_slots(board.data(), board.size(), 1);
    RANK_REQUIRE(kept.size() == 1);
    RANK_REQUIRE(kept[0].group == "world#1");
    RANK_REQUIRE(!kept[0].live);
    RANK_REQUIRE(kept[0].begun.op == "broadcast");
    RANK_REQUIRE(kept[0].begun.seq == 2);
    RANK_REQUIRE(kept[0].ended.seq == 1);
    RANK_REQUIRE(stall::read_rank_slots(board.data(), board.size(), 0).empty());  // another rank's slots

    // A new group takes an unused slot: the freed one still has 'world'.
    auto pairs = stall::RankSlot::claim("pairs", 2, 1);
    RANK_REQUIRE(pairs);
    pairs->begun(op("all_gather", 1), 400);
    kept = stall::read_rank_slots(board.data(), board.size(), 1);
    RANK_REQUIRE(kept.size() == 2);
    RANK_REQUIRE(kept[0].group == "world#1");
    RANK_REQUIRE(kept[1].group == "pairs#1");
    RANK_REQUIRE(kept[1].live);
    RANK_REQUIRE(stall::read_board(board.data(), board.size()).size() == 1);
  }, options);
  REQUIRE(test::all_ok(results));
}
