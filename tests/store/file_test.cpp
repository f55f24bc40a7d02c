// file:// specifics: private directory and owner-only files, stale paths refused, removal, the
// log (torn reads, records cut short by a killed writer, compaction).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "conformance.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/runtime_dir.h"
#include "test_support/children.h"
#include "test_support/scoped_env.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {
mode_t mode_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 0777;
}
}  // namespace

TEST_CASE("file store: lives in the private runtime dir, 0700 dir and 0600 files", "[store][file]") {
  const std::string name = test::unique_test_name("perm");
  const std::string dir = runtime_dir() + "/" + name;
  CHECK(mode_of(runtime_dir()) == 0700);
  {
    const mode_t old = ::umask(0);
    auto hosted = host_store("file://" + name);
    auto s = hosted->connect();
    s->set("k", to_bytes("v"));
    ::umask(old);
    CHECK(mode_of(dir) == 0700);
    CHECK(mode_of(dir + "/log") == 0600);
    CHECK(mode_of(dir + "/lock") == 0600);
    CHECK(mode_of(dir + "/owner") == 0600);
  }
  struct stat st {};
  CHECK(::stat(dir.c_str(), &st) != 0);
  CHECK(test::leftovers().empty());
}

TEST_CASE("file store: an existing path is refused (never replays a crashed job's keys)", "[store][file]") {
  const std::string name = test::unique_test_name("stale");
  const std::string dir = runtime_dir() + "/" + name;
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  CHECK_THROWS_WITH(host_store("file://" + name), Catch::Contains("already exists") && Catch::Contains(dir));
  struct stat st {};
  CHECK(::stat(dir.c_str(), &st) == 0);  // not ours to remove
  ::rmdir(dir.c_str());
  CHECK(test::leftovers().empty());
}

TEST_CASE("file store: absolute paths, and clients that start before the host", "[store][file]") {
  char tmpl[] = "/tmp/fastrun-store-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string path = std::string(tmpl) + "/store";
  StoreOptions o;
  o.timeout = 5s;
  std::unique_ptr<Store> early;
  std::thread client([&] { early = connect_store("file://" + path, o); });
  std::this_thread::sleep_for(50ms);
  {
    auto hosted = host_store("file://" + path);
    client.join();
    REQUIRE(early);
    early->set("x", to_bytes("1"));
    CHECK(to_string(hosted->connect()->get("x", 1s)) == "1");
  }
  struct stat st {};
  CHECK(::stat(path.c_str(), &st) != 0);
  ::rmdir(tmpl);
  o.timeout = 150ms;
  CHECK_THROWS_AS(connect_store("file://" + path, o), TimeoutError);
}

// Every set appends to the one log while readers in other processes read it without a lock, so
// a read can overlap a write; the reader must stop before a record that is not whole (checksum)
// and never return a mix. Sizes cycle from 1 byte to 6000, and 1.5 s of sets pass the 256 KiB at
// which the log is compacted (a new file renamed over it) many times.
TEST_CASE("file store: readers in other processes never see a value torn by a rewrite", "[store][file][process]") {
  const std::string name = test::unique_test_name("torn");
  {
    auto hosted = host_store("file://" + name);
    auto writer = hosted->connect();
    const std::size_t sizes[] = {8, 700, 2900, 40, 6000, 2900, 1};
    // value_of(n): sizes[n % 7] bytes, each equal to n % 7; a mix of two values fails valid()
    auto value_of = [&](std::uint64_t n) {
      const std::size_t i = n % std::size(sizes);
      return Bytes(sizes[i], static_cast<std::uint8_t>(i));
    };
    auto valid = [&](const Bytes& v) {
      return !v.empty() && v[0] < std::size(sizes) && v.size() == sizes[v[0]] &&
             std::count(v.begin(), v.end(), v[0]) == static_cast<std::ptrdiff_t>(v.size());
    };
    writer->set("k", value_of(0));
    test::Children kids;
    for (int r = 0; r < 2; ++r)
      kids.spawn([&] {
        auto s = connect_store(hosted->address());
        const auto end = std::chrono::steady_clock::now() + 1500ms;
        while (std::chrono::steady_clock::now() < end) {
          if (!valid(s->get("k", 1s))) return 1;
        }
        return 0;
      });
    const auto end = std::chrono::steady_clock::now() + 1500ms;
    for (std::uint64_t n = 1; std::chrono::steady_clock::now() < end; ++n) writer->set("k", value_of(n));
    for (const auto& st : kids.wait_all(30s)) CHECK(st.shell_code() == 0);
  }
  CHECK(test::leftovers().empty());
}

