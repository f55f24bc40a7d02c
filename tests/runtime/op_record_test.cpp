// Op descriptions and fingerprints (process_group/op_record.h) and the mismatch message of
// FASTRUN_DEBUG=sequence (process_group/sequence_check.h), without processes.
#include <catch2/catch.hpp>

#include <string>

#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/process_group/sequence_check.h"

using namespace fastrun;

namespace {
OpDesc numbered(OpDesc d, std::int64_t seq) {
  d.seq = seq;
  return d;
}
std::vector<float> g_buf(1024);
const BufferView kF32{g_buf.data(), 1024, DType::float32};
}  // namespace

TEST_CASE("ops describe themselves the way messages name them", "[group][debug]") {
  CHECK(describe(op_desc("all_reduce", kF32).with_reduce(ReduceOp::sum)) == "all_reduce(float32 x 1024, sum)");
  CHECK(describe(op_desc("broadcast", kF32).with_root(0)) == "broadcast(float32 x 1024, root 0)");
  CHECK(describe(op_desc("barrier")) == "barrier()");
  CHECK(describe_numbered(numbered(op_desc("all_gather", kF32), 12)) == "op #12 all_gather(float32 x 1024)");
  CHECK(describe_numbered(numbered(op_desc("send", kF32).with_peer(2), 3)) == "p2p op #3 send(float32 x 1024, peer 2)");
}

TEST_CASE("an op's name is a view of text that lives as long as the process", "[group][debug]") {
  // A literal, checked at compile time; an OpName is a pointer and a length (copied per op).
  constexpr OpName literal = "all_reduce";
  static_assert(literal == "all_reduce" && !(literal == "all_reduc") && OpName().empty());
  static_assert(sizeof(OpName) == sizeof(std::string_view));
  // Text made at run time is interned: one copy per text, which outlives the string it came from.
  OpName interned;
  {
    std::string made = "my_";
    made += "collective";
    interned = OpName::intern(made);
    CHECK(interned.view().data() != made.data());
  }
  CHECK(interned == "my_collective");
  CHECK(OpName::intern("my_collective").view().data() == interned.view().data());
  CHECK(!(OpName::intern("other_collective") == interned));
  // A peer's name, decoded from its fingerprint, outlives the fingerprint.
  OpDesc decoded;
  {
    const Fingerprint f = fingerprint(op_desc(interned, kF32));
    decoded = from_fingerprint(f);
  }
  CHECK(decoded.op == "my_collective");
  CHECK(describe(decoded) == "my_collective(float32 x 1024)");
}

TEST_CASE("a fingerprint keeps everything the ranks compare", "[group][debug]") {
  const OpDesc d = numbered(op_desc("reduce_scatter", {nullptr, 77, DType::bfloat16}).with_reduce(ReduceOp::max), 5);
  const OpDesc back = from_fingerprint(fingerprint(d));
  CHECK(describe_numbered(back) == describe_numbered(d));
  CHECK(describe(from_fingerprint(fingerprint(op_desc("barrier")))) == "barrier()");
  CHECK(!(fingerprint(d) == fingerprint(numbered(d, 6))));
  // A name longer than the fingerprint holds is cut, never overrun.
  CHECK(from_fingerprint(fingerprint(op_desc("an_operation_name_longer_than_24_bytes"))).op.view().size() == 23);
}

TEST_CASE("the mismatch message groups ranks by what they called", "[group][debug]") {
  const auto ar = fingerprint(numbered(op_desc("all_reduce", kF32).with_reduce(ReduceOp::sum), 12));
  const auto bc = fingerprint(numbered(op_desc("broadcast", kF32).with_root(0), 12));
  CHECK(describe_mismatch({ar, ar, ar}, "world", {0, 1, 2}).empty());
  const std::string m = describe_mismatch({ar, bc, ar}, "world", {0, 1, 2});
  CHECK_THAT(m, Catch::StartsWith("op #12 on group 'world': ranks 0,2 called all_reduce(float32 x 1024, sum), "
                                  "rank 1 called broadcast(float32 x 1024, root 0)"));
  CHECK_THAT(m, Catch::Contains("FASTRUN_DEBUG=sequence"));
  // Global ranks of a sub-group, and a rank that is an op ahead.
  const auto ahead = fingerprint(numbered(op_desc("all_reduce", kF32).with_reduce(ReduceOp::sum), 13));
  CHECK_THAT(describe_mismatch({ar, ahead}, "group-1", {3, 5}),
             Catch::StartsWith("op #12 on group 'group-1': rank 3 called all_reduce(float32 x 1024, sum), rank 5 "
                               "called all_reduce(float32 x 1024, sum) as its op #13"));
}

TEST_CASE("the mismatch message of another check: the ranks it saw, in rank order", "[group][debug]") {
  const auto ar = fingerprint(numbered(op_desc("all_reduce", kF32).with_reduce(ReduceOp::sum), 7));
  const auto bc = fingerprint(numbered(op_desc("broadcast", kF32).with_root(0), 7));
  CHECK(describe_mismatch(std::vector<RankOp>{{1, ar}, {0, ar}}, 7, "world", "found by x").empty());
  CHECK(describe_mismatch(std::vector<RankOp>{{2, bc}, {0, ar}, {1, ar}}, 7, "world", "found by x") ==
        "op #7 on group 'world': ranks 0,1 called all_reduce(float32 x 1024, sum), rank 2 called "
        "broadcast(float32 x 1024, root 0) (found by x)");
}

TEST_CASE("all_to_allv: counts that differ by rank are no mismatch, counts a pair disagrees on are", "[group][debug]") {
  // Rank r sends rank p (r + 1) * (p + 2) elements; 3 ranks.
  std::vector<PairCounts> rows(3);
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t p = 0; p < 3; ++p) {
      rows[r].send.push_back((r + 1) * (p + 2));
      rows[r].recv.push_back((p + 1) * (r + 2));  // what rank p sends rank r
    }
  const auto sums = [&] {
    std::vector<PairCountSums> s;
    for (int r = 0; r < 3; ++r) s.push_back(pair_count_sums(r, rows[static_cast<std::size_t>(r)]));
    return s;
  };
  CHECK(pair_counts_agree(sums()));
  CHECK(describe_pair_mismatch(rows, {}).empty());
  // The fingerprints of the ranks' all_to_allv agree although their inputs differ in size, and
  // the count is left out of what they name.
  const BufferView small{nullptr, 7, DType::float32, DeviceKind::cpu}, large{nullptr, 70, DType::float32, DeviceKind::cpu};
  const auto a = fingerprint(numbered(op_desc("all_to_allv", small).with_pair_counts(rows[0].send, rows[0].recv), 4));
  const auto b = fingerprint(numbered(op_desc("all_to_allv", large).with_pair_counts(rows[1].send, rows[1].recv), 4));
  CHECK(a == b);
  CHECK(describe(from_fingerprint(a)) == "all_to_allv(float32)");
  CHECK(describe(op_desc("all_to_allv", small)) == "all_to_allv(float32 x 7)");  // a rank's own record keeps it
  // Rank 2 expects one element less from rank 0 than rank 0 sends it; then a second pair too.
  rows[2].recv[0] -= 1;
  CHECK(!pair_counts_agree(sums()));
  CHECK(describe_pair_mismatch(rows, {}) == "rank 0 sends 4 elements to rank 2, which expects 3 from it");
  rows[0].send[1] += 5;
  CHECK(!pair_counts_agree(sums()));
  CHECK(describe_pair_mismatch(rows, {4, 5, 6}) ==
        "rank 4 sends 8 elements to rank 5, which expects 3 from it (and 1 more pair disagrees)");
}
