// The Slurm host-list grammar (runtime/cluster/slurm_hostlist.h) as a table: each row is what
// `scontrol show hostnames LIST` (Slurm 22.05) prints, one name per entry, except the rows with
// text after the last bracket, which scontrol 22.05 rejects and fastrun accepts.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fastrun/runtime/cluster/slurm_hostlist.h"
#include "fastrun/runtime/error.h"

using fastrun::ConfigError;
using fastrun::cluster::expand_hostlist;
using Names = std::vector<std::string>;

namespace {

struct Row {
  const char* list;
  Names hosts;
};

struct BadRow {
  const char* list;
  const char* message;  // a part of the error
};

}  // namespace

TEST_CASE("Slurm host lists expand as scontrol show hostnames does", "[cluster][hostlist]") {
  const std::vector<Row> rows = {
      {"node01", {"node01"}},
      {"node[01-04,07]", {"node01", "node02", "node03", "node04", "node07"}},
      {"a[1-2],b3", {"a1", "a2", "b3"}},
      {"n[001-003]-ib", {"n001-ib", "n002-ib", "n003-ib"}},
      {"n[8-11]", {"n8", "n9", "n10", "n11"}},          // width of the low bound: no padding
      {"n[08-11]", {"n08", "n09", "n10", "n11"}},       // padded to two digits
      {"n[098-101]", {"n098", "n099", "n100", "n101"}},  // three
      {"n[9-9]", {"n9"}},
      {"n[5]", {"n5"}},
      {"[1-3]", {"1", "2", "3"}},
      {"rack[1-2]-n[1-2]", {"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},  // first group slowest
      {"r[1-2]n[01,03]x", {"r1n01x", "r1n03x", "r2n01x", "r2n03x"}},
      {"gpu[1-2],cpu[3-4],login", {"gpu1", "gpu2", "cpu3", "cpu4", "login"}},
      {"a[1-2],a[1-2]", {"a1", "a2", "a1", "a2"}},  // duplicates and order kept
      {"127.0.0.[1-2]", {"127.0.0.1", "127.0.0.2"}},
      {"node-1.cluster,node-2.cluster", {"node-1.cluster", "node-2.cluster"}},
      {"a1 b2", {"a1", "b2"}},  // whitespace separates too
      {"a,,b", {"a", "b"}},     // empty items are skipped
      {",a,", {"a"}},
      {"n[1-010]", {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"}},
      {"x[1-2]y[3]", {"x1y3", "x2y3"}},
  };
  for (const auto& row : rows) {
    INFO(row.list);
    CHECK(expand_hostlist(row.list, "SLURM_JOB_NODELIST") == row.hosts);
  }
}

TEST_CASE("malformed Slurm host lists are errors naming the variable, the list and the place", "[cluster][hostlist]") {
  const std::vector<BadRow> rows = {
      {"", "it names no host"},
      {", ,", "it names no host"},
      {"node[01-04", "a '[' without its ']' at position 5"},
      {"node01-04]", "a ']' without its '['"},
      {"n[1-[2]]", "a '[' inside brackets"},
      {"n[]", "'' in brackets is not a number"},
      {"n[1-]", "'' in brackets is not a number"},
      {"n[-3]", "'' in brackets is not a number"},
      {"n[a-c]", "'a' in brackets is not a number"},
      {"n[1-2,]", "'' in brackets is not a number"},
      {"n[1 - 2]", "is not a number"},
      {"n[4-2]", "the range '4-2' runs backwards"},
      {"n[0-99999]", "has more than 65536 names"},
      {"a[0-999]b[0-999]", "more than 65536 host names"},
  };
  for (const auto& row : rows) {
    INFO(row.list);
    try {
      expand_hostlist(row.list, "SLURM_STEP_NODELIST");
      FAIL("no error for '" << row.list << "'");
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      CHECK_THAT(m, Catch::Contains(row.message));
      CHECK_THAT(m, Catch::Contains(std::string("SLURM_STEP_NODELIST='") + row.list + "'"));
      CHECK_THAT(m, Catch::Contains("node[01-04,07]"));  // what is accepted
    }
  }
}
