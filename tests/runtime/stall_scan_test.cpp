// The stall scan's rules (launcher/stall_scan.h) as tables of board slots: who is named late, when
// a stall is reported, that it is reported once, and when it is over.
#include <catch2/catch.hpp>

#include "fastrun/runtime/process_group/stall_scan.h"

using fastrun::OpDesc;
using fastrun::stall::find_stalls;
using fastrun::stall::StallLog;
using fastrun::stall::SlotView;

namespace {
constexpr std::int64_t kSecond = 1'000'000'000;

OpDesc all_reduce(std::int64_t seq) {
  OpDesc d;
  d.op = "all_reduce";
  d.seq = seq;
  d.has_buffer = true;
  d.count = 4;
  d.reduce = 0;
  return d;
}

// Global rank `rank` of a group of `size` (on this board): began op #begun at begun_s, ended
// op #ended at ended_s (0: none).
SlotView member(int rank, std::int64_t begun, double begun_s, std::int64_t ended, double ended_s, int size = 3,
                const std::string& group = "world#1") {
  SlotView v;
  v.local_rank = rank;
  v.global_rank = rank;
  v.group = group;
  v.group_size = size;
  if (begun > 0) v.begun = all_reduce(begun);
  v.begun_ns = static_cast<std::int64_t>(begun_s * kSecond);
  if (ended > 0) v.ended = all_reduce(ended);
  v.ended_ns = static_cast<std::int64_t>(ended_s * kSecond);
  return v;
}
}  // namespace

TEST_CASE("a member below the op the others wait in is named late", "[stall]") {
  // Ranks 0 and 2 began op #2 at 10 s and 11 s; rank 1 ended op #1 at 9 s and began nothing since.
  const std::vector<SlotView> board{member(0, 2, 10, 1, 9.5), member(1, 1, 8, 1, 9), member(2, 2, 11, 1, 9.5)};
  SECTION("before the threshold: nothing") { CHECK(find_stalls(board, 11 * kSecond, 2.0).empty()); }
  SECTION("after it: one stall, timed from the first waiting member") {
    const auto stalls = find_stalls(board, 13 * kSecond, 2.0);
    REQUIRE(stalls.size() == 1);
    CHECK(stalls[0].op.seq == 2);
    CHECK(stalls[0].waiting == std::vector<int>{0, 2});
    REQUIRE(stalls[0].late.size() == 1);
    CHECK(stalls[0].late[0].global_rank == 1);
    CHECK(stalls[0].waited_s == Approx(3.0));
    const std::string line = fastrun::stall::report_line(stalls[0], 13 * kSecond, "");
    CHECK(line ==
          "fastrun: stall on group 'world': op #2 all_reduce(float32 x 4, sum): rank 1 has not arrived, ranks 0,2 "
          "have waited 3.0 s; rank 1: last op #1 all_reduce(float32 x 4, sum) completed 4.0 s ago (nothing is "
          "stopped: the op fails at FASTRUN_OP_TIMEOUT)");
  }
}

TEST_CASE("no stall when every member is in the op or through it", "[stall]") {
  // Everyone began op #2 long ago: a slow op, not a missing rank.
  CHECK(find_stalls({member(0, 2, 1, 1, 0), member(1, 2, 1, 1, 0), member(2, 2, 1, 1, 0)}, 100 * kSecond, 2).empty());
  // Rank 0 ended op #2 (a root that finished first) and the others are in compute before it.
  CHECK(find_stalls({member(0, 2, 1, 2, 1.5), member(1, 1, 0, 1, 0.5), member(2, 1, 0, 1, 0.5)}, 100 * kSecond, 2)
            .empty());
  // No collective yet on the group.
  CHECK(find_stalls({member(0, 0, 0, 0, 0), member(1, 0, 0, 0, 0), member(2, 0, 0, 0, 0)}, 100 * kSecond, 2).empty());
}

