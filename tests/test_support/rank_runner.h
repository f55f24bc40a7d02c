#pragma once
// Runs a test body as N real rank processes (fork, no exec) with fastrun's environment
// contract, and reaps them with a timeout: the launcher-free way to test the runtime.
//   auto results = fastrun::test::run_ranks(3, [](int rank) { auto ctx = fastrun::join(); ... });
//   REQUIRE(fastrun::test::all_ok(results));   // prints every failed rank's message
// Each child gets FASTRUN_RANK, FASTRUN_WORLD_SIZE, FASTRUN_LOCAL_RANK, FASTRUN_LOCAL_WORLD_SIZE,
// FASTRUN_RUN_ID and FASTRUN_STORE (a fresh shm:// store hosted by the parent and removed when
// run_ranks returns), plus `extra_env`. The body reports failure by throwing (use RANK_REQUIRE,
// not Catch's REQUIRE, inside children); its message comes back through a pipe. Children leave
// with _exit (no atexit handlers, no double-flushed stdio). At the deadline the remaining
// children are SIGKILLed and reaped, and marked timed_out.
// Fork only from a single-threaded test process (no live contexts with comm threads).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/store/factory.h"

#define RANK_REQUIRE(cond)                                                                            \
  do {                                                                                                \
    if (!(cond)) throw std::runtime_error(fmt::format("{}:{}: RANK_REQUIRE({}) failed", __FILE__, __LINE__, #cond)); \
  } while (0)

namespace fastrun::test {

struct RankResult {
  int rank = 0;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string message;  // what the body threw
  bool ok() const { return exit_code == 0 && !timed_out; }
};

struct RankRunOptions {
  std::chrono::milliseconds timeout{30000};
  std::map<std::string, std::string> extra_env;      // set in every child
  std::map<std::string, std::string> unset_env = {}; // keys unset in every child (values ignored)
  bool set_fastrun_env = true;                       // false: the body sets its own environment
};

inline std::string describe(const std::vector<RankResult>& results) {
  std::string out;
  for (const auto& r : results) {
    if (r.ok()) continue;
    out += fmt::format("rank {}: {}{}{}\n", r.rank,
                       r.timed_out ? "timed out (killed)" : r.signal ? fmt::format("killed by signal {}", r.signal)
                                                                     : fmt::format("exit code {}", r.exit_code),
                       r.message.empty() ? "" : ": ", r.message);
  }
  return out;
}

inline bool all_ok(const std::vector<RankResult>& results) {
  const std::string text = describe(results);
  if (!text.empty()) std::fprintf(stderr, "rank failures:\n%s", text.c_str());
  return text.empty();
}

inline std::vector<RankResult> run_ranks(int n, const std::function<void(int rank)>& body, RankRunOptions options = {}) {
  static std::atomic<int> counter{0};
  const std::string name = fmt::format("fastrun-test-{}-{}", getpid(), counter++);
  std::unique_ptr<HostedStore> hosted;
  if (options.set_fastrun_env) hosted = host_store("shm://" + name);

  struct Child {
    pid_t pid = -1;
    int read_fd = -1;
  };
  std::vector<Child> children(static_cast<std::size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("run_ranks: pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("run_ranks: fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      for (const auto& kv : options.unset_env) ::unsetenv(kv.first.c_str());
      if (options.set_fastrun_env) {
        ::setenv("FASTRUN_RANK", std::to_string(rank).c_str(), 1);
        ::setenv("FASTRUN_WORLD_SIZE", std::to_string(n).c_str(), 1);
        ::setenv("FASTRUN_LOCAL_RANK", std::to_string(rank).c_str(), 1);
        ::setenv("FASTRUN_LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
        ::setenv("FASTRUN_RUN_ID", name.c_str(), 1);
        ::setenv("FASTRUN_STORE", hosted->address().c_str(), 1);
      }
      for (const auto& kv : options.extra_env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
      std::string message;
      int code = 0;
      try {
        body(rank);
      } catch (const std::exception& e) {
        message = e.what();
        code = 1;
      } catch (...) {
        message = "a non-std exception (Catch's REQUIRE? use RANK_REQUIRE in rank bodies)";
        code = 2;
      }
      if (!message.empty()) {
        const char* p = message.data();
        std::size_t left = message.size();
        while (left > 0) {
          const ssize_t w = ::write(fds[1], p, left);
          if (w <= 0) break;
          p += w;
          left -= static_cast<std::size_t>(w);
        }
      }
      ::_exit(code);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    children[static_cast<std::size_t>(rank)] = {pid, fds[0]};
  }

  std::vector<RankResult> results(static_cast<std::size_t>(n));
  auto drain = [](int fd, std::string& into) {
    char buf[4096];
    for (;;) {
      const ssize_t r = ::read(fd, buf, sizeof buf);
      if (r <= 0) return;
      into.append(buf, static_cast<std::size_t>(r));
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  int running = n;
  while (running > 0) {
    for (int rank = 0; rank < n; ++rank) {
      auto& c = children[static_cast<std::size_t>(rank)];
      auto& res = results[static_cast<std::size_t>(rank)];
      res.rank = rank;
      if (c.pid < 0) continue;
      drain(c.read_fd, res.message);
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        drain(c.read_fd, res.message);
        if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
        c.pid = -1;
        --running;
      }
    }
    if (running == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (int rank = 0; rank < n; ++rank) {
        auto& c = children[static_cast<std::size_t>(rank)];
        if (c.pid < 0) continue;
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
        results[static_cast<std::size_t>(rank)].timed_out = true;
        c.pid = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& c : children) ::close(c.read_fd);
  return results;
}

}  // namespace fastrun::test