TEST_CASE("runtime dir: must be private and ours", "[store][file][runtime_dir]") {
  char tmpl[] = "/tmp/fastrun-rtdir-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string base = tmpl;
  {
    test::ScopedEnv env("FASTRUN_RUNTIME_DIR", (base + "/new").c_str());
    CHECK(runtime_dir() == base + "/new");  // created
    CHECK(mode_of(base + "/new") == 0700);
  }
  REQUIRE(::mkdir((base + "/open").c_str(), 0755) == 0);
  ::chmod((base + "/open").c_str(), 0755);
  {
    test::ScopedEnv env("FASTRUN_RUNTIME_DIR", (base + "/open").c_str());
    CHECK_THROWS_WITH(runtime_dir(), Catch::Contains("755") && Catch::Contains("FASTRUN_RUNTIME_DIR"));
  }
  REQUIRE(::symlink((base + "/new").c_str(), (base + "/link").c_str()) == 0);
  {
    test::ScopedEnv env("FASTRUN_RUNTIME_DIR", (base + "/link").c_str());
    CHECK_THROWS_WITH(runtime_dir(), Catch::Contains("symlink"));
  }
  ::unlink((base + "/link").c_str());
  ::rmdir((base + "/open").c_str());
  ::rmdir((base + "/new").c_str());
  ::rmdir(base.c_str());
}

namespace {
std::uintmax_t size_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return static_cast<std::uintmax_t>(st.st_size);
}
Bytes read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void append_file(const std::string& p, const Bytes& data) {
  std::ofstream out(p, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  REQUIRE(out.flush());
}
}  // namespace

// A writer SIGKILLed inside its append leaves the first bytes of a record at the log's end (made
// here by appending the first half of a real record). Readers read past nothing of it; the next
// set cuts it off, and so does a reader that finds the lock free, so nothing stays wedged.
TEST_CASE("file store: a record cut short by a killed writer is never read and is cut off", "[store][file]") {
  const std::string name = test::unique_test_name("cut");
  const std::string log = runtime_dir() + "/" + name + "/log";
  StoreOptions o;
  o.timeout = 5s;
  auto hosted = host_store("file://" + name, o);
  auto writer = connect_store(hosted->address(), o);
  auto reader = connect_store(hosted->address(), o);
  writer->set("a", to_bytes("first"));
  const Bytes whole = read_file(log);
  REQUIRE(whole.size() > 16);
  writer->set("b", to_bytes("second"));
  const auto good = size_of(log);

  append_file(log, Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2)));
  CHECK(to_string(reader->get("a", 1s)) == "first");
  CHECK(to_string(reader->get("b", 1s)) == "second");
  // The reader found the tail and the lock free: the tail is gone, the log whole again.
  CHECK(size_of(log) == good);

  append_file(log, Bytes(whole.begin(), whole.begin() + 30));
  writer->set("c", to_bytes("third"));  // cuts the tail off before it appends
  CHECK(to_string(reader->get("c", 1s)) == "third");
  CHECK(size_of(log) == good + whole.size());  // c's record is as long as a's: nothing else is left
  CHECK(to_string(connect_store(hosted->address(), o)->get("c", 1s)) == "third");
  CHECK(reader->num_keys() == 3);
}

// Rewrites grow the log; past 256 KiB and 4x the live records it is rewritten with the live values
// only. Handles opened before keep reading the right values, deletions stay deleted.
TEST_CASE("file store: the log is compacted and every handle follows", "[store][file]") {
  const std::string name = test::unique_test_name("compact");
  const std::string log = runtime_dir() + "/" + name + "/log";
  auto hosted = host_store("file://" + name);
  auto writer = hosted->connect();
  auto reader = hosted->connect();
  writer->set("keep", to_bytes("x"));
  writer->set("gone", to_bytes("y"));
  CHECK(to_string(reader->get("gone", 1s)) == "y");
  CHECK(writer->delete_key("gone"));
  std::uintmax_t largest = 0, last = 0;
  int shrunk = 0;
  for (int n = 0; n < 3000; ++n) {
    writer->set("hot", Bytes(4096, static_cast<std::uint8_t>(n % 251)));
    const auto now = size_of(log);
    largest = std::max(largest, now);
    shrunk += now < last;
    last = now;
    if (n % 500 == 0) CHECK(reader->get("hot", 1s) == Bytes(4096, static_cast<std::uint8_t>(n % 251)));
  }
  CHECK(shrunk >= 8);              // 12 MiB were written: compacted at each 256 KiB...
  CHECK(largest < (256u << 10) + 8192);  // ...and never longer
  CHECK(reader->get("hot", 1s) == Bytes(4096, static_cast<std::uint8_t>(2999 % 251)));
  CHECK(to_string(reader->get("keep", 1s)) == "x");
  CHECK_FALSE(reader->check({"gone"}));
  CHECK(reader->num_keys() == 2);
  CHECK(hosted->connect()->num_keys() == 2);
}