TEST_CASE("members on other nodes: the waiting ones say how many are elsewhere", "[stall]") {
  // This node holds ranks 0 and 1 of a group of 4; both wait in op #5.
  const auto stalls = find_stalls({member(0, 5, 10, 4, 9, 4), member(1, 5, 10, 4, 9, 4)}, 50 * kSecond, 30);
  REQUIRE(stalls.size() == 1);
  CHECK(stalls[0].late.empty());
  const std::string line = fastrun::stall::report_line(stalls[0], 50 * kSecond, " on node 0");
  CHECK(line.find("fastrun: stall on node 0 on group 'world': op #5") == 0);
  CHECK(line.find("ranks 0,1 have waited 40.0 s; the group's other 2 ranks are on other nodes") != std::string::npos);
}

TEST_CASE("groups are reported apart, a second instance by its key", "[stall]") {
  const auto stalls = find_stalls({member(0, 3, 0, 2, 0, 2, "world#2"), member(1, 2, 0, 2, 0, 2, "world#2"),
                                   member(0, 7, 0, 6, 0, 2, "group-1#1"), member(1, 6, 0, 6, 0, 2, "group-1#1")},
                                  10 * kSecond, 5);
  REQUIRE(stalls.size() == 2);
  CHECK(fastrun::stall::report_line(stalls[1], 10 * kSecond, "").find("on group 'world#2': op #3") !=
        std::string::npos);
  CHECK(fastrun::stall::report_line(stalls[0], 10 * kSecond, "").find("on group 'group-1': op #7") !=
        std::string::npos);
}

TEST_CASE("the log reports a stall once and says when it is over", "[stall]") {
  StallLog log("");
  std::vector<SlotView> board{member(0, 2, 10, 1, 9), member(1, 1, 8, 1, 9), member(2, 2, 10, 1, 9)};
  CHECK(log.update(board, 11 * kSecond, 2).empty());
  const std::string first = log.update(board, 12.5 * kSecond, 2);
  CHECK(first.find("fastrun: stall on group 'world': op #2") == 0);
  CHECK(first.back() == '\n');
  CHECK(log.update(board, 14 * kSecond, 2).empty());  // once
  board[1] = member(1, 2, 14.5, 1, 9);                 // rank 1 arrives
  CHECK(log.update(board, 15 * kSecond, 2) ==
        "fastrun: stall over on group 'world': op #2 all_reduce(float32 x 4, sum) went on after 5.0 s\n");
  CHECK(log.update(board, 16 * kSecond, 2).empty());
  // A later stall of the same group is a new one.
  board = {member(0, 3, 20, 2, 15), member(1, 2, 14.5, 2, 15), member(2, 3, 20, 2, 15)};
  CHECK(log.update(board, 23 * kSecond, 2).find("op #3") != std::string::npos);
  // A group gone from the board (its members left it) ends its stall too.
  CHECK(log.update({}, 24 * kSecond, 2).find("fastrun: stall over on group 'world': op #3") == 0);
}

TEST_CASE("a failed rank's last collective is the one it began last on any group", "[stall][failure_record]") {
  using fastrun::stall::last_collective;
  CHECK_FALSE(last_collective({}));
  CHECK_FALSE(last_collective({member(1, 0, 0, 0, 0)}));  // a group, no collective on it yet
  // On 'world' it completed op #3 (begun at 5 s); on its second 'pairs' group it began op #1 at
  // 7 s and recorded no end: it was in that one.
  const auto in = last_collective({member(1, 3, 5, 3, 6), member(1, 1, 7, 0, 0, 2, "pairs#2")});
  REQUIRE(in);
  CHECK(in->group == "pairs#2");
  CHECK(in->op.seq == 1);
  CHECK(in->state == "in_progress");
  const auto done = last_collective({member(1, 3, 5, 3, 6), member(1, 1, 4, 1, 4.5, 2, "pairs#1")});
  REQUIRE(done);
  CHECK(done->group == "world");
  CHECK(done->op.seq == 3);
  CHECK(done->state == "completed");
  SlotView failed = member(1, 2, 5, 2, 6);
  failed.ended_ok = false;
  CHECK(last_collective({failed})->state == "failed");
}
