// The launchers' records in the job's store (launcher/node_records.h): a node's entry and a
// node's failure round-trip, the reason's tabs and newlines included, and a malformed record is
// an error that names the key, the field and what is accepted; and the rank the job's failure
// record blames (failure_key.h).
#include <catch2/catch.hpp>

#include <climits>

#include "fastrun/launcher/failure_key.h"
#include "fastrun/launcher/node_records.h"
#include "fastrun/runtime/error.h"

using namespace fastrun;
using namespace fastrun::launcher;
using Catch::Contains;

TEST_CASE("a node's entry round-trips", "[launcher][node_records]") {
  NodeEntry e;
  e.ranks = 4;
  e.host = "node-b";
  e.pid = 4242;
  CHECK(encode(e) == R"({"ranks":4,"host":"node-b","pid":4242})");
  const NodeEntry back = decode_node_entry(1, encode(e));
  CHECK(back.ranks == 4);
  CHECK(back.host == "node-b");
  CHECK(back.pid == 4242);
  CHECK(back.rank_master_port == 0);
  // A compute node of a --store-only job also says where its ranks' MASTER_ADDR/PORT would be.
  e.rank_master_addr = "10.0.0.7";
  e.rank_master_port = 29511;
  CHECK(encode(e) == R"({"ranks":4,"host":"node-b","pid":4242,"rank_master_addr":"10.0.0.7","rank_master_port":29511})");
  const NodeEntry with_master = decode_node_entry(1, encode(e));
  CHECK(with_master.rank_master_addr == "10.0.0.7");
  CHECK(with_master.rank_master_port == 29511);
  CHECK_THROWS_WITH(decode_node_entry(3, R"({"ranks":1,"host":"h","pid":1,"rank_master_addr":"a","rank_master_port":70000})"),
                    Contains("field 'rank_master_port' of the record is 70000; accepted: 1 to 65535"));
  CHECK_THROWS_WITH(decode_node_entry(3, "4\tnode-b\t4242"), Contains("fastrun/launcher/node/3: malformed record"));
  CHECK_THROWS_WITH(decode_node_entry(3, R"({"ranks":-1,"host":"h","pid":1})"),
                    Contains("fastrun/launcher/node/3: field 'ranks' of the record is -1; accepted: 0 to"));
  CHECK_THROWS_WITH(decode_node_entry(3, R"({"ranks":1,"pid":1})"), Contains("no field 'host'"));
}

TEST_CASE("a node's failure round-trips", "[launcher][node_records]") {
  const NodeFailure f{137, 2, "node 2 (host x): rank 5\tkilled\nby \"SIGKILL\"", true};
  CHECK(encode(f) == R"({"exit_code":137,"node":2,"why":"node 2 (host x): rank 5\tkilled\nby \"SIGKILL\""})");
  const NodeFailure back = decode_node_failure(encode(f));
  CHECK(back.exit_code == 137);
  CHECK(back.node == 2);
  CHECK(back.why == f.why);
  CHECK_FALSE(back.store_lost);  // this node's own view, not part of the record
  CHECK_FALSE(back.final);
  // A failure that ends the job whatever restarts are left says so; "final" is only written when true.
  const NodeFailure stop{143, 1, "the launcher on node 1 got SIGTERM", false, true};
  CHECK(encode(stop) == R"({"exit_code":143,"node":1,"why":"the launcher on node 1 got SIGTERM","final":true})");
  CHECK(decode_node_failure(encode(stop)).final);
  CHECK_FALSE(decode_node_failure(encode(stop)).lost);
  // A lost node (--nnodes MIN:MAX goes on without it) says so; "lost" is only written when true.
  const NodeFailure lost{1, 2, "node 2 (host h): its launcher stopped answering", false, true, true};
  CHECK(encode(lost) == R"({"exit_code":1,"node":2,"why":"node 2 (host h): its launcher stopped answering",)"
                        R"("final":true,"lost":true})");
  CHECK(decode_node_failure(encode(lost)).lost);
  CHECK_FALSE(decode_node_failure(encode(lost)).joining);
  // A node that is back and asks to join (node 0 stops the attempt to take it in).
  const NodeFailure joins{1, 0, "node 2 (host h) is back", false, false, false, true};
  CHECK(encode(joins) == R"({"exit_code":1,"node":0,"why":"node 2 (host h) is back","joining":true})");
  CHECK(decode_node_failure(encode(joins)).joining);
  CHECK_THROWS_WITH(decode_node_failure(R"({"exit_code":1,"node":0,"why":"","lost":"yes"})"),
                    Contains("field 'lost' of the record is \"yes\"; accepted: true or false"));
  CHECK_THROWS_WITH(decode_node_failure(R"({"exit_code":1,"node":0,"why":"","final":1})"),
                    Contains("field 'final' of the record is 1; accepted: true or false"));
  CHECK(decode_node_failure(encode(NodeFailure{INT_MIN, 0, "", false})).exit_code == INT_MIN);
  CHECK_THROWS_WITH(decode_node_failure(R"({"exit_code":1,"node":0})"),
                    Contains("fastrun/launcher/failure") && Contains("no field 'why'"));
  CHECK_THROWS_WITH(decode_node_failure(R"({"exit_code":1.5,"node":0,"why":""})"),
                    Contains("field 'exit_code' of the record is 1.5; accepted: an integer"));
  CHECK_THROWS_WITH(decode_node_failure(R"({"exit_code":1,"node":4294967296,"why":""})"),
                    Contains("field 'node' of the record is 4294967296"));
}

// FailureKey::blamed_rank reads the "rank K: why" records ranks and the launcher write; anything
// else (another node's failure, damaged text) blames no rank.
TEST_CASE("the failure record's blamed rank is read only from 'rank K: ...'", "[launcher][failure_key]") {
  CHECK(FailureKey::blamed_rank("rank 0: process gone (connection closed during all_reduce)") == 0);
  CHECK(FailureKey::blamed_rank("rank 17: exited with code 3") == 17);
  CHECK_FALSE(FailureKey::blamed_rank("node 1 (host h): its launcher stopped answering"));
  CHECK_FALSE(FailureKey::blamed_rank("rank 3 (pid 12) on node 1 (host h) exited with code 1"));
  CHECK_FALSE(FailureKey::blamed_rank("rank : no number"));
  CHECK_FALSE(FailureKey::blamed_rank("rank -1: negative"));
  CHECK_FALSE(FailureKey::blamed_rank("rank 2"));
  CHECK_FALSE(FailureKey::blamed_rank(""));
}
