// Ranks start with the default disposition of every signal and an empty mask, whatever the
// launcher inherited (docs/launching.md, "Signals, stdin and process groups"): a shell starts a
// background job with SIGINT and SIGQUIT ignored, and ranks inheriting that outlived the SIGINT
// the launcher forwards until --kill-timeout's SIGKILL.
#include <signal.h>

#include <chrono>

#include <catch2/catch.hpp>

#include "process_runner.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

const std::string kDefault = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";  // /proc's order
// A shell's background job (SIGINT, SIGQUIT ignored), with a blocked mask on top.
const SignalState kBackground{{SIGINT, SIGQUIT}, {SIGINT, SIGQUIT, SIGUSR1, SIGALRM}};

std::string sigstate(const TempDir& dir, int rank) { return read_file(dir.path() / ("sig-" + std::to_string(rank))); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("a launcher started as a background job starts default-signal ranks and SIGINT stops them at once",
          "[launcher][signals]") {
  TempDir dir;
  Process p(cmd({"--nproc", "3", "--kill-timeout", "30"},
                {"--sigstate", dir.str() + "/sig-%r", "--pidfile", dir.str() + "/pid-%r", "--sleep", "60"}),
            {}, dir.path(), kBackground);
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 3);  // --sigstate was written before
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    CHECK(sigstate(dir, rank) == kDefault);
  }
  const auto sent = std::chrono::steady_clock::now();
  p.signal(SIGINT);  // the launcher ignores SIGINT and blocks it, as it was started: it hears it all the same
  const auto r = p.finish(45s);
  CAPTURE(r.err);
  CHECK(r.exit_code == 130);
  CHECK(seconds_since(sent) < 10);  // the ranks died of the forwarded SIGINT, not of SIGKILL 30 s later
  CHECK(contains(r.err, "fastrun: got SIGINT; stopped 3 ranks"));
  CHECK_FALSE(contains(r.err, "SIGKILL"));
  wait_until_gone(pids, 2s);
  for (pid_t pid : pids) CHECK(process_gone(pid));
}

TEST_CASE("ranks under nohup keep SIGHUP ignored and nothing else", "[launcher][signals]") {
  TempDir dir;
  Process p(cmd({"--nproc", "2", "--kill-timeout", "30"},
                {"--sigstate", dir.str() + "/sig-%r", "--pidfile", dir.str() + "/pid-%r", "--sleep", "60"}),
            {}, dir.path(), SignalState{{SIGHUP, SIGINT, SIGQUIT}, {}});
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 2);
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    CHECK(sigstate(dir, rank) == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000001\n");  // bit 0: SIGHUP
  }
  const auto sent = std::chrono::steady_clock::now();
  p.signal(SIGINT);
  const auto r = p.finish(45s);
  CHECK(r.exit_code == 130);
  CHECK(seconds_since(sent) < 10);
  CHECK_FALSE(contains(r.err, "SIGKILL"));
}

TEST_CASE("launch_self: children start with default signals whatever rank 0 inherited", "[launcher][self][signals]") {
  TempDir dir;
  Process p({kPartner, "--self", "3", "--sigstate", dir.str() + "/sig-%r"}, {{"FASTRUN_RANK", std::nullopt}},
            dir.path(), kBackground);
  const auto r = p.finish(30s);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  // Rank 0 is the user's program: what it was given is its own business (bits 1, 2: SIGINT, SIGQUIT).
  CHECK(contains(sigstate(dir, 0), "SigIgn:\t0000000000000006\n"));
  for (int rank = 1; rank < 3; ++rank) {
    CAPTURE(rank);
    CHECK(sigstate(dir, rank) == kDefault);
  }
}
