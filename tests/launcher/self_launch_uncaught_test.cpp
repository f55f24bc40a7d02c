// launch_self when an exception leaves rank 0 uncaught (std::terminate): a program without
// try/catch around its collectives whose peer is killed must still end with the supervisor's
// summary naming the dead rank and that rank's status (docs/launching.md, "In-process spawn"),
// not with rank 0's abort (134) and no summary.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "process_runner.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

TEST_CASE("launch_self: a peer killed under an uncaught collective ends the job with its status and summary",
          "[launcher][self]") {
  const std::string id = "uncaught-peer-" + std::to_string(::getpid());
  // Rank 0 waits in an all-reduce rank 2 never reaches: it SIGKILLs itself after joining. Rank 1
  // ignores SIGTERM and sleeps, so the supervisor is still stopping the job (for --kill-timeout)
  // when rank 0's PeerFailure reaches std::terminate: without the terminate handler, rank 0's
  // abort ended the process then, 134 and no summary.
  const auto r = run({kPartner, "--self", "3", "--self-run-id", id, "--self-kill-timeout", "3", "--uncaught", "--join",
                      "--on", "1", "--ignore-term", "--on", "1", "--sleep", "30", "--on", "2", "--sleep", "0.3", "--on",
                      "2", "--crash", "kill", "--world-allreduce"},
                     {{"FASTRUN_RANK", std::nullopt}}, 40s);
  CAPTURE(r.err);
  CHECK(WIFEXITED(r.status));
  CHECK(r.exit_code == 137);  // the dead rank's status (128 + SIGKILL), as the CLI would exit
  CHECK(contains(r.err, "fastrun: rank 2 (pid "));
  CHECK(contains(r.err, "killed by signal SIGKILL"));
  CHECK(contains(r.err, "stopped the other ranks"));
  CHECK(contains(r.err, "fastrun: rank 0: uncaught fastrun::PeerFailure: "));  // what rank 0 got, still said
  CHECK(contains(r.err, "rank 1 did not stop within --kill-timeout 3 s"));
  CHECK(r.seconds < 20);
  CHECK(shm_entries("fastrun-" + id).empty());  // the store was removed
}

TEST_CASE("launch_self: rank 0's own uncaught exception stops the others and then ends it by SIGABRT",
          "[launcher][self]") {
  const std::string id = "uncaught-own-" + std::to_string(::getpid());
  const auto r = run({kPartner, "--self", "2", "--self-run-id", id, "--self-kill-timeout", "20", "--on", "1", "--sleep",
                      "60", "--on", "0", "--throw", "boom"},
                     {{"FASTRUN_RANK", std::nullopt}}, 40s);
  CAPTURE(r.err);
  CHECK(WIFSIGNALED(r.status));
  CHECK(WTERMSIG(r.status) == SIGABRT);  // as abort() would end it, after the clean-up
  CHECK(contains(r.err, "fastrun: rank 0: uncaught std::runtime_error: boom"));
  CHECK(contains(r.err, "fastrun: rank 0 (pid "));
  CHECK(contains(r.err, "killed by signal SIGABRT"));
  CHECK(r.seconds < 15);  // rank 1 was stopped by SIGTERM, not waited for (60 s) nor killed (20 s)
  CHECK_FALSE(contains(r.err, "SIGKILL"));
  CHECK(shm_entries("fastrun-" + id).empty());
}
