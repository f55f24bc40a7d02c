// Op descriptions and fingerprints (process_group/op_record.h) and the mismatch message of
// FASTRUN_DEBUG=sequence (process_group/sequence_check.h), without processes.
#include <catch2/catch.hpp>

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

TEST_CASE("a fingerprint keeps everything the ranks compare", "[group][debug]") {
  const OpDesc d = numbered(op_desc("reduce_scatter", {nullptr, 77, DType::bfloat16}).with_reduce(ReduceOp::max), 5);
  const OpDesc back = from_fingerprint(fingerprint(d));
  CHECK(describe_numbered(back) == describe_numbered(d));
  CHECK(describe(from_fingerprint(fingerprint(op_desc("barrier")))) == "barrier()");
  CHECK(!(fingerprint(d) == fingerprint(numbered(d, 6))));
  // A name longer than the fingerprint holds is cut, never overrun.
  CHECK(from_fingerprint(fingerprint(op_desc("an_operation_name_longer_than_24_bytes"))).op.size() == 23);
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
