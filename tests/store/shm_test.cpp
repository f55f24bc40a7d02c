// shm:// specifics: owner-only segment, name collisions, a full segment, missing segments.
#include <sched.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "conformance.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/shm/segment_layout.h"
#include "test_support/scoped_env.h"
#include "test_support/skip.h"

using namespace fastrun;
using namespace std::chrono_literals;

TEST_CASE("shm store: segment is /dev/shm/fastrun-NAME, mode 0600, removed by its host", "[store][shm]") {
  const std::string name = test::unique_test_name("perm");
  const std::string path = "/dev/shm/fastrun-" + name;
  {
    const mode_t old = ::umask(0);  // the segment must be 0600 whatever the umask
    auto hosted = host_store("shm://" + name);
    ::umask(old);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == ::geteuid());
    CHECK(hosted->address() == "shm://" + name);
    CHECK(hosted->token().empty());
    // A second host of the same name is refused and leaves the first intact.
    try {
      host_store("shm://" + name);
      FAIL("second host accepted");
    } catch (const StoreError& e) {
      CHECK_THAT(e.what(), Catch::Contains("already exists") && Catch::Contains("--cleanup"));
    }
    auto s = connect_store("shm://" + name);
    s->set("k", to_bytes("v"));
    CHECK(to_string(hosted->connect()->get("k", 1s)) == "v");
  }
  struct stat st {};
  CHECK(::stat(path.c_str(), &st) != 0);
  CHECK(test::leftovers().empty());
}

TEST_CASE("shm store: a full segment is a clear error, and the store keeps working", "[store][shm]") {
  StoreOptions o;
  o.shm_bytes = 65536;  // the minimum: two heaps of ~24 KiB
  auto hosted = host_store("shm://" + test::unique_test_name("full"), o);
  auto s = hosted->connect();
  s->set("small", to_bytes("kept"));
  try {
    s->set("huge", Bytes(100000, 7));
    FAIL("a value larger than the segment was stored");
  } catch (const StoreError& e) {
    CHECK_THAT(e.what(), Catch::Contains("full") && Catch::Contains("FASTRUN_SHM_STORE_BYTES") &&
                             Catch::Contains("65536") && Catch::Contains("huge"));
  }
  CHECK_FALSE(s->check({"huge"}));
  CHECK(to_string(s->get("small", 1s)) == "kept");
  // Overwriting many times compacts instead of running out.
  for (int i = 0; i < 2000; ++i) s->set("churn", Bytes(1000, static_cast<std::uint8_t>(i)));
  CHECK(s->get("churn", 1s) == Bytes(1000, static_cast<std::uint8_t>(1999)));
  // Too many keys: also a clear error.
  bool refused = false;
  for (int i = 0; i < 5000 && !refused; ++i) {
    try {
      s->set("key-" + std::to_string(i), to_bytes("v"));
    } catch (const StoreError& e) {
      refused = true;
      CHECK_THAT(e.what(), Catch::Contains("FASTRUN_SHM_STORE_BYTES"));
    }
  }
  CHECK(refused);
  CHECK(to_string(s->get("small", 1s)) == "kept");
  CHECK(s->delete_key("key-0"));
  s->set("after", to_bytes("ok"));
  CHECK(to_string(s->get("after", 1s)) == "ok");
}

TEST_CASE("shm store: sizes below the minimum are refused", "[store][shm]") {
  StoreOptions o;
  o.shm_bytes = 1000;
  CHECK_THROWS_AS(host_store("shm://" + test::unique_test_name("tiny"), o), ConfigError);
  test::ScopedEnv env("FASTRUN_SHM_STORE_BYTES", "12");
  CHECK_THROWS_WITH(host_store("shm://" + test::unique_test_name("tiny")), Catch::Contains("FASTRUN_SHM_STORE_BYTES"));
  CHECK(test::leftovers().empty());
}

TEST_CASE("shm store: a size no address space can map is a clear error, and no segment is left", "[store][shm]") {
  // 1 PiB: the file is sparse, so only mapping it fails (more than the 128 TiB of user space).
  test::ScopedEnv env("FASTRUN_SHM_STORE_BYTES", "1125899906842624");
  const std::string name = test::unique_test_name("huge");
  CHECK_THROWS_AS(host_store("shm://" + name), StoreError);
  CHECK_THROWS_WITH(host_store("shm://" + name), Catch::Contains("cannot map the 1125899906842624-byte segment") &&
                                                   Catch::Contains("lower FASTRUN_SHM_STORE_BYTES"));
  CHECK(test::leftovers().empty());
}

