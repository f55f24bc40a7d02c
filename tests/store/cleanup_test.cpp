// cleanup_stale_stores(): removes the stores of a SIGKILLed creator, never a live job's.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <catch2/catch.hpp>

#include "conformance.h"
#include "fastrun/runtime/store/cleanup/cleanup.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/runtime_dir.h"
#include "test_support/children.h"
#include "test_support/scoped_env.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {
bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}
bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST_CASE("cleanup: removes a SIGKILLed creator's segment and file store, never a live one", "[store][cleanup]") {
  // Under the runtime directory the suite runs with, which tools/test.sh checks is left empty.
  std::string rdir = runtime_dir() + "/cleanup-test-XXXXXX";
  REQUIRE(::mkdtemp(rdir.data()));
  ::chmod(rdir.c_str(), 0700);
  test::ScopedEnv env("FASTRUN_RUNTIME_DIR", rdir.c_str());

  const std::string dead_name = test::unique_test_name("dead");
  const std::string live_name = test::unique_test_name("live");
  const std::string dead_shm = "/dev/shm/fastrun-" + dead_name, live_shm = "/dev/shm/fastrun-" + live_name;
  const std::string dead_dir = rdir + "/" + dead_name, live_dir = rdir + "/" + live_name;

  auto live_seg = host_store("shm://" + live_name);
  auto live_file = host_store("file://" + live_name);
  {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    test::Children kids;
    kids.spawn([&] {
      auto seg = host_store("shm://" + dead_name);
      auto file = host_store("file://" + dead_name);
      seg->connect()->set("k", to_bytes("v"));
      const char c = 1;
      if (::write(ready[1], &c, 1) != 1) return 1;
      ::pause();
      return 0;
    });
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::close(ready[0]);
    ::close(ready[1]);
    kids.kill_all(SIGKILL);
    kids.wait_all(10s);
  }
  REQUIRE(exists(dead_shm));
  REQUIRE(exists(dead_dir));

  CleanupOptions dry;
  dry.dry_run = true;
  dry.runtime_dir = rdir;
  const auto would = cleanup_stale_stores(dry);
  CHECK(contains(would, dead_shm));
  CHECK(contains(would, dead_dir));
  CHECK_FALSE(contains(would, live_shm));
  CHECK_FALSE(contains(would, live_dir));
  CHECK(exists(dead_shm));  // dry run removed nothing

  CleanupOptions real;
  real.runtime_dir = rdir;
  const auto removed = cleanup_stale_stores(real);
  CHECK(contains(removed, dead_shm));
  CHECK(contains(removed, dead_dir));
  CHECK_FALSE(exists(dead_shm));
  CHECK_FALSE(exists(dead_dir));
  CHECK(exists(live_shm));
  CHECK(exists(live_dir));
  // The live stores still work.
  for (auto* hosted : {live_seg.get(), live_file.get()}) {
    auto s = hosted->connect();
    s->set("still", to_bytes("here"));
    CHECK(to_string(s->get("still", 1s)) == "here");
  }

  // Not-a-store fastrun-* segments (other kinds of segments) are never touched.
  const std::string foreign = "/dev/shm/fastrun-" + test::unique_test_name("foreign");
  {
    FILE* f = std::fopen(foreign.c_str(), "w");
    REQUIRE(f);
    std::fputs("some other kind of segment, with no store header at all ......................", f);
    std::fclose(f);
  }
  CHECK_FALSE(contains(cleanup_stale_stores(dry), foreign));
  ::unlink(foreign.c_str());

  live_seg.reset();
  live_file.reset();
  CHECK(test::leftovers().empty());  // (runtime_dir() is rdir here: check before removing it)
  CHECK(::rmdir(rdir.c_str()) == 0);  // empty: nothing else was left in it
}
