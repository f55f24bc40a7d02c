// shm backend: whether the ranks share cores is decided from the union of every rank's CPU
// affinity, not from the rank's own. A rank bound to one core (`fastrun --bind core`, `mpirun
// --bind-to core`) sees one CPU; taking that for shared cores made its point-to-point waits
// yield where they should spin (an 8-byte ping-pong 2.7-3.5x slower). Real processes; each rank
// binds itself before it joins the group.
#include <catch2/catch.hpp>

#include <vector>

#include "fastrun/runtime/backend/shm/shm_backend.h"
#include "shm_test_support.h"
#include "test_support/cpu_affinity.h"
#include "test_support/skip.h"

using namespace fastrun;
using namespace fastrun::shm_test;

namespace {

void bind_to(int cpu) { expect(test::set_allowed_cpus({cpu}), "cannot bind to CPU {}", cpu); }

// Each rank binds itself to cpu_of[rank] (none: -1), joins a world group and checks the group's
// CPU count.
void check_group_cpus(const std::vector<int>& cpu_of, int expected) {
  const auto out = run_ranks(static_cast<int>(cpu_of.size()), [&](const Rank& r) {
    const int cpu = cpu_of[static_cast<std::size_t>(r.rank)];
    if (cpu >= 0) bind_to(cpu);
    auto world = r.world();
    const int got = dynamic_cast<shm::ShmBackend&>(*world).cpus();
    expect(got == expected, "rank {} (bound to {}): the group has {} CPUs, expected {}", r.rank, cpu, got, expected);
  });
  INFO(describe(out));
  CHECK(all_ok(out));
}

}  // namespace

TEST_CASE("shm: ranks bound to a core each count the cores between them", "[shm]") {
  const std::vector<int> cpus = test::allowed_cpus();
  REQUIRE(!cpus.empty());  // the affinity could be read
  if (cpus.size() < 2) test::skip_case("needs 2 usable CPUs to bind 2 ranks apart");
  SECTION("two ranks on two cores") { check_group_cpus({cpus[0], cpus[1]}, 2); }
  SECTION("three ranks, two of them bound to the same core") { check_group_cpus({cpus[0], cpus[0], cpus[1]}, 2); }
  SECTION("two ranks bound to the same core share it") { check_group_cpus({cpus[1], cpus[1]}, 1); }
  SECTION("unbound ranks have every CPU they are allowed") {
    check_group_cpus({-1, -1}, static_cast<int>(cpus.size()));
  }
  SECTION("one rank bound, one not") { check_group_cpus({cpus[0], -1}, static_cast<int>(cpus.size())); }
}