TEST_CASE("shm store: connecting to a segment nobody hosts times out naming it", "[store][shm]") {
  StoreOptions o;
  o.timeout = 200ms;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(connect_store("shm://" + test::unique_test_name("nobody"), o),
                    Catch::Contains("/dev/shm/fastrun-") && Catch::Contains("nobody"));
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

namespace {
std::uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}
std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}
}  // namespace

TEST_CASE("shm store: creation reserves a first slice only, and the heaps are reserved as they fill", "[store][shm]") {
  const std::string name = test::unique_test_name("lazy");
  const std::string path = "/dev/shm/fastrun-" + name;
  const std::size_t fds_before = open_fds();
  {
    StoreOptions o;
    o.shm_bytes = 64u << 20;
    auto hosted = host_store("shm://" + name, o);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(static_cast<std::uint64_t>(st.st_size) == o.shm_bytes);  // whole address space, as before
    const std::uint64_t at_creation = allocated_bytes(path);
    // The header, the 1 Ki slots table 0 starts with (8 KiB) and 16 KiB of heap 0: not the rest
    // of the table's room (16 Ki slots), nor the second half's table and heap, nor 64 MiB.
    CHECK(at_creation < (48u << 10));

    // A few small keys fit what creation reserved.
    auto client = connect_store("shm://" + name);
    for (int i = 0; i < 16; ++i) client->set("small/" + std::to_string(i), Bytes(100, 1));
    CHECK(allocated_bytes(path) == at_creation);

    // A client (its own mapping and fd) writes 4 MiB: the active heap grows to hold it.
    const Bytes big(4u << 20, 0x5a);
    client->set("big", big);
    const std::uint64_t after_4m = allocated_bytes(path);
    CHECK(after_4m >= at_creation + (4u << 20) - (16u << 10));
    CHECK(after_4m < at_creation + (6u << 20));  // grown in steps, not the whole segment
    CHECK(hosted->connect()->get("big", 1s) == big);

    // A 16 MiB value grows the reservation again; deleted and set again it no longer fits the
    // ~32 MiB heap, so the set compacts into the other heap, which is reserved as it is filled.
    const Bytes huge(16u << 20, 0xa5);
    auto s = hosted->connect();
    s->set("huge", huge);
    CHECK(client->get("huge", 1s) == huge);
    CHECK(allocated_bytes(path) >= at_creation + (20u << 20) - (16u << 10));
    const std::uint64_t before_compaction = allocated_bytes(path);
    CHECK(s->delete_key("huge"));
    s->set("huge", huge);
    // The compaction reserved the other half: its table and the 20 MiB it copied and added.
    CHECK(allocated_bytes(path) >= before_compaction + (20u << 20) + (8u << 10));
    CHECK(client->get("huge", 1s) == huge);
    CHECK(client->get("big", 1s) == big);
    CHECK(allocated_bytes(path) <= o.shm_bytes);
  }
  struct stat st {};
  CHECK(::stat(path.c_str(), &st) != 0);
  CHECK(open_fds() == fds_before);  // the mappings' fds were closed with them
  CHECK(test::leftovers().empty());
}

// A table starts with 1 Ki slots (768 usable) and doubles at the compaction that would leave it
// more than half full: thousands of keys fit, all readable from another handle, and what is
// reserved for the tables grows with them (8 bytes a slot).
TEST_CASE("shm store: the slot table grows with the keys", "[store][shm]") {
  const std::string name = test::unique_test_name("grow");
  const std::string path = "/dev/shm/fastrun-" + name;
  StoreOptions o;
  o.shm_bytes = 64u << 20;
  auto hosted = host_store("shm://" + name, o);
  auto writer = hosted->connect();
  auto reader = connect_store("shm://" + name);
  const std::uint64_t at_creation = allocated_bytes(path);
  constexpr int kKeys = 5000;  // past 768, 1,536 and 3,072: three doublings
  for (int i = 0; i < kKeys; ++i) writer->set("k/" + std::to_string(i), to_bytes(std::to_string(i * 7)));
  CHECK(reader->num_keys() == kKeys);
  for (int i = 0; i < kKeys; i += 97)
    CHECK(to_string(reader->get("k/" + std::to_string(i), 1s)) == std::to_string(i * 7));
  CHECK(to_string(reader->get("k/4999", 1s)) == std::to_string(4999 * 7));
  // 8 Ki slots (64 KiB) in the table in use now, and the smaller ones before it in the other.
  CHECK(allocated_bytes(path) >= at_creation + (64u << 10));
  // Deleting and setting again keeps working across the grown tables.
  for (int i = 0; i < kKeys; i += 2) CHECK(writer->delete_key("k/" + std::to_string(i)));
  for (int i = 0; i < kKeys; i += 2) writer->set("k/" + std::to_string(i), to_bytes("again"));
  CHECK(reader->num_keys() == kKeys);
  CHECK(to_string(reader->get("k/0", 1s)) == "again");
  CHECK(to_string(reader->get("k/1", 1s)) == std::to_string(7));
}

