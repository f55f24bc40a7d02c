#pragma once
// Real-process harness for the shm backend tests: the parent hosts an shm:// store named after
// a fresh run id, forks N ranks, each builds its groups from a GroupSpec over that store and runs
// the body; the parent reaps every child within a deadline (SIGKILL on expiry) and can SIGKILL
// one rank mid-run (left unreaped until the others finish, so a zombie must read as dead).
// A child reports failure through its exit code and a pipe carrying the error text.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/registry.h"
#include "fastrun/runtime/process_group/process_group.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"

namespace fastrun::shm_test {

// Raised by checks inside a rank; its text reaches the parent.
struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
void expect(bool ok, fmt::format_string<Args...> f, Args&&... args) {
  if (!ok) throw CheckFailed(fmt::format(f, std::forward<Args>(args)...));
}

inline std::unique_ptr<ProcessGroup> make_group(const GroupSpec& spec) { return backend::find("shm")(spec); }

struct Rank {
  int rank = 0;
  int size = 1;
  std::string run_id;
  std::shared_ptr<Store> store;  // the job's unprefixed store (also the failure store)

  // A group of `members` (global ranks, this rank among them) named `name`.
  std::unique_ptr<ProcessGroup> group(const std::string& name, std::vector<int> members,
                                      Duration op_timeout = std::chrono::seconds(30)) const {
    GroupSpec spec;
    spec.store = std::make_shared<PrefixStore>("group/" + name, store->clone());
    spec.size = static_cast<int>(members.size());
    spec.rank = -1;
    for (int i = 0; i < spec.size; ++i)
      if (members[static_cast<std::size_t>(i)] == rank) spec.rank = i;
    spec.global_ranks = std::move(members);
    spec.name = name;
    spec.run_id = run_id;
    spec.timeout = std::chrono::seconds(20);
    spec.op_timeout = op_timeout;
    spec.failure_store = store;
    return make_group(spec);
  }
  std::unique_ptr<ProcessGroup> world(Duration op_timeout = std::chrono::seconds(30)) const {
    std::vector<int> all;
    for (int i = 0; i < size; ++i) all.push_back(i);
    return group("world", all, op_timeout);
  }
};

struct Outcome {
  bool exited = false;    // exited normally (else killed or timed out)
  int code = -1;          // exit code when exited
  int signal = 0;         // terminating signal
  std::string error;      // the child's error text
};

struct RunOptions {
  std::chrono::milliseconds timeout{30000};
  int kill_rank = -1;                       // SIGKILL this rank ...
  std::chrono::milliseconds kill_after{0};  // ... this long after the start
};

inline std::string unique_run_id() {
  static std::atomic<int> counter{0};
  return fmt::format("shmtest{}x{}", ::getpid(), counter++);
}

// Entries of /dev/shm whose name contains `token`.
inline std::vector<std::string> shm_entries(const std::string& token) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(token) != std::string::npos) found.push_back(name);
  }
  return found;
}

// Runs `body` on n forked ranks; returns each rank's outcome. Leaves no child behind.
inline std::vector<Outcome> run_ranks(int n, const std::function<void(const Rank&)>& body, const RunOptions& opt = {},
                                      std::string* run_id_out = nullptr) {
  const std::string run_id = unique_run_id();
  if (run_id_out) *run_id_out = run_id;
  auto host = host_store("shm://" + run_id + "-store");
  const std::string address = host->address();
  std::vector<pid_t> pids(static_cast<std::size_t>(n), -1);
  std::vector<int> pipes(static_cast<std::size_t>(n), -1);
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int code = 0;
      std::string error;
      try {
        Rank rank{r, n, run_id, std::shared_ptr<Store>(connect_store(address))};
        body(rank);
      } catch (const std::exception& e) {
        error = e.what();
        code = 1;
      } catch (...) {
        error = "unknown exception";
        code = 1;
      }
      if (!error.empty()) {
        const auto w = ::write(fds[1], error.data(), error.size());
        (void)w;
      }
      ::_exit(code);
    }
    ::close(fds[1]);
    pids[static_cast<std::size_t>(r)] = pid;
    pipes[static_cast<std::size_t>(r)] = fds[0];
  }
  std::vector<Outcome> out(static_cast<std::size_t>(n));
  std::vector<bool> reaped(static_cast<std::size_t>(n), false);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + opt.timeout;
  bool killed = false;
  int left = n;
  auto reap = [&](int r, int status) {
    auto& o = out[static_cast<std::size_t>(r)];
    o.exited = WIFEXITED(status);
    o.code = o.exited ? WEXITSTATUS(status) : -1;
    o.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    reaped[static_cast<std::size_t>(r)] = true;
    --left;
  };
  while (left > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (!killed && opt.kill_rank >= 0 && now - start >= opt.kill_after) {
      ::kill(pids[static_cast<std::size_t>(opt.kill_rank)], SIGKILL);
      killed = true;
    }
    for (int r = 0; r < n; ++r) {
      if (reaped[static_cast<std::size_t>(r)]) continue;
      // The killed rank stays a zombie until the survivors are done.
      if (r == opt.kill_rank && killed && left > 1) continue;
      int status = 0;
      if (::waitpid(pids[static_cast<std::size_t>(r)], &status, WNOHANG) == pids[static_cast<std::size_t>(r)])
        reap(r, status);
    }
    if (left > 0 && now >= deadline) {
      for (int r = 0; r < n; ++r) {
        if (reaped[static_cast<std::size_t>(r)]) continue;
        ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
        int status = 0;
        ::waitpid(pids[static_cast<std::size_t>(r)], &status, 0);
        reap(r, status);
        out[static_cast<std::size_t>(r)].error = "timed out (killed by the test harness)";
      }
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int r = 0; r < n; ++r) {
    char buf[4096];
    ssize_t got;
    while ((got = ::read(pipes[static_cast<std::size_t>(r)], buf, sizeof buf)) > 0)
      out[static_cast<std::size_t>(r)].error.append(buf, static_cast<std::size_t>(got));
    ::close(pipes[static_cast<std::size_t>(r)]);
  }
  return out;
}

inline std::string describe(const std::vector<Outcome>& out) {
  std::string s;
  for (std::size_t r = 0; r < out.size(); ++r)
    s += fmt::format("rank {}: exited={} code={} signal={} error='{}'\n", r, out[r].exited, out[r].code,
                     out[r].signal, out[r].error);
  return s;
}

inline bool all_ok(const std::vector<Outcome>& out) {
  for (const auto& o : out)
    if (!o.exited || o.code != 0) return false;
  return true;
}

}  // namespace fastrun::shm_test
