// Leaving and joining. join() is safe to end a program with: the README's shape (launch_self or
// the CLI, join(), return) run many times. A fast rank that joined and exited 0 once made a
// slower rank's set-up of the default group fail ("exited during set-up"); about one run in
// three did. And a rank that leaves *before* it joins fails the job at once, named.
#include <catch2/catch.hpp>

#include "process_runner.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

// Runs `argv` `times` times; returns the first failure's stderr ("" when every run exited 0).
std::string first_failure(const std::vector<std::string>& argv, int times,
                          std::map<std::string, std::optional<std::string>> env = {}) {
  env.emplace("FASTRUN_RANK", std::nullopt);
  for (int i = 0; i < times; ++i) {
    const auto r = run(argv, env, 20s);
    if (r.exit_code != 0) return "run " + std::to_string(i) + ": exit " + std::to_string(r.exit_code) + "\n" + r.err;
  }
  return "";
}

// 75 runs per shape (300 in all): before the fix 27-63 % of runs failed, so a surviving race would show.
constexpr int kRuns = 75;

}  // namespace

TEST_CASE("join then exit: self-spawned ranks never fail each other's join", "[launcher][join]") {
  for (const char* n : {"2", "4"}) {
    INFO(n << " ranks");
    CHECK(first_failure({kPartner, "--self", n, "--join"}, kRuns).empty());
  }
}

TEST_CASE("join then exit: ranks under the CLI never fail each other's join", "[launcher][join]") {
  for (const char* n : {"2", "4"}) {
    INFO(n << " ranks");
    CHECK(first_failure(cmd({"--nproc", n}, {"--join"}), kRuns).empty());
  }
}

TEST_CASE("join then exit: the gloo world group too", "[launcher][join]") {
  CHECK(first_failure(cmd({"--nproc", "4"}, {"--join"}), kRuns / 2, {{"FASTRUN_BACKEND", "gloo"}}).empty());
}

// The join timeout is 3000 s and each run gets 30 s: finishing at all proves the ranks did not
// wait for the timeout, whatever the machine's speed (before the fix they waited it out).
TEST_CASE("a rank that exits 0 before it joins fails the job at once, named", "[launcher][join]") {
  const std::map<std::string, std::optional<std::string>> env = {{"FASTRUN_RANK", std::nullopt},
                                                                  {"FASTRUN_TIMEOUT", "3000"}};
  const std::vector<std::pair<std::vector<std::string>, std::string>> runs = {
      {cmd({"--nproc", "3"}, {"--on", "2", "--exit", "0", "--join"}), "rank 2: exited with code 0 before it joined"},
      {{kPartner, "--self", "3", "--on", "2", "--exit", "0", "--join"}, "rank 2: exited with code 0 before it joined"},
      {{kPartner, "--self", "3", "--on", "0", "--exit", "0", "--join"}, "rank 0: exited with code 0 before it joined"},
  };
  for (const auto& [argv, named] : runs) {
    const auto r = run(argv, env, 30s);
    INFO(r.err);
    CHECK(r.exit_code == 67);  // the joining ranks' error (sparring partner: join failed)
    CHECK(contains(r.err, named));
  }
}