// A /dev/shm smaller than the segment: creation still works (only a slice is reserved), a set
// that needs more than /dev/shm has is a clear StoreError that changes nothing, and the store
// keeps working. Needs a private mount namespace with a 4 MiB tmpfs on /dev/shm (root or user
// namespaces); skipped (test::skip_case) where that is not allowed.
TEST_CASE("shm store: a /dev/shm too small is a clear error at the set that needs it", "[store][shm]") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);
    // Private propagation first, so the tmpfs never shows in the parent's /dev/shm.
    if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=4m") != 0)
      ::_exit(77);
    int rc = 0;
    try {
      StoreOptions o;
      o.shm_bytes = 64u << 20;
      auto hosted = host_store("shm://small-devshm", o);
      auto s = hosted->connect();
      s->set("small", Bytes(1000, 1));
      try {
        s->set("big", Bytes(8u << 20, 2));
        rc = 1;
      } catch (const StoreError& e) {
        const std::string m = e.what();
        for (const char* want : {"set('big')", "/dev/shm/fastrun-small-devshm", "67108864", "FASTRUN_SHM_STORE_BYTES",
                                 "No space left"})
          if (m.find(want) == std::string::npos) rc = 2;
      }
      if (s->check({"big"}) || s->num_keys() != 1 || s->get("small", 1s) != Bytes(1000, 1)) rc = 3;
      s->set("mid", Bytes(1u << 20, 3));
      if (s->get("mid", 1s) != Bytes(1u << 20, 3)) rc = 4;
    } catch (...) {
      rc = 5;
    }
    ::_exit(rc);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    test::skip_case("cannot mount a small tmpfs on /dev/shm in a private mount namespace here");
    return;
  }
  CHECK(WEXITSTATUS(status) == 0);  // 1: 8 MiB stored; 2: message; 3: state changed; 4/5: store broken
  CHECK(test::leftovers().empty());
}

TEST_CASE("connect_store waits FASTRUN_TIMEOUT for a store that is not there", "[store][shm]") {
  // It once waited a built-in 300 s whatever FASTRUN_TIMEOUT said, while its error said to raise it.
  test::ScopedEnv t("FASTRUN_TIMEOUT", "0.2");
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(connect_store("shm://" + test::unique_test_name("absent")),
                    Catch::Contains("within 0.2 s") && Catch::Contains("FASTRUN_TIMEOUT"));
  CHECK(std::chrono::steady_clock::now() - start < 30s);
  test::ScopedEnv bad("FASTRUN_TIMEOUT", "abc");
  CHECK_THROWS_WITH(connect_store("shm://" + test::unique_test_name("absent")), Catch::Contains("FASTRUN_TIMEOUT='abc'"));
}

// A process that dies holding the segment's lock (SIGKILL inside an operation) must not wedge
// the store: the next operation gets EOWNERDEAD, repairs the derived counts and goes on. The
// child takes the lock itself, so the case is certain rather than a chance of a kill loop. Also
// run by the TSan stage ("[repair]"): TSan does not see a lock taken with EOWNERDEAD unless we
// tell it (CI once failed on "unlock of an unlocked mutex" here).
TEST_CASE("shm store: a process that died holding the lock is repaired after, and the store goes on",
          "[store][shm][repair]") {
  const std::string name = test::unique_test_name("deadholder");
  {
    auto hosted = host_store("shm://" + name);
    auto s = hosted->connect();
    s->set("before", to_bytes("kept"));
    const int fd = ::open(("/dev/shm/fastrun-" + name).c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    void* at = ::mmap(nullptr, sizeof(shm_store::SegmentHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    REQUIRE(at != MAP_FAILED);
    auto* header = static_cast<shm_store::SegmentHeader*>(at);
    const std::uint64_t repairs_before = header->repairs;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) ::_exit(::pthread_mutex_lock(&header->mutex) == 0 ? 0 : 1);  // dies holding it
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    s->set("after", to_bytes("written"));  // takes the lock: EOWNERDEAD, repair, consistent
    CHECK(to_string(s->get("before", 1s)) == "kept");
    CHECK(to_string(s->get("after", 1s)) == "written");
    CHECK(s->num_keys() == 2);
    CHECK(header->repairs == repairs_before + 1);
    CHECK(s->add("n", 1) == 1);  // the lock is usable again, not left inconsistent
    ::munmap(at, sizeof(shm_store::SegmentHeader));
  }
  CHECK(test::leftovers().empty());
}
