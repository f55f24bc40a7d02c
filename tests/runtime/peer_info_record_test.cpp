// A rank's PeerInfo as kept in the store (runtime/process_group/peer_info.h, runtime/store/record.h): what
// encode writes decodes to the same info, names with tabs, quotes or newlines included, and a
// malformed record is an error that names the key, the field and what is accepted.
#include <catch2/catch.hpp>

#include <string>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/peer_info.h"

using namespace fastrun;
using Catch::Contains;

namespace {
void check_same(const PeerInfo& a, const PeerInfo& b) {
  CHECK(a.rank == b.rank);
  CHECK(a.host == b.host);
  CHECK(a.pid == b.pid);
  CHECK(a.device == b.device);
  CHECK(a.node == b.node);
}
}  // namespace

TEST_CASE("a peer's record round-trips", "[join][peer_info]") {
  const PeerInfo plain{3, "node-a", 12345, "cpu", 1};
  CHECK(plain.encode() == R"({"host":"node-a","pid":12345,"device":"cpu","node":1})");
  check_same(PeerInfo::decode(3, plain.encode()), plain);
  const PeerInfo odd{7, "host\twith \"tab\"\n", 1, "00000000:3B:00.0", -1};
  check_same(PeerInfo::decode(7, odd.encode()), odd);
}

TEST_CASE("a malformed peer record names the key and the field", "[join][peer_info]") {
  CHECK_THROWS_AS(PeerInfo::decode(2, "node-a\t1\tcpu\t0"), StoreError);  // the old tab format
  CHECK_THROWS_WITH(PeerInfo::decode(2, "node-a\t1\tcpu\t0"), Contains("fastrun/peer/2: malformed record"));
  CHECK_THROWS_WITH(PeerInfo::decode(2, "[1]"), Contains("fastrun/peer/2") && Contains("is a JSON array"));
  CHECK_THROWS_WITH(PeerInfo::decode(2, R"({"host":"h","device":"cpu","node":0})"),
                    Contains("fastrun/peer/2") && Contains("no field 'pid'"));
  CHECK_THROWS_WITH(PeerInfo::decode(2, R"({"host":"h","pid":"12","device":"cpu","node":0})"),
                    Contains("field 'pid' of the record is \"12\"; accepted: an integer"));
  CHECK_THROWS_WITH(PeerInfo::decode(2, R"({"host":7,"pid":12,"device":"cpu","node":0})"),
                    Contains("field 'host' of the record is 7; accepted: a string"));
  CHECK_THROWS_WITH(PeerInfo::decode(2, R"({"host":"h","pid":12,"device":"cpu","node":-2})"),
                    Contains("field 'node' of the record is -2"));
}
