// Output relay through the real CLI: whole lines exactly once, tags, partial lines, log files,
// --output modes; and many jobs at once with nothing left in /dev/shm.
#include <unistd.h>

#include <set>
#include <sstream>

#include <catch2/catch.hpp>

#include "process_runner.h"

using namespace fastrun::test;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

Strings lines_of(const std::string& text) {
  Strings out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      out.push_back(text.substr(pos));
      break;
    }
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("4 ranks x 20000 lines of 200 bytes: every line whole and exactly once", "[launcher][output]") {
  constexpr int kRanks = 4, kLines = 20000, kLen = 200;
  const auto r = run(cmd({"--nproc", std::to_string(kRanks)}, {"--lines", std::to_string(kLines), std::to_string(kLen)}),
                     {}, 30s);
  REQUIRE(r.exit_code == 0);
  const Strings lines = lines_of(r.out);
  REQUIRE(lines.size() == static_cast<std::size_t>(kRanks * kLines));
  std::set<std::pair<int, int>> seen;
  int bad = 0;
  for (const std::string& line : lines) {
    int rank = -1, idx = -1;
    if (line.size() != kLen || std::sscanf(line.c_str(), "r%d-%d-", &rank, &idx) != 2) {
      ++bad;
      continue;
    }
    const std::string head = "r" + std::to_string(rank) + "-" + std::to_string(idx) + "-";
    if (line.compare(0, head.size(), head) != 0 || line.find_first_not_of('x', head.size()) != std::string::npos) ++bad;
    seen.insert({rank, idx});
  }
  CHECK(bad == 0);
  CHECK(seen.size() == static_cast<std::size_t>(kRanks * kLines));
}

TEST_CASE("cli: --tag-output prefixes every terminal line with its rank", "[launcher][output]") {
  const auto r = run(cmd({"--nproc", "2", "--tag-output"}, {"--lines", "100", "50", "--err", "e%r"}));
  REQUIRE(r.exit_code == 0);
  int tagged = 0;
  for (const std::string& line : lines_of(r.out)) {
    int rank = -1;
    CHECK(std::sscanf(line.c_str(), "[rank %d] r", &rank) == 1);
    CHECK(contains(line, "] r" + std::to_string(rank) + "-"));
    ++tagged;
  }
  CHECK(tagged == 200);
  CHECK(contains(r.err, "[rank 0] e0\n"));
  CHECK(contains(r.err, "[rank 1] e1\n"));
}

TEST_CASE("a dying rank's final partial line is delivered", "[launcher][output]") {
  const auto r = run(cmd({"--nproc", "2"}, {"--on", "1", "--partial", "last words of %r", "--on", "1", "--crash", "segv",
                                            "--sleep", "30"}));
  CHECK(r.exit_code == 128 + 11);
  CHECK(contains(r.out, "last words of 1\n"));
}

TEST_CASE("cli: --log-dir files each rank's own output and --output filters the terminal", "[launcher][output]") {
  TempDir dir;
  const Strings partner = {"--out", "out-%r", "--err", "err-%r"};
  struct Row {
    std::string mode;
    bool out1, err1;
  };
  for (const Row& row : {Row{"all", true, true}, Row{"only_error", false, true}, Row{"ignore", false, false}}) {
    CAPTURE(row.mode);
    const std::string id = "logs-" + row.mode + "-" + std::to_string(::getpid());
    const auto r = run(cmd({"--nproc", "3", "--log-dir", dir.str() + "/logs", "--run-id", id, "--output", row.mode},
                           partner));
    REQUIRE(r.exit_code == 0);
    for (int rank = 0; rank < 3; ++rank) {
      const auto base = dir.path() / "logs" / id / ("rank-" + std::to_string(rank));
      CHECK(read_file(base / "stdout.log") == "out-" + std::to_string(rank) + "\n");
      CHECK(read_file(base / "stderr.log") == "err-" + std::to_string(rank) + "\n");
    }
    CHECK(contains(r.out, "out-0"));  // rank 0 always shows
    CHECK(contains(r.err, "err-0"));
    CHECK(contains(r.out, "out-1") == row.out1);
    CHECK(contains(r.out, "out-2") == row.out1);
    CHECK(contains(r.err, "err-1") == row.err1);
  }
  // Reusing a run id would mix two runs' logs: refused before anything starts.
  const std::string id = "logs-all-" + std::to_string(::getpid());
  const auto r = run(cmd({"--nproc", "1", "--log-dir", dir.str() + "/logs", "--run-id", id}, partner));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "already exists"));
}

TEST_CASE("the failure summary names the log files", "[launcher][output]") {
  TempDir dir;
  const auto r = run(cmd({"--nproc", "2", "--log-dir", dir.str(), "--run-id", "summary"},
                         {"--on", "1", "--err", "trouble", "--on", "1", "--exit", "9", "--sleep", "30"}));
  CHECK(r.exit_code == 9);
  CHECK(contains(r.err, dir.str() + "/summary/rank-1/stderr.log"));
  CHECK(read_file(dir.path() / "summary/rank-1/stderr.log") == "trouble\n");
}

TEST_CASE("10 jobs at once each pass a store barrier and leave nothing in /dev/shm", "[launcher][many]") {
  TempDir dir;
  std::vector<std::unique_ptr<Process>> jobs;
  for (int i = 0; i < 10; ++i) {
    // Generated run ids: started within the same few milliseconds, they must still differ.
    jobs.push_back(std::make_unique<Process>(
        cmd({"--nproc", "2"}, {"--barrier", "--dump", dir.str() + "/job" + std::to_string(i) + "-%r"}),
        std::map<std::string, std::optional<std::string>>{}, dir.path()));
  }
  std::set<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    const auto r = jobs[static_cast<std::size_t>(i)]->finish(30s);
    CAPTURE(i, r.err);
    CHECK(r.exit_code == 0);
    ids.insert(read_dump(dir.path() / ("job" + std::to_string(i) + "-0")).env.at("FASTRUN_RUN_ID"));
  }
  CHECK(ids.size() == 10);
  for (const auto& id : ids) CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("segments left by a killed rank are removed with the job", "[launcher][many]") {
  const std::string id = "leftover-" + std::to_string(::getpid());
  const auto r = run(cmd({"--nproc", "2", "--run-id", id}, {"--shm-leftover", "--on", "1", "--crash", "segv",
                                                            "--sleep", "30"}));
  CHECK(r.exit_code == 139);
  CHECK(shm_entries("fastrun-" + id).empty());
}
