// runtime/os/atomic_file: all or nothing, also when the writer is SIGKILLed mid-write or the
// file-size limit cuts a write short. Real files and real child processes.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/atomic_file.h"
#include "test_support/children.h"
#include "test_support/temp_dir.h"

namespace fs = std::filesystem;
using fastrun::os::AtomicFile;
using fastrun::test::TempDir;

namespace {


std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_whole(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace

TEST_CASE("AtomicFile: commit puts the whole new file in place and nothing else stays in the directory", "[os][atomic]") {
  TempDir dir;
  const std::string path = dir / "ck";
  write_whole(path, "first version");
  CHECK(slurp(path) == "first version");
  write_whole(path, std::string(100000, 'x') + "second");
  CHECK(slurp(path) == std::string(100000, 'x') + "second");
  CHECK(dir.names() == std::vector<std::string>{"ck"});
}

TEST_CASE("AtomicFile: without commit the previous file stays and no temporary is left", "[os][atomic]") {
  TempDir dir;
  const std::string path = dir / "ck";
  write_whole(path, "old");
  {
    AtomicFile f(path);
    f.write("half of the new", 15);
  }  // e.g. an exception while serialising
  CHECK(slurp(path) == "old");
  CHECK(dir.names() == std::vector<std::string>{"ck"});
  CHECK_THROWS_WITH([&] {
    AtomicFile f(path);
    f.commit();
    f.commit();
  }(), Catch::Contains("twice"));
}

TEST_CASE("AtomicFile: a writer SIGKILLed mid-write leaves the previous file loadable and nothing else",
          "[os][atomic][process]") {
  TempDir dir;
  const std::string path = dir / "ck";
  write_whole(path, "old and complete");
  fastrun::test::Children kids;
  kids.spawn([&] {
    AtomicFile f(path);
    const std::string chunk(1 << 20, 'n');
    f.write(chunk.data(), chunk.size());
    ::raise(SIGKILL);  // dies between writes, as a killed rank would
    return 0;
  });
  const auto st = kids.wait_all(std::chrono::seconds(30));
  REQUIRE(st.size() == 1);
  CHECK(st[0].signal == SIGKILL);
  CHECK(slurp(path) == "old and complete");
  CHECK(dir.names() == std::vector<std::string>{"ck"});
}

TEST_CASE("AtomicFile: a write cut short by the file-size limit fails naming the errno and the old file stays",
          "[os][atomic][process]") {
  TempDir dir;
  const std::string path = dir / "ck";
  write_whole(path, "old");
  fastrun::test::Children kids(/*capture_messages=*/true);
  kids.spawn([&] {
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing the process
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    AtomicFile f(path);
    const std::string chunk(64 * 1024, 'n');
    f.write(chunk.data(), chunk.size());
    f.commit();
    return 0;
  });
  const auto st = kids.wait_all(std::chrono::seconds(30));
  REQUIRE(st.size() == 1);
  CHECK(st[0].code == fastrun::test::Children::kThrew);
  CHECK_THAT(st[0].message, Catch::Contains("writing " + path) && Catch::Contains("File too large"));
  CHECK(slurp(path) == "old");
  CHECK(dir.names() == std::vector<std::string>{"ck"});
}

TEST_CASE("AtomicFile: a missing directory is an error naming it", "[os][atomic]") {
  CHECK_THROWS_AS(AtomicFile("/nonexistent-fastrun-dir/ck"), fastrun::Error);
  CHECK_THROWS_WITH(AtomicFile("/nonexistent-fastrun-dir/ck"), Catch::Contains("/nonexistent-fastrun-dir"));
  CHECK(fastrun::os::directory_of("ck") == ".");
  CHECK(fastrun::os::directory_of("/ck") == "/");
  CHECK(fastrun::os::directory_of("a/b/ck") == "a/b");
}
